"""``tilelab grade --dry-run``: what a change of gates or of the registry would flip, before
anything is written.

Every recorded verdict (:mod:`tilelab.classroom.verdicts`) is judged again from its own
measurements under the gates and the registry in force now (the ``--gates`` file, each
exercise's points and whether its speed is graded): a speedup now under its gate loses its
speed points; one now over a gate it failed would be timed again (the lesson, judged only
past the gate, is not known yet); a change of points changes the points. Submissions
whose files changed, or whose assignment's exercises changed, are listed as "would be
graded again". Nothing is graded, written or run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nbgrader.coursedir import CourseDirectory

from tilelab.catalog import exercises
from tilelab.classroom import course
from tilelab.classroom import verdicts as recorded_verdicts
from tilelab.classroom.escape import terminal_text
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict

UNKNOWN = "timed again (now over the gate; the lesson is judged then)"


def rejudge(v: Verdict, gate: float) -> tuple[Verdict, bool]:
    """``v`` under the registry's points and ``gate``; True where only a new timed run can
    tell (a speedup over a gate it had failed)."""
    ex = exercises.get(v.exercise)
    w = dataclasses.replace(v, gate=gate, max_points_correct=ex.points_correct,
                            max_points_speed=ex.points_speed if ex.speed_graded else 0.0,
                            messages=list(v.messages))
    unknown = False
    if v.speed_measured and v.speedup is not None:
        if v.speedup < gate:
            w.speed_passed = False
        elif not v.speed_passed and v.gate is not None and v.speedup < v.gate:
            unknown = True
    return w, unknown


def flips(cd: CourseDirectory, gates: dict[str, float] | None = None,
          award: bool = False, assignments: list[str] | None = None,
          students: list[str] | None = None,
          digests: dict[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """Every step whose points would change, and every submission that would be graded
    again (``digests``: each submission's files' hash now, by (student, assignment))."""
    changed, again, judged = [], [], 0
    for rec in recorded_verdicts.recorded(cd, assignments):
        if students and rec.student not in students:
            continue
        key = (rec.student, rec.assignment)
        if digests is not None and key in digests and (
                rec.doc.get("submission_sha256") != digests[key]):
            again.append({"student": rec.student, "assignment": rec.assignment,
                          "why": "the submitted files changed"})
            continue
        held = {v.exercise for v in rec.verdicts}
        if held != set(exercises.ASSIGNMENTS.get(rec.assignment, ())):
            again.append({"student": rec.student, "assignment": rec.assignment,
                          "why": "the assignment's exercises changed in the registry"})
            continue
        for v in rec.verdicts:
            judged += 1
            ex = exercises.get(v.exercise)
            w, unknown = rejudge(v, (gates or {}).get(ex.id, ex.gate))
            now = scoring.points(w, award or rec.award).as_dict()
            was = rec.points.get(v.exercise, {})
            for kind in course.test_kinds(v.exercise):
                before, after = float(was.get(kind, 0.0)), float(now.get(kind, 0.0))
                if kind == "speed" and unknown:
                    changed.append(_entry(rec, v, kind, before, None, f"gate {v.gate:g}x -> "
                                          f"{w.gate:g}x, speedup {v.speedup:.2f}x: {UNKNOWN}"))
                elif before != after:
                    why = (f"gate {v.gate:g}x -> {w.gate:g}x, speedup {v.speedup:.2f}x"
                           if kind == "speed" and v.speedup is not None and v.gate != w.gate
                           else "the registry's points changed")
                    changed.append(_entry(rec, v, kind, before, after, why))
    return {"verdicts_judged": judged, "flips": changed, "graded_again": again}


def _entry(rec: recorded_verdicts.Recorded, v: Verdict, kind: str, before: float,
           after: float | None, why: str) -> dict[str, Any]:
    return {"student": rec.student, "assignment": rec.assignment, "exercise": v.exercise,
            "test": kind, "before": before, "after": after, "why": why}


def text(found: dict[str, Any]) -> str:
    out = [f"dry run: nothing graded or written; {found['verdicts_judged']} recorded "
           f"verdict(s) judged again under the gates and registry in force"]
    if not found["flips"]:
        out.append("no verdict would change its points")
    for f in found["flips"]:
        after = "?" if f["after"] is None else f"{f['after']:g}"
        out.append(f"  {f['student']} {f['assignment']} {f['exercise']} {f['test']}: "
                   f"{f['before']:g} -> {after} ({f['why']})")
    if found["graded_again"]:
        out.append(f"{len(found['graded_again'])} submission(s) would be graded again:")
        out += [f"  {g['student']} {g['assignment']}: {g['why']}" for g in found["graded_again"]]
    return "\n".join(map(terminal_text, out))
