"""One GPU shared by several grading tasks, its timed steps alone on it.

A class run may give a GPU several tasks at once (compile, correctness, the sanitizer and
the notebook's execution overlap, on the GPU and the CPU cores), but a kernel is timed,
or its counters read, with no other work on that GPU. The tasks of one GPU share a lock
folder (``TILELAB_GPU_LOCK``, made by the class run under its scratch, one per GPU) and
take a readers-writer lock on it with ``flock``:

- **shared** by every piece of GPU work that is not timed: the grading worker holds it from
  its start (the CUDA context, compile, correctness, the sanitizer's tools it starts), and
  the grader holds it for the notebook's execution (:func:`shared`);
- **exclusive** around the timed step and the counter step (:func:`exclusive`): it waits
  for every shared holder to finish, and new work waits for it (a turnstile file first, so
  that a stream of shared holders cannot starve a timed step).

What a submission could do with it, and why the verdicts stay sound:

- the lock folder is bound read-only into the grading worker's sandbox only, where no host
  code of a submission runs on the GPU backend (a kernel is device code: it cannot call
  ``flock``); the notebook's sandbox, where a learner's Python runs, never sees it: the
  grader holds the shared lock on its own descriptor while that notebook runs, so the
  notebook can neither release it nor use the GPU while a kernel is timed;
- nothing in a sandbox can delete or replace the lock files (read-only bind);
- holding it forever: a lock taken with ``flock`` belongs to open descriptors and ends with
  the last process holding them; every sandbox is killed, with its whole pid namespace, at
  the end of its time budget, and a timed step holds it for at most :data:`HOLD_LIMIT`
  seconds before its process ends itself; a waiter gives up after :data:`WAIT_LIMIT`
  seconds (the speed is then "not measured", with the reason), never hangs;
- forging a time: the lock decides only when the worker times; the times are taken by the
  worker's own CUDA events, as with one task per GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tilelab import settings

#: The environment variable naming this GPU's lock folder (unset: no lock is taken).
ENV = settings.GPU_LOCK.name
#: Where a grading sandbox sees the lock folder.
INSIDE = "/opt/tilelab-gpu-lock"
#: Seconds a task waits for the lock before it gives up.
WAIT_LIMIT = 600.0
#: Seconds a timed step may hold the GPU alone before its process ends itself.
HOLD_LIMIT = 120
_POLL = 0.005


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
    for name in ("turn", "gpu"):
        (path / name).touch()
    return path


def _open(path: Path) -> int:
    """A lock file, opened read-only (made where it is missing and its folder writable: a
    folder named to workers started elsewhere may come empty)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_CREAT, 0o644)


def _take(fd: int, how: int, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise GpuBusy(f"the GPU stayed busy with other grading tasks for more than "
                              f"{WAIT_LIMIT:g} s") from None
            time.sleep(_POLL)


class GpuLock:
    """The two lock files of one GPU's folder, opened read-only (a read-only bind works)."""

    def __init__(self, path: Path, wait: float = WAIT_LIMIT) -> None:
        self.path, self.wait = Path(path), wait
        self.turn, self.gpu = _open(self.path / "turn"), _open(self.path / "gpu")
        self.mode = 0  # 0, LOCK_SH or LOCK_EX: what this process holds on `gpu`

    def close(self) -> None:
        for fd in (self.turn, self.gpu):
            with contextlib.suppress(OSError):
                os.close(fd)

    def hold_shared(self) -> None:
        """Take it shared (until :meth:`release`, or until the process ends: a grading
        worker's CUDA context is torn down at its exit, still under the lock); waits while
        a timed step holds or awaits the GPU."""
        deadline = time.monotonic() + self.wait
        _take(self.turn, fcntl.LOCK_EX, deadline)  # a waiting timed step goes first
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
        """GPU work that is not timed, for the ``with`` block (see :meth:`hold_shared`)."""
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
def shared() -> Iterator[None]:
    """The shared lock of this process's GPU, where one is named (else nothing)."""
    lock = worker_lock()
    if lock is None:
        yield
        return
    with lock.shared():
        yield


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """The GPU alone for a timed step, where a lock is named (else nothing)."""
    lock = worker_lock()
    if lock is None:
        yield
        return
    with lock.exclusive():
        yield


def sandbox_binds() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The read-only bind and environment that give a grading worker its GPU's lock."""
    path = folder()
    if path is None:
        return [], {}
    for name in ("turn", "gpu"):  # the sandbox sees them read-only: they must exist first
        os.close(_open(path / name))
    return [(str(path), INSIDE)], {ENV: INSIDE}
