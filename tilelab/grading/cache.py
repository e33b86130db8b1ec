"""Verdicts already measured, by exercise and source hash.

A class run grades every kernel once in the clean worker and keeps the verdicts in a
folder named by ``TILELAB_VERDICT_CACHE`` for the notebook nbgrader runs; the hidden
tests' call to the grader then gets that verdict back instead of grading a second time.

The notebook may run while the clean worker still grades (a sandboxed class run starts
both at once): then ``TILELAB_VERDICT_WAIT`` gives the seconds a hidden test waits for its
verdict, and the grader marks the folder :data:`DONE` once every kernel is graded, so a
source the clean worker never grades (the notebook changed it) waits no longer. Each
verdict file appears whole (written aside, then renamed), so a reader never sees half of
one.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.grading.verdict import Verdict

CACHE_ENV = settings.VERDICT_CACHE.name
NOTE = "(graded once, by the class grader's clean process)"
#: The file that marks a cache folder complete: every kernel of the submission graded.
DONE = "graded"


def _path(folder: str | Path, exercise_id: str, source: str | bytes) -> Path:
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    return Path(folder) / f"{exercise_id}-{hashlib.sha256(data).hexdigest()[:32]}.json"


def cache_verdict(folder: str | Path, source: str | bytes, verdict: Verdict) -> Path:
    """Keep ``verdict`` of ``source`` in ``folder`` for :func:`cached_verdict`."""
    path = _path(folder, verdict.exercise, source)
    aside = path.with_suffix(".part")
    aside.write_text(json.dumps(verdict.to_dict()), encoding="utf-8")
    os.replace(aside, path)
    return path


def mark_done(folder: str | Path) -> None:
    """Say that ``folder`` holds every verdict it will (see the module's docstring)."""
    Path(folder, DONE).touch()


def _read(path: Path) -> Verdict | None:
    try:
        return Verdict.from_dict(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def cached_verdict(exercise_id: str, source: str | bytes) -> Verdict | None:
    """The class run's verdict of ``source``, when a class run is on and has one; where the
    clean worker may still be grading (``TILELAB_VERDICT_WAIT``), after waiting for it.
    A verdict still not there when the wait ends says so (the grade comes from the clean
    worker's verdict all the same)."""
    folder = settings.VERDICT_CACHE.get()
    if not folder:
        return None
    path = _path(folder, exercise_id, source)
    wait = settings.VERDICT_WAIT.get()
    deadline, pause = time.monotonic() + wait, 0.005
    while (v := _read(path)) is None and wait:
        if Path(folder, DONE).exists():  # written after every verdict: one last look
            v = _read(path)
            break
        if time.monotonic() >= deadline:
            return Verdict.for_exercise(exercises.get(exercise_id), settings.BACKEND.get(),
                                        message=NOT_READY.format(wait=wait))
        time.sleep(pause)
        pause = min(2 * pause, 0.1)
    if v is None:
        return None
    v.messages.append(NOTE)
    return v


NOT_READY = ("not shown here: the class grader's clean process was still grading this kernel "
             "{wait:g} s after this cell asked for its verdict; the points come from that "
             "verdict all the same, and tilelab_verdict.txt beside this feedback holds its "
             "report")
