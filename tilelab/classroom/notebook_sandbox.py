"""nbgrader's steps over one learner's notebook, run in a sandbox of their own.

Everything that reads a submitted notebook runs in one child process per submission
(:mod:`tilelab.classroom.nbgrader_steps`): reading its kernel cells, nbgrader's autograde
(its preprocessors, the client that takes the kernel's outputs), the scrub of the executed
notebook, and generate_feedback's HTML export. The child runs under bubblewrap
(:mod:`tilelab.isolation.bubblewrap`: no network, the private course of its task as its
only writable folder, the source notebooks hidden, nothing else of the machine) in a
cgroup of its own, with the caps of :func:`step_limits` and a time limit for each step;
its kernel gets a sandbox of its own from :class:`~tilelab.classroom.kernel_broker.
KernelLauncher`. A child that runs out of memory or time, or dies, costs that step and
says so in words a learner can read (:attr:`NotebookSandbox.problem`); the class run goes
on. Unsandboxed (``--no-sandbox``) the child still runs capped, without bubblewrap.

The grader talks to the child over two pipes: JSON lines from it on a descriptor of its
own, commands to it on its standard input. Scores never come from it: the clean grade
writes them after the child's autograde has ended, and the task reads the gradebook's
rows before the child's feedback step starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilelab import settings
from tilelab.classroom import guards, kernel_broker
from tilelab.classroom.jupyter_sandbox import REFERENCE_KERNELS, kernel_limits
from tilelab.isolation import bubblewrap, enter
from tilelab.isolation.limits import Cgroup, Limits, missing_caps, shim

#: What nbgrader's own process may use, per submission (its kernel has a cgroup of its own)
MEMORY = 3 << 30
#: Seconds each step may take beyond the notebook's own run (reading the notebook and its
#: kernels; nbgrader's preprocessors and writing the autograded copy; the feedback page)
READ_SECONDS = 120.0
STEP_SECONDS = 300.0
#: Where the private course is, as the sandbox sees it
INSIDE = bubblewrap.WORK
STDERR_KEPT = 64 << 10
#: What the child runs (its descriptor's number follows). nbgrader imports Jupyter's server
#: for its extensions, and with it a grammar of URIs that jsonschema compiles at its import
#: for format checks no step here makes: some 2 s of CPU (7 s on a loaded 2-core machine)
#: in every submission's child, out of about 3; it is left out.
#: Its results are on its descriptor as it ends: it ends at once (no interpreter teardown).
STEPS_MODULE = ["-c", "import os, sys; sys.modules['rfc3987_syntax'] = None; "
                      "from tilelab.classroom.nbgrader_steps import main; os._exit(main())"]


def step_limits(notebook_timeout: float) -> Limits:
    """The caps of the sandbox of nbgrader's steps (the notebook's own run, its kernel in a
    sandbox of its own, is within ``notebook_timeout``)."""
    wall = READ_SECONDS + notebook_timeout + 2 * STEP_SECONDS
    return Limits(wall_seconds=wall, cpu_seconds=int(wall), memory=MEMORY,
                  address_space=None if missing_caps() is None else 2 * MEMORY,
                  processes=64, file_bytes=256 << 20, output_bytes=STDERR_KEPT,
                  tmp_bytes=64 << 20)


def _extra_packages() -> list[str]:
    """Folders on this process's ``PYTHONPATH`` that hold installed packages (a machine
    set up with ``pip install --target``) and not the course: the sandbox binds them."""
    course = str(Path(bubblewrap.package_dir()).parent)
    out = []
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and os.path.isdir(p) and os.path.realpath(p) != os.path.realpath(course) \
                and not os.path.isdir(os.path.join(p, "tilelab")):
            out.append(os.path.realpath(p))
    return sorted(set(out))


@dataclass
class NotebookSandbox:
    """One submission's sandbox of nbgrader's steps (use as a context manager)."""

    root: Path  # the task's private course
    assignment: str
    student: str
    notebook: str  # the notebook's file name
    cell_timeout: int
    notebook_timeout: int
    sandboxed: bool = True
    problem: str | None = None  # why the last step gave no result, in a learner's words
    stderr: bytearray = field(default_factory=bytearray)
    _proc: subprocess.Popen | None = None
    _cgroup: Cgroup | None = None
    _chan: int = -1
    _buf: bytes = b""
    _launcher: kernel_broker.KernelLauncher | None = None
    _ipc: tuple[str, bool] | None = None
    _before: set[int] = field(default_factory=set)

    @property
    def kernel_cwd(self) -> Path:
        return self.root / "autograder" / "autograded" / self.student / self.assignment

    def inside(self, path: Path) -> str:
        """``path`` of the private course as the child sees it."""
        if not self.sandboxed:
            return str(path)
        return f"{INSIDE}/{path.relative_to(self.root).as_posix()}".rstrip("/.")

    def __enter__(self) -> NotebookSandbox:
        self._before = set(guards.alive_descendants())
        limits = step_limits(self.notebook_timeout)
        chan_r, chan_w = os.pipe()
        argv = [sys.executable, *STEPS_MODULE, str(chan_w)]
        env = {k: v for k, v in os.environ.items() if k.startswith("TILELAB_")}
        for name in (settings.GPU_LOCK.name, settings.COUNTERS_LOCK.name,
                     settings.START_LOCK.name):
            env.pop(name, None)
        env.update(HOME="/tmp", IPYTHONDIR="/tmp/.ipython", MPLCONFIGDIR="/tmp",
                   JUPYTER_RUNTIME_DIR="/tmp", JUPYTER_CONFIG_DIR="/tmp/.jupyter",
                   JUPYTER_PLATFORM_DIRS="1", JUPYTER_DATA_DIR="/tmp/.local")
        if os.environ.get("JUPYTER_PATH"):
            env["JUPYTER_PATH"] = os.environ["JUPYTER_PATH"]
        if self.sandboxed:
            self._ipc = kernel_broker.socket_folder()
            extra = _extra_packages()
            if extra:
                env["PYTHONPATH"] = os.pathsep.join([bubblewrap.PACKAGE_ROOT, *extra])
            hidden = [("/dev/null", self.inside(p))  # the solutions, for nothing reads them
                      for p in sorted((self.root / "solutions").rglob("*.ipynb"))]
            cmd = bubblewrap.command(
                argv, self.root, env=env, limits=limits, gpu=False,
                read_only=[*((p, p) for p in extra), *hidden],
                writable=[(self._ipc[0], self._ipc[0])], hidden=[REFERENCE_KERNELS])
            proc_env = None
        else:
            cmd, proc_env = argv, {**os.environ, **env, "HOME": os.environ.get("HOME", "")}
        self._cgroup = Cgroup.make(limits)
        try:
            self._proc = subprocess.Popen(
                [*shim(limits, self._cgroup), *cmd], cwd=self.root, env=proc_env,
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(chan_w,), start_new_session=True)
        except BaseException:
            os.close(chan_r)
            self.close()
            raise
        finally:
            os.close(chan_w)
        self._chan = chan_r
        threading.Thread(target=self._drain, daemon=True).start()
        _OPEN.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for chunk in iter(lambda: self._proc.stderr.read1(1 << 16), b""):
            self.stderr += chunk
            del self.stderr[:-STDERR_KEPT]

    def close(self) -> None:
        """End the child, its kernel and everything they left."""
        with contextlib.suppress(ValueError):
            _OPEN.remove(self)
        if self._launcher is not None:
            self._launcher.close()
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # a child between steps ends on its own
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            enter.kill_tree(self._proc.pid, self._cgroup.folders if self._cgroup else [])
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            _gone(self._before)
        if self._cgroup is not None:
            self._cgroup.close()
            self._cgroup = None
        if self._chan >= 0:
            os.close(self._chan)
            self._chan = -1
        if self._ipc is not None:
            kernel_broker.remove_socket_folder(*self._ipc)
            self._ipc = None

    # -------------------------------------------------------------- the protocol

    def _send(self, msg: dict[str, Any]) -> bool:
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def _lines(self, deadline: float) -> Any:
        """The child's messages as they come, until ``deadline`` (then None)."""
        sel = selectors.DefaultSelector()
        sel.register(self._chan, selectors.EVENT_READ)
        try:
            while True:
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    yield json.loads(line)
                left = deadline - time.monotonic()
                if left <= 0:
                    yield None
                    return
                if sel.select(min(left, 1.0)):
                    data = os.read(self._chan, 1 << 20)
                    if not data:
                        yield False  # the child ended
                        return
                    self._buf += data
                    if len(self._buf) > 64 << 20:  # no sound message is that long
                        yield False
                        return
        finally:
            sel.close()

    def _wait(self, key: str, seconds: float, what: str) -> dict[str, Any] | None:
        """The child's next ``key`` message, serving its kernel's requests meanwhile;
        None (and :attr:`problem` says why) where it does not come in ``seconds``."""
        self.problem = None
        for msg in self._lines(time.monotonic() + seconds):
            if msg is None:
                self.problem = (f"nbgrader's {what} ran longer than the {seconds:g} s a "
                                "class run allows it and was stopped")
                self.close()
                return None
            if msg is False:
                self.problem = self._ended(what)
                self.close()
                return None
            if isinstance(msg, dict) and "kernel" in msg and self._launcher is not None:
                self._send(self._launcher.handle(msg))
            elif isinstance(msg, dict) and key in msg:
                return msg[key]
        return None

    def _ended(self, what: str) -> str:
        if self._cgroup is not None and self._cgroup.oom_kills():
            return (f"nbgrader's {what} ran out of the {MEMORY >> 30} GiB of memory a class "
                    "run gives it and was stopped")
        code = self._proc.wait(timeout=10) if self._proc is not None else None
        said = " | ".join(self.stderr.decode("utf-8", "replace").strip().splitlines()[-3:])
        return (f"nbgrader's {what} ended without a result (exit status {code})"
                + (f": {said[-300:]}" if said else ""))

    def start(self, secret: list[str]) -> dict[str, Any] | None:
        """Read the notebook: its kernel cells' sources (by exercise: ``source`` or
        ``error``), and ``refused`` (why nbgrader will not run it, or None)."""
        request = {"root": self.inside(self.root), "assignment": self.assignment,
                   "student": self.student, "notebook": self.notebook,
                   "cell_timeout": self.cell_timeout, "notebook_timeout": self.notebook_timeout,
                   "sandboxed": self.sandboxed, "secret": secret,
                   "ipc_dir": self._ipc[0] if self._ipc else ""}
        if not self._send(request):
            self.problem = self._ended("reading of the notebook")
            return None
        return self._wait("kernels", READ_SECONDS, "reading of the notebook")

    def autograde(self, environment: dict[str, str | None], no_gpu: bool) -> dict[str, Any] | None:
        """nbgrader's autograde and the scrub of what it wrote; its kernel's environment
        (``TILELAB_`` variables over the grader's own; None: unset)."""
        if self.sandboxed:
            limits = kernel_limits(float(self.notebook_timeout), 8 << 30, 256, 1 << 20,
                                   no_gpu or bool(settings.GPU_LOCK.get()))
            self._launcher = kernel_broker.KernelLauncher(
                self._ipc[0] if self._ipc else "", self.kernel_cwd, self.inside(self.kernel_cwd),
                limits, environment, no_gpu or bool(settings.GPU_LOCK.get()))
        if not self._send({"do": "autograde", "environment": environment}):
            self.problem = self._ended("autograde")
            return None
        return self._wait("autograded", self.notebook_timeout + STEP_SECONDS, "autograde")

    def skip_autograde(self) -> None:
        self._send({"do": "skip"})

    def feedback(self) -> dict[str, Any] | None:
        """nbgrader's feedback page."""
        if not self._send({"do": "feedback"}):
            self.problem = self._ended("feedback page")
            return None
        return self._wait("feedback", STEP_SECONDS, "feedback page")


def _gone(before: set[int], seconds: float = 3.0) -> None:
    """Wait (a few seconds at most) until no process started since ``before`` is alive:
    a sandbox's last processes die a moment after it is killed."""
    end = time.monotonic() + seconds
    while set(guards.alive_descendants()) - before and time.monotonic() < end:
        time.sleep(0.05)


_OPEN: list[NotebookSandbox] = []


def stop_all() -> None:
    """End every sandbox of nbgrader's steps this process runs now (from any thread)."""
    for box in list(_OPEN):
        with contextlib.suppress(Exception):
            if box._proc is not None:
                enter.kill_tree(box._proc.pid, box._cgroup.folders if box._cgroup else [])
