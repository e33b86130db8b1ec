"""The verdicts a class run recorded: ``feedback/STUDENT/ASSIGNMENT/tilelab_verdict.json``.

The class run's writer keeps, beside each submission's feedback, the verdict of every
kernel with the points written and the hashes it was graded from
(:mod:`tilelab.classroom.writer`); the instructor's tools read them here, never by
grading again: the class report, the Gradescope export and the dry run of a gate change.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbgrader.coursedir import CourseDirectory

from tilelab.classroom import resume
from tilelab.classroom.steps import VERDICT_FILE
from tilelab.grading.verdict import Verdict


@dataclass
class Recorded:
    """One submission's verdict file."""

    student: str
    assignment: str
    path: Path
    doc: dict[str, Any]

    @property
    def verdicts(self) -> list[Verdict]:
        return [Verdict.from_dict(d) for d in self.doc.get("verdicts", [])
                if isinstance(d, dict)]

    @property
    def points(self) -> dict[str, dict[str, float]]:
        return self.doc.get("points") or {}

    @property
    def award(self) -> bool:
        return bool(self.doc.get("award_speed_without_gpu"))


def recorded(cd: CourseDirectory, assignments: list[str] | None = None) -> Iterator[Recorded]:
    """Every readable verdict file of the course, in (student, assignment) order."""
    feedback = Path(cd.format_path(cd.feedback_directory, ".", ".")).resolve()
    pattern = glob.escape(str(feedback)) + f"/*/*/{VERDICT_FILE}.json"
    for name in sorted(glob.glob(pattern)):
        path = Path(name)
        doc = resume.recorded(path)
        if not doc or not isinstance(doc.get("verdicts"), list):
            continue
        student, assignment = path.parent.parent.name, path.parent.name
        if assignments and assignment not in assignments:
            continue
        yield Recorded(student, assignment, path, doc)
