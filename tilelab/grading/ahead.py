"""The GPU tools a grade will need, started ahead of it.

compute-sanitizer's two tools and Nsight Compute each run the grading worker in a process
of their own, whose start (the tool's, Python's, CUDA's) takes longer than the grade's
own checks. The grading worker starts them first, before its own CUDA start, and hands
them on to :func:`tilelab.grading.pipeline.evaluate`, whose steps give each the validated
source once it has compiled (:mod:`tilelab.grading.sidecar`: until then they wait, and a
source that is refused or does not compile is never read by them).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilelab.catalog import exercises
from tilelab.grading.counters import Counting
from tilelab.grading.sanitizer import Sanitizers


@dataclass
class Ahead:
    """Tools started ahead; the grade takes each (:meth:`take_sanitizers`,
    :meth:`take_counting`) or :meth:`stop` ends it unused."""

    sanitizers: Sanitizers | None = None
    counting: Counting | None = None

    def take_sanitizers(self) -> Sanitizers | None:
        taken, self.sanitizers = self.sanitizers, None
        return taken

    def take_counting(self) -> Counting | None:
        taken, self.counting = self.counting, None
        return taken

    def stop(self) -> None:
        """End the tools the grade did not take."""
        for tool in (self.take_sanitizers(), self.take_counting()):
            if tool is not None:
                tool.stop()


def start(exercise_id: str, speed: bool, sanitize: bool) -> Ahead:
    """The tools a GPU grade of ``exercise_id`` uses, started now: the sanitizers unless
    ``sanitize`` is off, Nsight Compute where the exercise's speed is graded and ``speed``
    is on."""
    ex = exercises.get(exercise_id)
    ahead = Ahead()
    try:
        ahead.sanitizers = Sanitizers(ex.id) if sanitize else None
        ahead.counting = Counting(ex.id) if speed and ex.speed_graded else None
    except BaseException:
        ahead.stop()
        raise
    return ahead
