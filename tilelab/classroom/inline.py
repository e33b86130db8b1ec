"""Run a class run's tasks in this process, one after another.

The executor :func:`tilelab.classroom.run.grade_class` uses unless another is handed in
(``tilelab grade --workers 1``). A task that raises (the grader's own failure) becomes a
zero result from the same steps, which says so and is graded again on the next run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilelab.classroom.task import Course, Result, Submission, grade, zero_result


class Inline:
    """Tasks in this process: here is where they run, and where bubblewrap must be."""

    remote = False
    where = "this process"

    def __call__(self, course: Course, todo: list[Submission],
                 about: dict[str, Any]) -> Iterator[Result]:
        about.update(workers=1, cluster_start_seconds=0.0)
        for sub in todo:
            try:
                result = grade(course, sub)
            except Exception as exc:  # the grader's own failure: 0 points, say why, go on
                result = zero_result(course, sub, "internal",
                                     f"internal grader error: {type(exc).__name__}: {exc}",
                                     retry=True)
            yield result


inline = Inline()
