"""The first program of every sandbox: join the submission's cgroup, set its resource
limits, become bubblewrap; and the one way a sandbox's processes are killed.

It runs as ``python -S enter.py`` (the file, not the package: no site packages, nothing
imported but the standard library, started in a few milliseconds), before ``bwrap``, by
exec: no ``preexec_fn``, which is unsafe in a threaded process such as a Jupyter kernel
manager::

    python -S enter.py LIMITS CGROUPS [--wall SECONDS] -- COMMAND...

``LIMITS``: a JSON list of ``[name, value]`` resource limits (``RLIMIT_CPU``...);
``CGROUPS``: a JSON list of cgroup folders to join (one on cgroup v2, one per controller on
v1). With ``--wall`` the command runs as a child, killed with everything in its cgroups
when the seconds are spent or this process is told to stop (SIGTERM): for launchers that
take a command line but cannot kill a tree (Jupyter's kernel manager).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Sequence


def set_limits(pairs: Sequence[Sequence]) -> None:
    """Each ``(name, value)`` as both the soft and hard resource limit."""
    for name, value in pairs:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(getattr(resource, name), (value, value))


def join(cgroups: Sequence[str]) -> None:
    """Move this process into each cgroup folder (its children follow)."""
    for folder in cgroups:
        with open(os.path.join(folder, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


def members(cgroups: Sequence[str]) -> set[int]:
    """Every process in the cgroup folders."""
    found: set[int] = set()
    for folder in cgroups:
        with contextlib.suppress(OSError), open(os.path.join(folder, "cgroup.procs")) as f:
            found |= {int(line) for line in f if line.strip()}
    return found


def kill_tree(pid: int | None, cgroups: Sequence[str] = ()) -> None:
    """SIGKILL the process group led by ``pid`` and every process in ``cgroups``
    (``cgroup.kill`` where the kernel has it; else each member until none is left)."""
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    inside = members(cgroups)
    if not inside - {os.getpid()}:  # all gone already (a sandbox that ended)
        return
    if os.getpid() not in inside:  # (a supervising launcher is a member)
        for folder in cgroups:
            with contextlib.suppress(OSError), \
                    open(os.path.join(folder, "cgroup.kill"), "w") as f:
                f.write("1")
    for _ in range(200):  # processes may fork while being killed
        left = members(cgroups) - {os.getpid()}
        if not left:
            return
        for p in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.01)


def cpu_seconds(cgroups: Sequence[str]) -> float | None:
    """CPU time used by everything in the cgroups so far (None: not accounted)."""
    for folder in cgroups:
        with contextlib.suppress(OSError, ValueError), \
                open(os.path.join(folder, "cpu.stat")) as f:  # v2
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        with contextlib.suppress(OSError, ValueError), \
                open(os.path.join(folder, "cpuacct.usage")) as f:  # v1
            return int(f.read()) / 1e9
    return None


def supervise(argv: Sequence[str], cgroups: Sequence[str], wall: float,
              cpu: float | None) -> int:
    """Run ``argv`` as a child; kill its tree when ``wall`` seconds or ``cpu`` CPU seconds
    are spent, on SIGTERM, or when the grader that started this process has ended (a class
    run killed or stopped without shutting its Jupyter kernels down); its exit code."""
    parent = os.getppid()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.execvp(argv[0], list(argv))
        finally:
            os._exit(127)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("stopped"))
    signal.signal(signal.SIGINT, lambda *_: os.kill(pid, signal.SIGINT))
    deadline = time.monotonic() + wall
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        used = cpu_seconds(cgroups) if cpu is not None else None
        why = (stop[0] if stop else
               "the grader that started it has ended" if os.getppid() != parent else
               f"the {wall:g} s budget is spent" if time.monotonic() > deadline else
               f"its processes used {cpu:g} s of CPU" if used is not None and used > cpu else
               None)
        if why:
            print(f"tilelab sandbox: {why}; stopped", file=sys.stderr)
            kill_tree(pid, cgroups)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.2)
    kill_tree(None, cgroups)  # what it left behind
    return os.waitstatus_to_exitcode(status) & 0xFF


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    wall: float | None = None
    cpu: float | None = None
    if "--" not in args or args.index("--") < 2:
        print("usage: python -S enter.py LIMITS CGROUPS [--wall S] [--cpu S] -- COMMAND...",
              file=sys.stderr)
        return 2
    cut = args.index("--")
    opts, command = args[2:cut], args[cut + 1:]
    for flag, value in zip(opts[::2], opts[1::2], strict=False):
        if flag == "--wall":
            wall = float(value)
        elif flag == "--cpu":
            cpu = float(value)
    pairs, cgroups = json.loads(args[0]), json.loads(args[1])
    try:
        join(cgroups)
    except OSError as exc:
        print(f"tilelab sandbox: could not join its cgroup ({exc}); not started",
              file=sys.stderr)
        return 126
    set_limits(pairs)
    if wall is None:
        os.execvp(command[0], command)
    return supervise(command, cgroups, wall, cpu)


if __name__ == "__main__":
    sys.exit(main())
