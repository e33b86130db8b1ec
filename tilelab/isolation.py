"""What keeps one submission's Python from reaching anyone else's grade during a class run.

nbgrader runs each notebook as the grading user, so its code can start processes that
outlive it, write into the gradebook or into other students' folders, and read the course's
solutions. A class run cannot stop all of that without an OS sandbox; it makes sure none of
it lasts or counts:

- :class:`Reaper` kills every process a submission left behind (Linux: this process becomes
  a child subreaper, so even daemonized ones come back to it);
- :class:`GradebookGuard` restores the gradebook when a submission's run changed any row
  that is not that student's own (or broke the file);
- :class:`FolderSnapshot` puts back files of other submissions and feedback that changed;
- :func:`scrub_outputs` removes notebook outputs that show a reference solution.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
LEAK_NOTE = "[output removed by the grader: it showed the course's reference solution]"


# ------------------------------------------------------------------ processes


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process (Linux /proc; {} elsewhere; zombies left out:
    they have ended and only wait to be reaped)."""
    out = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                stat = Path("/proc", entry, "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if state != "Z":
                out[int(entry)] = int(ppid)
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    parents = _parents()
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found


class Reaper:
    """Kills the processes started inside the ``with`` block that are still alive at its end."""

    def __init__(self) -> None:
        self.killed: list[int] = []

    def __enter__(self) -> Reaper:
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.before = descendants(os.getpid())
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(3):  # processes may fork while being killed
            left = descendants(os.getpid()) - self.before
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
            time.sleep(0.05)
            for pid in left:  # reap the ones that became our children
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
        for pid in _orphaned_zombies() - self.before:  # ended, reparented to us as subreaper
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _orphaned_zombies() -> set[int]:
    """Our child processes that have ended and wait to be reaped (Linux /proc)."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                state, ppid = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError):
                continue
            if state == "Z" and int(ppid) == me:
                out.add(int(entry))
    return out


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
    """Keeps a copy of the gradebook while one student's notebook runs; :meth:`verify`
    restores it if anything but that student's rows changed."""

    def __init__(self, db: Path, student: str, scratch: Path) -> None:
        self.db, self.student = db, student
        self.backup = scratch / "gradebook.backup.db"
        self.before: str | None = None

    def __enter__(self) -> GradebookGuard:
        if self.db.exists():
            shutil.copy2(self.db, self.backup)
            self.before = gradebook_digest(self.backup, self.student)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

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


# ------------------------------------------------------------------ files


class FolderSnapshot:
    """The bytes of every file under some folders, to put back what later code changes."""

    def __init__(self, limit: int = 256 * 1024**2) -> None:
        self.files: dict[Path, bytes] = {}
        self.limit = limit

    def add(self, folder: Path) -> None:
        size = sum(len(b) for b in self.files.values())
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                size += len(data)
                if size > self.limit:
                    return
                self.files[path] = data

    def restore(self, folder: Path) -> list[Path]:
        """Put back changed or deleted files under ``folder``, remove new ones; returns them."""
        folder = folder.resolve()
        changed = []
        mine = {p: d for p, d in self.files.items() if p.resolve().is_relative_to(folder)}
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if (path.is_file() or path.is_symlink()) and path not in mine:
                path.unlink()
                changed.append(path)
        for path, data in mine.items():
            try:
                same = path.is_file() and not path.is_symlink() and path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                if path.is_symlink() or path.is_dir():
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                changed.append(path)
        return changed


# ------------------------------------------------------------------ leaks


def nb_text(value: Any) -> str:
    """A notebook's multi-line text (a cell's source, an output's text): a string or a list."""
    return "".join(map(str, value)) if isinstance(value, list) else str(value or "")


def solution_lines(source_notebooks: list[Path], min_length: int = 16) -> set[str]:
    """The distinctive lines between ``BEGIN SOLUTION`` and ``END SOLUTION`` of the course's
    source notebooks: what no feedback may show."""
    lines: set[str] = set()
    for path in source_notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            inside = False
            for line in nb_text(cell.get("source")).splitlines():
                if SOLUTION_MARKERS[0] in line:
                    inside = True
                elif SOLUTION_MARKERS[1] in line:
                    inside = False
                elif inside and len(line.strip()) >= min_length:
                    lines.add(line.strip())
    return lines


def _source_lines(notebook_text: str) -> set[str]:
    """The stripped source lines of a notebook's cells (its raw text, if it is not JSON)."""
    try:
        cells = json.loads(notebook_text).get("cells", [])
        text = "\n".join(nb_text(c.get("source")) for c in cells if isinstance(c, dict))
    except (ValueError, AttributeError):
        text = notebook_text
    return {ln.strip() for ln in text.splitlines()}


def _output_text(output: dict[str, Any]) -> str:
    parts = [output.get("text", ""), *output.get("traceback", [])]
    parts += list((output.get("data") or {}).values())
    return "\n".join(map(nb_text, parts))


def scrub_outputs(notebook: Path, secret: set[str], own: str = "") -> int:
    """Replace every output of ``notebook`` that shows a line of ``secret`` the learner did
    not write (``own``: their submitted notebook's text); returns how many."""
    try:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    own_lines = _source_lines(own)
    secret = {line for line in secret if line not in own_lines}
    removed = 0
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs") or []
        for i, output in enumerate(outputs):
            text = _output_text(output)
            if any(line in text for line in secret):
                outputs[i] = {"output_type": "stream", "name": "stderr", "text": LEAK_NOTE + "\n"}
                removed += 1
    if removed:
        notebook.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return removed


def interrupted_cells(notebook: Path) -> int:
    """How many cells of an executed notebook were stopped by a time limit."""
    try:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return sum(
        any(o.get("ename") in ("KeyboardInterrupt", "CellTimeoutError")
            for o in c.get("outputs") or [])
        for c in nb.get("cells", [])
    )
