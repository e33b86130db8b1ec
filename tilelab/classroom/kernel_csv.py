"""The per-kernel CSV beside nbgrader's export: every kernel's points, and why any were lost.

nbgrader's ``grades.csv`` has one score per assignment; ``grades_kernels.csv`` has one row
per (student, assignment, exercise), read from the verdict files the class run keeps in
``feedback/`` (so it covers every submission graded, in this run or before): the points
for correctness and speed with their maximum, and in ``lost`` why points were lost (wrong,
and at which shapes; too slow against the gate; speed not measured without a GPU; not
graded, and why; timed out), from :func:`tilelab.grading.scoring.lost`. ``submitted_at`` is
nbgrader's submission time: the ``timestamp.txt`` in the learner's submission folder
(written by ``nbgrader submit`` and kept by ``nbgrader collect``); empty where the
submission has none (``submitted_at_from`` says which).
"""

from __future__ import annotations

import glob
from pathlib import Path

from nbgrader.coursedir import CourseDirectory

from tilelab.classroom import grades_csv, resume
from tilelab.classroom.steps import VERDICT_FILE
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict

FILE = "grades_kernels.csv"
FROM_TIMESTAMP = "timestamp.txt in the submission (nbgrader submit)"
NO_TIMESTAMP = "none: the submission has no timestamp.txt"
COLUMNS = ("student", "assignment", "exercise", "points_correct", "max_correct",
           "points_speed", "max_speed", "backend", "gpu", "lost", "submitted_at",
           "submitted_at_from")


def rows(cd: CourseDirectory) -> list[dict[str, object]]:
    """One row per kernel of every submission with a verdict file, in name order."""
    out = []
    pattern = Path(cd.format_path(cd.feedback_directory, "*", "*")) / f"{VERDICT_FILE}.json"
    for path in sorted(glob.glob(glob.escape(str(pattern.parent.parent.parent)) + "/*/*/"
                                 + pattern.name)):
        doc = resume.recorded(Path(path))
        if not doc or not isinstance(doc.get("verdicts"), list):
            continue
        award = bool(doc.get("award_speed_without_gpu"))
        for d in doc["verdicts"]:
            v = Verdict.from_dict(d)
            got = doc.get("points", {}).get(v.exercise, {})
            out.append({
                "student": doc.get("student"),
                "assignment": doc.get("assignment"),
                "exercise": v.exercise,
                "points_correct": got.get("correct", 0.0),
                "max_correct": v.max_points_correct,
                "points_speed": got.get("speed", 0.0),
                "max_speed": v.max_points_speed,
                "backend": v.backend,
                "gpu": v.gpu or "",
                "lost": scoring.lost(v, award),
                "submitted_at": doc.get("submitted_at") or "",
                "submitted_at_from": FROM_TIMESTAMP if doc.get("submitted_at") else NO_TIMESTAMP,
            })
    return out


def write(cd: CourseDirectory, dest: Path) -> Path:
    """Write the per-kernel CSV of a course to ``dest`` (quoted, and inert in a
    spreadsheet: :func:`tilelab.classroom.grades_csv.write`)."""
    return grades_csv.write(dest, rows(cd), COLUMNS)
