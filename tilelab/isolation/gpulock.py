"""One GPU shared by several grading tasks, its timed launches alone on it.

A class run may give a GPU several tasks at once: their compiles, CPU checks, emulator runs
and nbgrader's steps overlap on the CPU cores, and their untimed GPU work overlaps on the
GPU, but a kernel is timed with no other work on that GPU. The tasks of one GPU share a
lock folder (``TILELAB_GPU_LOCK``, made by the class run under its scratch, one per GPU)
holding three files, locked with ``flock``:

- ``gpu``, a readers-writer lock. **Shared** (:func:`shared`) around each piece of work
  that puts something on the GPU and is not timed: a CUDA context's start and its teardown
  at the process's end (unless ``TILELAB_START_LOCK=none``, :func:`start_mode`), a
  module's load, a correctness launch with its copies, the sanitizer's launch, a speed
  run's buffers and copies. Compiling, making inputs, comparing
  with float64 and the emulator's runs hold nothing. **Exclusive** (:func:`exclusive`)
  around one round of a speed run's timed launches (each kernel's L2 flush, start event,
  launch, end event): it waits until no other task has work on the GPU, and new work waits
  for it. Every shared region ends with its work finished on the GPU (a synchronize, or a
  copy back to the host), so an exclusive region starts on an idle GPU;
- ``turn``, a turnstile taken before either mode, so that a stream of shared holders
  cannot starve a timed round;
- ``ncu``, the profiler's mutex (:func:`profiler`): held around the one launch an Nsight
  Compute process counts (two profiled launches at once fail: the driver gives its
  profiling resources to one), so several ncu processes overlap on one GPU but for their
  counted launches (measured on an H100: eight at once, every count as when read alone).
  The counted launch takes ``gpu`` as :func:`counted_mode` says: alone by default, or
  shared where ``TILELAB_COUNTERS_LOCK=shared`` (the figures the lesson gate reads are
  counts of requests, sectors and wavefronts, not times; ``tilelab bench counters_load``
  reads them with the GPU to itself and beside a process that keeps it busy, and says
  whether they agree on this GPU); the process's other launches share ``gpu``.

What a submission could do with it, and why the verdicts stay sound:

- the lock folder is bound read-only into the grading worker's sandbox only, where no host
  code of a submission runs (a kernel is device code: it cannot call ``flock``); the
  notebook's sandbox, where a learner's Python runs, gets no GPU at all in a class run that
  shares one (its hidden tests read the clean grader's verdicts), so it needs no lock and
  cannot put work beside a timed launch;
- nothing in a sandbox can delete or replace the lock files (read-only bind);
- holding it long: a lock taken with ``flock`` belongs to open descriptors and ends with
  the last process holding them; every sandbox is killed, with its whole pid namespace, at
  the end of its time budget; a timed round holds it for at most :data:`HOLD_LIMIT`
  seconds before its process ends itself; a waiter gives up after :data:`WAIT_LIMIT`
  seconds (the speed is then "not measured", with the reason), never hangs;
- forging a time: the lock decides only when the worker times; the times are taken by the
  worker's own CUDA events on launches no other work overlaps, as with one task per GPU.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from tilelab import settings

#: The environment variable naming this GPU's lock folder (unset: no lock is taken).
ENV = settings.GPU_LOCK.name
#: Where a grading sandbox sees the lock folder.
INSIDE = "/opt/tilelab-gpu-lock"
#: The lock folder's files (see the module's docstring).
FILES = ("turn", "gpu", "ncu")
#: Seconds a task waits for the lock before it gives up.
WAIT_LIMIT = 600.0
#: Seconds a timed round may hold the GPU alone before its process ends itself.
HOLD_LIMIT = 120
#: The two ways a counted launch may take the lock (``TILELAB_COUNTERS_LOCK``).
ALONE, SHARED = "alone", "shared"
#: A CUDA start that takes no lock (``TILELAB_START_LOCK``; the other way is :data:`SHARED`).
NONE = "none"
_POLL = 0.002
T = TypeVar("T")


class GpuBusy(RuntimeError):
    """The GPU's lock could not be had within the wait limit."""


def folder() -> Path | None:
    """This GPU's lock folder, from ``TILELAB_GPU_LOCK`` (None: no lock)."""
    value = settings.GPU_LOCK.get()
    return Path(value) if value else None


def make(root: Path, gpu: str) -> Path:
    """A lock folder for GPU ``gpu`` under a class run's scratch ``root``."""
    path = Path(root) / f"gpu-{gpu}"
    path.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (path / name).touch()
    return path


def _open(path: Path) -> int:
    """A lock file, opened read-only (made where it is missing and its folder writable: a
    folder named to workers started elsewhere may come empty)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_CREAT, 0o644)


def _take(fd: int, how: int, deadline: float, what: str = "other grading tasks") -> None:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise GpuBusy(f"the GPU stayed busy with {what} for more than "
                              f"{WAIT_LIMIT:g} s") from None
            time.sleep(_POLL)


class GpuLock:
    """The lock files of one GPU's folder, opened read-only (a read-only bind works).

    Regions nest within one process: a shared region inside a shared or exclusive one,
    and an exclusive one inside an exclusive one, take nothing more."""

    def __init__(self, path: Path, wait: float = WAIT_LIMIT) -> None:
        self.path, self.wait = Path(path), wait
        self.turn, self.gpu = _open(self.path / "turn"), _open(self.path / "gpu")
        self.ncu = _open(self.path / "ncu")
        self.mode = 0  # 0, LOCK_SH or LOCK_EX: what this process holds on `gpu`
        self.profiling = False

    def close(self) -> None:
        for fd in (self.turn, self.gpu, self.ncu):
            with contextlib.suppress(OSError):
                os.close(fd)

    def hold_shared(self) -> None:
        """Take it shared (until :meth:`release`); waits while a timed round holds or
        awaits the GPU. Nothing where this process holds it already."""
        if self.mode:
            return
        deadline = time.monotonic() + self.wait
        _take(self.turn, fcntl.LOCK_EX, deadline)  # a waiting timed round goes first
        try:
            _take(self.gpu, fcntl.LOCK_SH, deadline)
        finally:
            fcntl.flock(self.turn, fcntl.LOCK_UN)
        self.mode = fcntl.LOCK_SH

    def release(self) -> None:
        fcntl.flock(self.gpu, fcntl.LOCK_UN)
        self.mode = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Untimed GPU work, for the ``with`` block (see :meth:`hold_shared`)."""
        if self.mode:  # already held, shared or alone
            yield
            return
        self.hold_shared()
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def exclusive(self, hold: int = HOLD_LIMIT) -> Iterator[None]:
        """The GPU alone (a shared hold of this process's is given up meanwhile and taken
        back after); past ``hold`` seconds the process is ended (SIGALRM), which frees it."""
        before = self.mode
        if before == fcntl.LOCK_EX:
            yield
            return
        deadline = time.monotonic() + self.wait
        if before:  # first: two tasks each holding it shared and awaiting the turn would
            fcntl.flock(self.gpu, fcntl.LOCK_UN)  # wait for each other for ever
            self.mode = 0
        _take(self.turn, fcntl.LOCK_EX, deadline)
        try:
            _take(self.gpu, fcntl.LOCK_EX, deadline)
            self.mode = fcntl.LOCK_EX
            main = threading.current_thread() is threading.main_thread()  # signals: main only
            if main:
                alarm = signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(hold)
            try:
                yield
            finally:
                if main:
                    signal.alarm(0)
                    signal.signal(signal.SIGALRM, alarm)
                fcntl.flock(self.gpu, before or fcntl.LOCK_UN)  # turn held: no one waits
                self.mode = before
        finally:
            fcntl.flock(self.turn, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def profiler(self) -> Iterator[None]:
        """This GPU's one profiler, for the ``with`` block (independent of ``gpu``: the
        launches it counts take that themselves)."""
        if self.profiling:
            yield
            return
        _take(self.ncu, fcntl.LOCK_EX, time.monotonic() + self.wait,
              "another task's Nsight Compute")
        self.profiling = True
        try:
            yield
        finally:
            fcntl.flock(self.ncu, fcntl.LOCK_UN)
            self.profiling = False


_HELD: GpuLock | None = None


def worker_lock() -> GpuLock | None:
    """This process's lock of its GPU (opened once), or None where no lock is named."""
    global _HELD
    path = folder()
    if path is None:
        return None
    if _HELD is None or _HELD.path != path:
        _HELD = GpuLock(path)
    return _HELD


@contextlib.contextmanager
def _held(take: Callable[[GpuLock], contextlib.AbstractContextManager[None]]) -> Iterator[None]:
    lock = worker_lock()
    if lock is None:
        yield
        return
    with take(lock):
        yield


def shared() -> contextlib.AbstractContextManager[None]:
    """Untimed GPU work: the shared lock of this process's GPU, where one is named."""
    return _held(GpuLock.shared)


def exclusive() -> contextlib.AbstractContextManager[None]:
    """A timed round: this process's GPU alone, where a lock is named (else nothing)."""
    return _held(GpuLock.exclusive)


def profiler() -> contextlib.AbstractContextManager[None]:
    """This GPU's one Nsight Compute, where a lock is named (else nothing)."""
    return _held(GpuLock.profiler)


def counted_mode() -> str:
    """How the launches Nsight Compute counts take the lock: :data:`ALONE` or :data:`SHARED`."""
    return settings.COUNTERS_LOCK.get()


def region(mode: str) -> contextlib.AbstractContextManager[None]:
    """:func:`exclusive` for :data:`ALONE`, :func:`shared` for :data:`SHARED`."""
    if mode not in (ALONE, SHARED):
        raise ValueError(f"a lock region is {ALONE!r} or {SHARED!r}, not {mode!r}")
    return exclusive() if mode == ALONE else shared()


def start_mode() -> str:
    """How a process's CUDA start and teardown take the lock: :data:`SHARED` or
    :data:`NONE` (``TILELAB_START_LOCK``)."""
    return settings.START_LOCK.get()


def starting() -> contextlib.AbstractContextManager[None]:
    """How the rest of a process's start holds the GPU, as its CUDA start does
    (:func:`start_cuda`): shared, or nothing where :func:`start_mode` is :data:`NONE`. Taken
    after :func:`profiler` where both are (the order every holder of both keeps)."""
    return contextlib.nullcontext() if start_mode() == NONE else shared()


def start_cuda(start: Callable[[], T]) -> T:
    """``start()`` (the process's CUDA start, e.g. ``get_runtime("gpu")``) under the shared
    lock; and from the first of the process's :mod:`atexit` handlers on, the lock shared
    again until the process ends (its descriptors close last), so that the teardown
    ``start`` registered (PyCUDA's ``autoinit``) and the buffers and modules freed as the
    interpreter ends are under it too: a context's start and end allocate and free GPU
    memory. Where no lock is named, or :func:`start_mode` is :data:`NONE` (``tilelab bench
    start_load`` found that other processes' starts and ends leave a timed launch as it
    is), only ``start()``: a timed round then waits for no process's start or end."""
    lock = worker_lock()
    if lock is None or start_mode() == NONE:
        return start()
    with lock.shared():
        result = start()
    atexit.register(lock.hold_shared)  # runs first: before the teardown registered above
    return result


@contextlib.contextmanager
def private() -> Iterator[None]:
    """Where no lock is named (a learner's check, a notebook's): a lock folder of this
    process's own for the ``with`` block, named to the processes it starts, so that its
    sanitizers and Nsight Compute, which run beside its speed run, keep off its timed
    rounds. Where a class run names one, that one."""
    global _HELD
    if folder() is not None:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="tilelab-gpulock-") as tmp:
        path = make(Path(tmp), "own")
        try:
            with settings.environ({ENV: str(path)}):
                yield
        finally:
            if _HELD is not None and _HELD.path == path:
                _HELD.close()
                _HELD = None


def sandbox_binds() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The read-only bind and environment that give a grading worker its GPU's lock (and
    the way its counted launches take it)."""
    path = folder()
    if path is None:
        return [], {}
    for name in FILES:  # the sandbox sees them read-only: they must exist first
        os.close(_open(path / name))
    return [(str(path), INSIDE)], {ENV: INSIDE, settings.COUNTERS_LOCK.name: counted_mode(),
                                   settings.START_LOCK.name: start_mode()}
