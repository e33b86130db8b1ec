"""Verdicts already measured, by exercise and source hash.

A class run grades every kernel once in the clean worker and keeps the verdicts in a
folder named by ``TILELAB_VERDICT_CACHE`` for the notebook nbgrader runs; the hidden
tests' call to the grader then gets that verdict back instead of grading a second time.

The notebook may run while the clean worker still grades (a sandboxed class run starts
both at once): then ``TILELAB_VERDICT_WAIT`` gives the seconds a hidden test waits for its
verdict, and the grader marks the folder :data:`DONE` once every kernel is graded (in
every class run), so a source the clean worker never grades (the notebook changed it)
waits no longer, nor is it graded a second time, in the notebook. Each verdict file appears
whole (written aside, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.device.backend import Backend
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


def cached_verdict(exercise_id: str, source: str | bytes, backend: Backend) -> Verdict | None:
    """The class run's verdict of ``source``, when a class run is on and has one; where the
    clean worker may still be grading (``TILELAB_VERDICT_WAIT``), after waiting for it.
    Once the folder is complete, a source it has no verdict for (the notebook changed its
    kernel as it ran) is not graded here: the class run grades the submitted cell, once.
    A verdict still not there when the wait ends says so too. Either way the points come
    from the clean worker's verdict of the submitted cell (a verdict that is not there is
    ``backend``'s)."""
    folder = settings.VERDICT_CACHE.get()
    if not folder:
        return None
    path = _path(folder, exercise_id, source)
    wait = settings.VERDICT_WAIT.get()
    deadline, pause = time.monotonic() + wait, 0.005
    while (v := _read(path)) is None:
        if Path(folder, DONE).exists():  # written after every verdict: one last look
            if (v := _read(path)) is None:
                return _unread(exercise_id, DIFFERS, backend)
            break
        if not wait:  # a folder that is never marked complete: grade it here
            return None
        if time.monotonic() >= deadline:
            return _unread(exercise_id, NOT_READY.format(wait=wait), backend)
        time.sleep(pause)
        pause = min(2 * pause, 0.1)
    v.messages.append(NOTE)
    return v


def _unread(exercise_id: str, why: str, backend: Backend) -> Verdict:
    return Verdict.for_exercise(exercises.get(exercise_id), backend.value, message=why)


_SEE = ("the points come from the class grader's verdict of the submitted kernel cell, and "
        "tilelab_verdict.txt beside this feedback holds its report")
NOT_READY = ("not shown here: the class grader's clean process was still grading this kernel "
             "{wait:g} s after this cell asked for its verdict; " + _SEE)
DIFFERS = ("not graded here: the kernel this cell checks is not the text of the notebook's "
           "submitted kernel cell (the notebook changed it as it ran), and a class run "
           "grades that cell, once, in its own process; " + _SEE)
