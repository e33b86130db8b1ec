"""Grade a kernel source in a fresh child process, with a time limit and resource caps.

The hidden tests, ``tilelab check``, the notebooks' visible checks and the class run all
call :func:`grade_source`. The child (:mod:`tilelab.grading.worker`) sees only the kernel
source, so a learner's Python cannot patch the grader that scores it; a crash, an endless
loop or a flood of output in the child becomes a verdict, never an exception here.

The child starts in a session of its own (``start_new_session``: no ``preexec_fn``, which
is unsafe in a process with threads such as a Jupyter kernel) and caps its own resources
as its first act; the whole session is killed when grading ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.device.backend import Backend
from tilelab.grading.cache import cached_verdict
from tilelab.grading.verdict import Verdict
from tilelab.isolation import basecache, enter, gpulock, scratch
from tilelab.isolation import bubblewrap as bwrap
from tilelab.isolation.limits import FILE_LIMIT, MEMORY_LIMIT, Limits

OUTPUT_LIMIT = 64 * 1024  # of the child's stderr, read back for a crash report


def worker_command(exercise_id: str, src: str, out: str, backend: Backend, speed: bool,
                   sanitize: bool, gate: float | None, trace_reference: bool = False
                   ) -> list[str]:
    """The command line of the grading worker for one source file."""
    cmd = [sys.executable, "-m", "tilelab.grading.worker", "--exercise", exercise_id,
           "--source", src, "--out", out, "--backend", backend.value]
    cmd += ["--no-speed"] if not speed else []
    cmd += ["--no-sanitize"] if not sanitize else []
    cmd += ["--gate", str(gate)] if gate is not None else []
    cmd += ["--trace-reference"] if trace_reference else []
    return cmd


def grade_source(
    exercise_id: str,
    source: str | bytes,
    *,
    backend_name: Backend | str,
    timeout: float | None = None,
    speed: bool = True,
    sanitize: bool = True,
    gate: float | None = None,
    sandboxed: bool | None = None,
    trace_reference: bool = False,
) -> Verdict:
    """Grade ``source`` for an exercise in a clean child process, on the backend the caller
    decided (:func:`tilelab.device.backend.resolve`); always returns a Verdict.

    During a class run (``TILELAB_VERDICT_CACHE`` set) a source the class grader has
    already graded gets that verdict back instead of being graded a second time.
    ``sandboxed``: True grades in a bubblewrap sandbox (raises
    :class:`~tilelab.isolation.bubblewrap.SandboxUnavailable` where none can be made), False
    in a plain child process, None (the default) in a sandbox wherever one can be made.
    ``trace_reference``: the reference kernel's trace too, beside the kernel's (a
    notebook's picture)."""
    ex = exercises.get(exercise_id)
    chosen = Backend(backend_name)
    cached = cached_verdict(exercise_id, source, chosen)
    if cached is not None:
        return cached
    timeout = settings.GRADE_TIMEOUT.get() if timeout is None else timeout
    if use_sandbox(sandboxed):
        data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
        return _grade_sandboxed(ex, chosen, data, timeout,
                                lambda src, out: worker_command(ex.id, src, out, chosen, speed,
                                                                sanitize, gate, trace_reference))
    with scratch.folder("grade") as folder:
        tmp = str(folder)
        src, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "verdict.json")
        with open(src, "wb") as f:
            f.write(source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source)
        cmd = worker_command(ex.id, src, out, chosen, speed, sanitize, gate, trace_reference)
        returncode = _run(cmd, tmp, timeout)
        if returncode is None:
            return Verdict.for_exercise(ex, chosen, message=_too_long(timeout))
        if os.path.exists(out):
            try:
                with open(out, encoding="utf-8") as f:
                    return Verdict.from_dict(json.load(f))
            except (OSError, ValueError, TypeError) as exc:
                return Verdict.for_exercise(
                    ex, chosen, message=f"the grader's verdict could not be read: {exc}")
        return Verdict.for_exercise(ex, chosen, message=_death(returncode, _tail(tmp)))


def use_sandbox(wanted: bool | None) -> bool:
    """Whether to grade in a bubblewrap sandbox: ``wanted`` if given (True raises
    :class:`~tilelab.isolation.bubblewrap.SandboxUnavailable` where none can be made), else
    where one can be made and this process is not already inside one."""
    if wanted is not None:
        if wanted:
            bwrap.require()
        return wanted
    if settings.SANDBOXED.get():
        return False  # already inside one (a notebook in a class run)
    return bwrap.problem() is None


def sandbox_limits(backend: Backend, timeout: float) -> Limits:
    """The grading worker's limits: its time budget, memory (its whole tree's, in its
    cgroup; on the emulator each process's address space too, never on a GPU, where CUDA
    maps vast ranges), files, output."""
    emu = backend is Backend.EMU
    return Limits(
        wall_seconds=timeout,
        cpu_seconds=int(timeout) + 5,
        memory=MEMORY_LIMIT,
        address_space=MEMORY_LIMIT if emu else None,
        file_bytes=FILE_LIMIT,
        output_bytes=OUTPUT_LIMIT,
    )


def _grade_sandboxed(ex: exercises.Exercise, chosen: Backend, data: bytes, timeout: float,
                     command: Callable[[str, str], list[str]]) -> Verdict:
    """The worker in a sandbox over a fresh folder holding only the kernel source, with the
    read-only caches of :mod:`tilelab.isolation.basecache`; the verdict comes back on the pipe
    the sandbox module made, read once every process of the sandbox is gone (never from a
    file the submission could write)."""
    own = basecache.own_builds_allowed()
    read_only, env = basecache.binds(chosen, own)
    if chosen is Backend.GPU:  # a class run's lock of this GPU, shared with its other tasks
        lock_binds, lock_env = gpulock.sandbox_binds()
        read_only, env = read_only + lock_binds, env | lock_env
    with bwrap.private_folder("grade") as work:
        (work / "kernel.cu").write_bytes(data)
        cmd = command(f"{bwrap.WORK}/kernel.cu", f"fd:{bwrap.CHANNEL}")
        res = bwrap.run(cmd, work, limits=sandbox_limits(chosen, timeout),
                        read_only=read_only, env=env)
        if own:
            basecache.keep_builds(work)
    if res.timed_out:
        return Verdict.for_exercise(ex, chosen, message=_too_long(timeout))
    if res.channel:
        try:
            return Verdict.from_dict(json.loads(res.channel.decode("utf-8")))
        except (ValueError, TypeError) as exc:
            return Verdict.for_exercise(
                ex, chosen, message=f"the grader's verdict could not be read: {exc}")
    tail = " | ".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-8:])
    return Verdict.for_exercise(ex, chosen, message=_death(res.returncode or 0, tail))


#: Where a sandbox sees the base cache (see :mod:`tilelab.isolation.basecache`).
BASE_CACHE = basecache.BASE


def _too_long(timeout: float) -> str:
    return (f"grading took longer than {timeout:g} s and was stopped "
            "(an endless loop in the kernel, or a barrier some threads never reach?)")


def _run(cmd: list[str], tmp: str, timeout: float) -> int | None:
    """Run the worker in ``tmp``; its exit status, or None when it ran past ``timeout``."""
    with open(os.path.join(tmp, "stderr.txt"), "wb") as err:
        # stdout is dropped (a printf flood must not fill this process's memory); the
        # child's stderr goes to a file, capped by the worker's RLIMIT_FSIZE
        proc = subprocess.Popen(
            cmd, cwd=tmp, env=dict(os.environ, PYTHONUNBUFFERED="1"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            enter.kill_tree(proc.pid)  # a timed-out child, and anything it started, ends here
            proc.wait()


def _tail(tmp: str) -> str:
    path = os.path.join(tmp, "stderr.txt")
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - OUTPUT_LIMIT))
        lines = f.read().decode("utf-8", "replace").strip().splitlines()[-8:]
    return " | ".join(lines)


def _death(returncode: int, tail: str) -> str:
    """Why the grading process ended without a verdict, in a learner's words."""
    if returncode == -signal.SIGXFSZ:
        return (
            f"the grading process was stopped: it wrote more than {FILE_LIMIT >> 20} MiB of "
            "output (a printf in a loop, or in every thread?). Remove or limit the printf calls."
        )
    if returncode < 0:
        how = f"signal {signal.Signals(-returncode).name}"
    else:
        how = f"exit status {returncode}"
    return f"the grading process died ({how}) before writing a verdict" + (
        f": {tail}" if tail else ""
    )
