"""Verdicts already measured, by exercise and source hash.

A class run grades every kernel once in the clean worker and keeps the verdicts in a
folder named by ``TILELAB_VERDICT_CACHE`` while nbgrader runs the notebooks; the hidden
tests' call to the grader then gets that verdict back instead of grading a second time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tilelab import settings
from tilelab.grading.verdict import Verdict

CACHE_ENV = settings.VERDICT_CACHE.name
NOTE = "(graded once, by the class grader's clean process)"


def _path(folder: str | Path, exercise_id: str, source: str | bytes) -> Path:
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    return Path(folder) / f"{exercise_id}-{hashlib.sha256(data).hexdigest()[:32]}.json"


def cache_verdict(folder: str | Path, source: str | bytes, verdict: Verdict) -> Path:
    """Keep ``verdict`` of ``source`` in ``folder`` for :func:`cached_verdict`."""
    path = _path(folder, verdict.exercise, source)
    path.write_text(json.dumps(verdict.to_dict()), encoding="utf-8")
    return path


def cached_verdict(exercise_id: str, source: str | bytes) -> Verdict | None:
    """The class run's verdict of ``source``, when a class run is on and has one."""
    folder = settings.VERDICT_CACHE.get()
    if not folder:
        return None
    try:
        v = Verdict.from_dict(json.loads(_path(folder, exercise_id, source).read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    v.messages.append(NOTE)
    return v
