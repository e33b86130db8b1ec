"""The regrade trail: every grade a class run changed, who ran it, when, why, before, after.

``autograder/regrades.jsonl`` is append-only, one JSON object a line, written by the class
run as each result is recorded, where the gradebook's points of a submission graded before
differ from those it held (a first grade is not a regrade; a rerun that gives the same
points leaves no line). ``why`` is the instructor's ``--reason`` where given, else what
made the run grade it again: its files, the grading inputs (gates, registry, grader, the
course's notebooks or config), ``--force``, or points missing from the gradebook.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nbgrader.coursedir import CourseDirectory

from tilelab.classroom.task import Result

FILE = "regrades.jsonl"
Points = Mapping[str, Mapping[str, float]]  # exercise -> kind -> points


def path(cd: CourseDirectory) -> Path:
    return Path(cd.root) / "autograder" / FILE


def cause(doc: Mapping[str, Any] | None, submission: str, inputs: str,
          before: Points | None, force: bool) -> str:
    """Why a submission is graded again (from what its last grading recorded)."""
    if not doc:
        return "not graded before"
    if doc.get("submission_sha256") != submission:
        return "the submitted files changed"
    if doc.get("inputs_sha256") != inputs:
        return ("the grading inputs changed (gates, the exercise registry, the grader, the "
                "course's notebooks or nbgrader config)")
    if before is None or doc.get("points") != before:
        return "its points were missing from the gradebook, or differed from its verdict"
    return "--force" if force else "asked"


def who() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name (a container's uid): its number
        return str(os.getuid())


def note(cd: CourseDirectory, result: Result, before: Points | None, after: Points | None,
         why: str) -> dict[str, Any] | None:
    """Append one line where a graded submission's points changed; returns it (None where
    nothing changed or nothing was graded before)."""
    if before is None or after is None or _plain(before) == _plain(after):
        return None
    entry = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "who": who(),
        "why": why,
        "student": result.student,
        "assignment": result.assignment,
        "before": _plain(before),
        "after": _plain(after),
        "score_before": _total(before),
        "score_after": _total(after),
        "submission_sha256": result.submission_digest,
    }
    dest = path(cd)
    dest.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=True, ensure_ascii=True) + "\n"
    fd = os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of one line: never interleaved, never cut
    finally:
        os.close(fd)
    return entry


def read(cd: CourseDirectory) -> list[dict[str, Any]]:
    """Every line of the trail, oldest first (a line that does not parse is skipped)."""
    out = []
    try:
        text = path(cd).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _plain(points: Points) -> dict[str, dict[str, float]]:
    return {e: {k: float(v) for k, v in sorted(kinds.items())}
            for e, kinds in sorted(points.items())}


def _total(points: Points) -> float:
    return sum(float(v) for kinds in points.values() for v in kinds.values())
