"""``tilelab export``: the class's grades in the formats an LMS imports.

- ``canvas FILE``: Canvas's gradebook import CSV: ``Student`` (``Last, First``), ``ID``
  (Canvas's user id: nbgrader's ``lms_user_id`` where the enrolment gave one), ``SIS User
  ID`` (the nbgrader id), ``SIS Login ID`` (the e-mail where known, else the id),
  ``Section`` (empty), then one column per assignment; a ``Points Possible`` row first. A
  student with no submission of an assignment has an empty cell there (nothing graded), not
  a zero. Every text field is made inert for a spreadsheet.
- ``gradescope DIR``: ``DIR/STUDENT/ASSIGNMENT/results.json`` in Gradescope's autograder
  results format: one test per graded step (each exercise's correctness, and speed where
  it is graded) with its ``score``, ``max_score``, ``visibility`` and ``output`` (the
  grader's report, as plain text: ``output_format`` "text", so nothing in it renders).

Both read what the class run recorded (the gradebook, the verdict files), never grade.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from nbgrader.coursedir import CourseDirectory

from tilelab.classroom import standing as class_standing
from tilelab.classroom import verdicts as recorded_verdicts
from tilelab.classroom.escape import spreadsheet_cell
from tilelab.grading import scoring

CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
VISIBILITY = "after_published"  # shown to the learner once the instructor publishes grades


def canvas(cd: CourseDirectory, dest: Path) -> Path:
    """Write the Canvas import CSV of the course's gradebook to ``dest``."""
    st = class_standing.read(cd)
    names = list(st.assignments)
    rows = [list(CANVAS_FIXED) + names,
            ["Points Possible", "", "", "", ""] + [f"{st.assignments[a]:g}" for a in names]]
    for s in st.students:
        full = f"{s.last_name}, {s.first_name}" if s.last_name and s.first_name else s.name
        scores = [st.score(s.id, a) for a in names]
        rows.append([full, s.lms_user_id, s.id, s.email or s.id, ""]
                    + ["" if v is None else f"{v:g}" for v in scores])
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        for row in rows:
            w.writerow([spreadsheet_cell(x) for x in row])
    return dest


def results(rec: recorded_verdicts.Recorded) -> dict[str, Any]:
    """One submission's Gradescope ``results.json``."""
    tests = []
    for v in rec.verdicts:
        got = rec.points.get(v.exercise, {})
        report = scoring.report(v, rec.award)
        steps = [("correctness", "correct", v.max_points_correct)]
        if v.max_points_speed:
            steps.append(("speed", "speed", v.max_points_speed))
        for label, kind, most in steps:
            tests.append({
                "name": f"{v.exercise}: {label}",
                "score": float(got.get(kind, 0.0)),
                "max_score": float(most),
                "visibility": VISIBILITY,
                "output": report,
                "output_format": "text",
            })
    return {
        "score": float(sum(t["score"] for t in tests)),
        "output": f"graded by the course's grader on {rec.doc.get('graded_at', '?')}",
        "output_format": "text",
        "visibility": VISIBILITY,
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def gradescope(cd: CourseDirectory, dest: Path,
               assignments: list[str] | None = None) -> list[Path]:
    """Write a ``results.json`` per recorded submission under ``dest``; the paths written."""
    out = []
    root = dest.resolve()
    for rec in recorded_verdicts.recorded(cd, assignments):
        folder = (root / rec.student / rec.assignment).resolve()
        if not folder.is_relative_to(root) or rec.student in ("", ".", ".."):
            continue  # a name that leaves the folder is never written
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "results.json"
        tmp = path.with_name(".results.json.tmp")
        tmp.write_text(json.dumps(results(rec), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        out.append(path)
    return out
