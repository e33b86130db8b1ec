"""``grades.csv``: nbgrader's export of the gradebook, its fields quoted and inert.

nbgrader's own CSV plugin joins the fields with commas unquoted: a name such as
"Abbott, Jr." shifts every later column of its row, and a reader loses the rows after it.
:class:`QuotedCsvExport` writes the same columns with :mod:`csv` (quoted where a field
holds a comma, a quote or a line break) and every text field through
:func:`~tilelab.classroom.escape.spreadsheet_cell`. The course's ``nbgrader_config.py``
makes it ``nbgrader export``'s plugin, and the class run exports with it too
(:func:`export`), adding where each submission's time came from.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import ExportPlugin

from tilelab.classroom.escape import spreadsheet_cell

FILE = "grades.csv"
#: nbgrader's columns, in its order
COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
           "email", "raw_score", "late_submission_penalty", "score", "max_score")
TIMESTAMP_FROM = ("the submission's timestamp.txt: nbgrader submit writes it, but in "
                  "submissions uploaded by other means the learner may have written it")


def rows(gradebook: Gradebook, assignments: list[str] | None = None,
         students: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per (assignment, student) of the gradebook, as nbgrader exports it (0 for
    a submission that is missing)."""
    out = []
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        for student in gradebook.students:
            if students and student.id not in students:
                continue
            row: dict[str, Any] = {
                "assignment": assignment.name, "duedate": assignment.duedate,
                "student_id": student.id, "last_name": student.last_name,
                "first_name": student.first_name, "email": student.email,
                "max_score": assignment.max_score,
            }
            try:
                sub = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
            else:
                penalty = sub.late_submission_penalty
                row.update(timestamp=sub.timestamp, raw_score=sub.score,
                           late_submission_penalty=penalty,
                           score=max(0.0, sub.score - penalty))
            out.append({k: row[k] for k in COLUMNS})
    return out


def write(dest: str | Path, table: list[dict[str, Any]], columns: tuple[str, ...]) -> Path:
    """``table`` as a CSV file: quoted where needed, text fields inert in a spreadsheet,
    None as an empty field, a date as nbgrader writes it."""
    with open(dest, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(columns)
        for row in table:
            out.writerow([spreadsheet_cell(_text(row.get(k))) for k in columns])
    return Path(dest)


def _text(value: Any) -> Any:
    if value is None:
        return ""
    return value if isinstance(value, int | float | str) else str(value)


class QuotedCsvExport(ExportPlugin):
    """nbgrader's CSV export, quoted and inert (``nbgrader export`` with this course's
    configuration)."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or FILE
        self.log.info("Exporting grades to %s", dest)
        write(dest, rows(gradebook, [str(a) for a in self.assignment],
                         [str(s) for s in self.student]), COLUMNS)


def export(coursedir: CourseDirectory, gradebook: Gradebook, dest: Path) -> Path:
    """The whole gradebook as ``grades.csv``, with ``timestamp_from`` beside each row: where
    the submission's time came from (nbgrader takes it from the submission's own
    ``timestamp.txt``; empty where there was none)."""
    table = rows(gradebook)
    for row in table:
        folder = Path(coursedir.format_path(coursedir.submitted_directory,
                                            row["student_id"], row["assignment"]))
        stamp = folder / "timestamp.txt"
        row["timestamp_from"] = (TIMESTAMP_FROM if row.get("timestamp") and stamp.is_file()
                                 and not stamp.is_symlink() else "")
    return write(dest, table, (*COLUMNS, "timestamp_from"))
