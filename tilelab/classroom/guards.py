"""What keeps one submission's Python from reaching anyone else's grade during a class run.

A class run runs each notebook's kernel in a bubblewrap sandbox (see
:mod:`tilelab.classroom.jupyter_sandbox`): it sees a read-only copy of its own submission and
nothing else of the course, so no submission can be changed (and the grader never copies
one back nor deletes one). These guards remain for what a sandbox leaves (and for
``--no-sandbox``):

- :class:`Reaper` kills every process a submission left behind (Linux: this process becomes
  a child subreaper, so even daemonized ones come back to it);
- :class:`GradebookGuard` restores the gradebook when a submission's run changed any row
  that is not that student's own (or broke the file);
- :func:`tilelab.classroom.submissions.solution_shown` counts notebook outputs that show a
  run of reference-solution lines the submission does not hold (for the instructor; the
  feedback keeps them).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import shutil
import sqlite3
import sys
from pathlib import Path

import psutil

from tilelab.isolation import scratch

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


# ------------------------------------------------------------------ processes


def alive_descendants() -> dict[int, psutil.Process]:
    """Every live process below this one (zombies left out: they have ended and only wait
    to be reaped)."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if p.status() != psutil.STATUS_ZOMBIE:
                out[p.pid] = p
    return out


def _subreaper(on: int | None = None) -> int:
    """Whether this process is a child subreaper (Linux; 0 elsewhere); ``on``: set it first."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if on is not None:
            libc.prctl(PR_SET_CHILD_SUBREAPER, on, 0, 0, 0)
        state = ctypes.c_int(0)
        libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(state), 0, 0, 0)
        return state.value
    except (OSError, AttributeError):
        return 0


class Reaper:
    """Kills the processes started inside the ``with`` block that are still alive at its end.
    This process is a child subreaper only meanwhile: an orphan of a later process goes to
    init, never becoming a zombie of a long-lived worker that no block reaps."""

    def __init__(self) -> None:
        self.killed: list[int] = []

    def __enter__(self) -> Reaper:
        self.was_subreaper = _subreaper()
        _subreaper(1)
        self.before = set(alive_descendants())
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(3):  # processes may fork while being killed
            left = [p for pid, p in alive_descendants().items() if pid not in self.before]
            if not left:
                break
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
                    self.killed.append(p.pid)
            psutil.wait_procs(left, timeout=1)  # reaps the ones that became our children
        for p in psutil.Process().children():  # ended after being reparented to us (the
            with contextlib.suppress(psutil.Error):  # sandboxes' processes): reap them
                if p.pid not in self.before and p.status() == psutil.STATUS_ZOMBIE:
                    p.wait(timeout=0)
        _subreaper(self.was_subreaper)


# ------------------------------------------------------------------ gradebook


def _own_rows(student: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    sa = "SELECT id FROM submitted_assignment WHERE student_id = ?"
    sn = f"SELECT id FROM submitted_notebook WHERE assignment_id IN ({sa})"
    return {
        "student": ("id = ?", (student,)),
        "submitted_assignment": ("student_id = ?", (student,)),
        "submitted_notebook": (f"assignment_id IN ({sa})", (student,)),
        "grade": (f"notebook_id IN ({sn})", (student,)),
        "comment": (f"notebook_id IN ({sn})", (student,)),
    }


def gradebook_digest(db: Path, student: str) -> str | None:
    """A digest of every gradebook row that is not ``student``'s (None: not a sound file)."""
    h = hashlib.sha256()
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return None
            own = _own_rows(student)
            tables = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            for table in tables:
                where, args = own.get(table, ("", ()))
                query = f'SELECT * FROM "{table}"' + (f" WHERE NOT ({where})" if where else "")
                h.update(table.encode())
                for row in sorted(map(repr, con.execute(query, args))):
                    h.update(row.encode())
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return h.hexdigest()


class GradebookGuard:
    """Keeps a copy of the gradebook while one student's notebook runs; on leaving the
    ``with`` block it restores the copy if anything but that student's rows changed, and
    :attr:`tampered` says what was wrong (None: nothing).

    The copy holds every student's rows: it lives in a folder of its own, made here,
    removed on leaving and bound into no sandbox (never beside the verdicts a notebook's
    hidden tests read)."""

    def __init__(self, db: Path, student: str) -> None:
        self.db, self.student = db, student
        self.folder: Path | None = None
        self.before: str | None = None
        self.tampered: str | None = None

    @property
    def backup(self) -> Path:
        assert self.folder is not None, "the guard's copy exists only inside its block"
        return self.folder / "gradebook.backup.db"

    def __enter__(self) -> GradebookGuard:
        self.folder = scratch.make("gradebook-copy")
        if self.db.exists():
            shutil.copy2(self.db, self.backup)
            self.before = gradebook_digest(self.backup, self.student)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.tampered = self.verify()
        finally:
            scratch.remove(self.folder)

    def verify(self) -> str | None:
        """None when the gradebook is as it should be; else restore it and say what was wrong."""
        if self.before is None:
            return None
        after = gradebook_digest(self.db, self.student) if self.db.exists() else None
        if after == self.before:
            return None
        shutil.copy2(self.backup, self.db)
        return (
            "the notebook's code changed the gradebook (rows of other students, or the file "
            "itself); the gradebook was restored and this submission's own autograde results "
            "were discarded"
        )
