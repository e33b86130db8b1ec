"""The class run's single writer: records each task's result as it arrives.

Tasks write nothing shared (:mod:`tilelab.classroom.task`); this is the one place a class
run writes the course's nbgrader gradebook (SQLite, or any database nbgrader's ``db_url``
names, such as PostgreSQL) and its ``autograded/`` and ``feedback/`` folders, wherever the
tasks ran. For each result: the gradebook rows first (one transaction), then the folders,
then, last, the verdict file with the hashes the result was graded from: a rerun trusts a
submission as graded only when that file is there (see :mod:`tilelab.classroom.resume`).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.coursedir import CourseDirectory
from sqlalchemy.exc import SAWarning

from tilelab.catalog import exercises
from tilelab.classroom import course as nbcourse
from tilelab.classroom.steps import VERDICT_FILE
from tilelab.classroom.task import Result

VERDICT_JSON = f"{VERDICT_FILE}.json"


class Writer:
    """Records results in one course's gradebook and folders (use as a context manager)."""

    def __init__(self, coursedir: CourseDirectory) -> None:
        self.cd = coursedir
        self.gb = nbcourse.gradebook(coursedir)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.gb.close()

    def folder(self, kind: str, student: str, assignment: str) -> Path:
        base = {"autograded": self.cd.autograded_directory, "feedback": self.cd.feedback_directory}
        return Path(self.cd.format_path(base[kind], student, assignment))

    def record(self, result: Result) -> None:
        """Write one result: gradebook rows, then folders, then the verdict file."""
        self._gradebook(result)
        _replace(self.folder("autograded", result.student, result.assignment), result.autograded)
        feedback = self.folder("feedback", result.student, result.assignment)
        rest = {k: v for k, v in result.feedback.items() if k != VERDICT_JSON}
        _replace(feedback, rest)
        doc = json.loads(result.feedback.get(VERDICT_JSON, b"{}") or b"{}")
        doc.update(
            submitted_at=result.timestamp.isoformat() if result.timestamp else None,
            seconds=round(result.seconds, 2),
            worker=result.worker,
        )
        if not result.retry:  # a grader's failure is graded again on the next run
            doc.update(submission_sha256=result.submission_digest,
                       inputs_sha256=result.inputs_digest)
        _atomic_write(feedback / VERDICT_JSON, json.dumps(doc, indent=1).encode() + b"\n")

    def _gradebook(self, result: Result) -> None:
        gb, a, s = self.gb, result.assignment, result.student
        try:
            gb.update_or_create_student(s)
            try:
                sub = gb.find_submission(a, s)
            except MissingEntry:
                with warnings.catch_warnings():  # nbgrader's own autoflush warnings
                    warnings.simplefilter("ignore", SAWarning)
                    sub = gb.add_submission(a, s)
            sub.timestamp = result.timestamp
            for nb, flags in result.notebooks.items():
                row = gb.find_submission_notebook(nb, a, s)
                for k, v in flags.items():
                    setattr(row, k, v)
            for nb, cells in result.grades.items():
                for cell, values in cells.items():
                    grade = gb.find_grade(cell, nb, a, s)
                    for k, v in values.items():
                        setattr(grade, k, v)
            for nb, cells in result.comments.items():
                for cell, values in cells.items():
                    comment = gb.find_comment(cell, nb, a, s)
                    for k, v in values.items():
                        setattr(comment, k, v)
            gb.db.commit()
        except Exception:
            gb.db.rollback()
            raise

    def scores(self, student: str, assignment: str) -> dict[str, dict[str, float]] | None:
        """The hidden tests' scores of a submission (by exercise, then ``correct``/``speed``),
        None where the gradebook has no such submission."""
        nb = nbcourse.notebook_id(assignment)
        try:
            sub = self.gb.find_submission_notebook(nb, assignment, student)
        except MissingEntry:
            return None
        by_name = {g.name: g.score for g in sub.grades}
        out: dict[str, dict[str, float]] = {}
        for e in exercises.ASSIGNMENTS[assignment]:
            out[e] = {}
            for kind in nbcourse.test_kinds(e):
                score = by_name.get(nbcourse.test_cell_id(e, kind))
                if score is None:
                    return None
                out[e][kind] = float(score)
        return out


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _replace(folder: Path, files: dict[str, bytes]) -> None:
    """Make ``folder`` hold exactly ``files`` (written beside it, then swapped in)."""
    new = folder.with_name(f".{folder.name}.tilelab-new")
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True)
    for name, data in files.items():
        path = new / name
        if not path.resolve().is_relative_to(new.resolve()):
            continue  # a name that leaves the folder is never written
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(new, folder)

