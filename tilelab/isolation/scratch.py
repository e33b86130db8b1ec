"""Every temporary folder the grader and the class run make, under one folder per process,
and the folders of killed processes removed by the next.

A process's temporary folders (a grading sandbox's private folder, a notebook kernel's
connection folder, a class-run task's private course, its verdicts, the gradebook's
copy...) are made by :func:`folder` inside ``$TMPDIR/tilelab-<pid>-<random>``, whose lock
file the process holds locked (``flock``) while it lives. Each folder is removed when its
block ends, and the process's own folder when it exits. A process killed before that (a
SIGKILL, a timeout, a stopped worker) leaves its folder unlocked: the next process that
makes one removes it, after unmounting whatever is still mounted there (a kernel's
connection folder is a tmpfs where the grader may mount one).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from tilelab.isolation.limits import unmount

PREFIX = "tilelab-"
LOCK = ".lock"
_NAME = re.compile(rf"^{PREFIX}\d+-[a-z0-9_]+$")

_own: tuple[int, Path, int] | None = None  # (pid, folder, locked descriptor)
_guard = threading.Lock()


def parent() -> Path:
    """This process's folder for its temporary folders (made, and the folders dead
    processes left swept, on first use; a forked child makes its own)."""
    global _own
    with _guard:
        if _own is not None and _own[0] == os.getpid():
            return _own[1]
        sweep()
        top = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        fd = os.open(top / f"{LOCK}.new", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(top / f"{LOCK}.new", top / LOCK)  # a sweep sees it only locked
        if _own is None:
            atexit.register(_remove_own)
        _own = (os.getpid(), top, fd)
        return top


def make(name: str) -> Path:
    """A fresh folder ``name-<random>`` in this process's folder (its owner only); remove
    it with :func:`remove`, or let :func:`folder` do it."""
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent()))


@contextlib.contextmanager
def folder(name: str) -> Iterator[Path]:
    """A fresh folder for the block, removed at its end whatever happened in it."""
    path = make(name)
    try:
        yield path
    finally:
        remove(path)


def remove(path: str | os.PathLike) -> None:
    """Remove a folder and everything in it: what a sandbox made unwritable too, after
    unmounting what is mounted inside it."""
    path = os.fspath(path)
    for point in sorted(_mounts_under(path), key=len, reverse=True):
        with contextlib.suppress(OSError):
            unmount(point)
    shutil.rmtree(path, onerror=_unprotect)


def _unprotect(func: object, path: str, exc: object) -> None:
    """rmtree's second try at ``path``: its folder (and it, if a folder) made writable."""
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, stat.S_IRWXU)
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _mounts_under(path: str) -> list[str]:
    """The mount points at or below ``path`` (this process's view)."""
    root = os.path.realpath(path)
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split(" ")[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return found


def sweep(top: str | os.PathLike | None = None) -> int:
    """Remove the process folders in ``top`` (the temp folder) whose process has ended:
    this user's, and only where the lock can be taken. How many went."""
    top = os.fspath(top or tempfile.gettempdir())
    removed = 0
    with contextlib.suppress(OSError), os.scandir(top) as entries:
        for entry in entries:
            if not _NAME.match(entry.name):
                continue
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False) or \
                        entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                fd = os.open(os.path.join(entry.path, LOCK),
                             os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its process has ended
                except BlockingIOError:
                    continue
                finally:
                    os.close(fd)
                remove(entry.path)
                removed += 1
    return removed


def _remove_own() -> None:
    if _own is not None and _own[0] == os.getpid():
        remove(_own[1])
        with contextlib.suppress(OSError):
            os.close(_own[2])
