"""Grade a class with nbgrader: every submission through the steps, then the CSV.

Points come only from the grader's clean process. A learner's Python runs inside the
notebook kernel during ``nbgrader autograde`` and could patch the grader there, so each
kernel cell is read straight from the submitted notebook (by its ``kernel_<exercise>``
grade id; nothing is executed), graded by :func:`tilelab.grading.sandbox.grade_source`,
and its points are written over the hidden tests' scores in the gradebook (as nbgrader
manual scores), so the CSV export and the feedback show only those. This clean grade runs
before autograding, so the hidden tests, which call the same grader, get its verdict back
from a cache instead of grading every kernel twice. The verdicts are also written next to
the feedback as ``tilelab_verdict.txt`` and ``.json``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.classroom import course
from tilelab.classroom.progress import Progress
from tilelab.classroom.steps import ClassRun, grade_one, protocol
from tilelab.device import backend as backends
from tilelab.grading import bubblewrap, limits

NO_SANDBOX_WARNING = (
    "GRADED WITHOUT A SANDBOX (--no-sandbox): every submitted notebook and kernel ran with "
    "the instructor's rights and could read the solutions and the gradebook, change other "
    "students' files and forge its own scores. Use only for submissions you trust."
)


def _summary(run: ClassRun) -> dict[str, Any]:
    """The class summary before any submission is graded."""
    summary: dict[str, Any] = {
        "backend": run.backend,
        "gpu": run.gpu,
        "speed_measured": run.backend == "gpu",
        "award_speed_without_gpu": run.award,
        "gates": {e.id: run.gates.get(e.id, e.gate) for e in exercises.EXERCISES.values()},
        "submissions": [],
        "failures": run.failures,
    }
    if run.backend != "gpu":
        summary["note"] = (
            "no GPU: speed was not measured; padded kernels were graded by their emulated "
            "bank-conflict degree, other speed points were "
            + ("awarded anyway (as asked)" if run.award else "not awarded")
        )
    return summary


def _grade_all(run: ClassRun, work: list[tuple[str, str]], progress: bool) -> list[dict]:
    """Record each assignment in the gradebook, then grade every submission; one failure
    never stops the run."""
    for a in sorted({a for a, _ in work}):
        try:
            course.ensure_in_gradebook(run.api, a)
        except Exception as exc:
            run.failures.append({"assignment": a, "step": "release", "error": str(exc)})
    done = []
    bar = Progress(len(work), progress)
    for a, s in work:
        start = time.monotonic()
        try:
            done.append(grade_one(run, a, s))
            done[-1]["seconds"] = round(time.monotonic() - start, 2)
        except Exception as exc:  # the grader's own failure: record it, go on
            run.failed(a, s, "internal", f"{type(exc).__name__}: {exc}")
        bar.step(f"{a} {s}", time.monotonic() - start)
    bar.close()
    return done


def grade_class(
    course_root: str | Path = ".",
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    backend: str | None = None,
    award_speed_without_gpu: bool = False,
    progress: bool = True,
    cell_timeout: int | None = None,
    gates: dict[str, float] | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    force: bool = False,
    sandboxed: bool = True,
) -> dict[str, Any]:
    """Autograde, re-grade every kernel cleanly, generate feedback and export the CSV, for
    every submission under ``autograder/submitted/`` (or the ones named). One bad
    submission never stops the run, nor changes another's grade: its failure is in the
    summary (see :mod:`tilelab.classroom.guards`). ``gates``: calibrated speed gates by
    exercise (``tilelab calibrate``), instead of the registry's defaults. ``cell_timeout``:
    seconds a notebook cell may run (default ``TILELAB_CELL_TIMEOUT``, 120).

    With ``workers`` above 1 or a ``scheduler`` address, the submissions are graded as
    tasks on a Dask cluster instead (see :mod:`tilelab.cluster`), and submissions graded
    before from the same files and inputs are skipped unless ``force``.

    Only students of the gradebook are graded (``nbgrader db student add``); a folder of
    anyone else is reported in ``unknown_students``. ``sandboxed`` (the default): every
    kernel is graded, and every notebook run, in a bubblewrap sandbox that sees only its
    own submission (raises :class:`~tilelab.grading.bubblewrap.SandboxUnavailable`, saying
    what to install, where none can be made); False runs learners' code with the
    instructor's rights."""
    if sandboxed:
        bubblewrap.require()  # before any submission runs
        limits.warn_missing_caps()
    if workers > 1 or scheduler:
        from tilelab.cluster.run import grade_class_on_cluster

        return grade_class_on_cluster(
            course_root, assignments, students, backend, award_speed_without_gpu, progress,
            cell_timeout, gates, workers=workers, scheduler=scheduler, force=force,
            sandboxed=sandboxed,
        )
    timeout = settings.CELL_TIMEOUT.get() if cell_timeout is None else cell_timeout
    api = course.open_api(course_root, timeout, sandboxed=sandboxed)  # the config, read once
    work, strangers = course.to_grade(api, assignments, students)
    chosen = backend or backends.active()
    gpu = backends.gpu_probe()[1] if chosen == "gpu" else None
    run = ClassRun(api, chosen, gpu, award_speed_without_gpu, timeout, gates or {},
                   sandboxed=sandboxed)
    summary = _summary(run)
    course.report_strangers(summary, run.failures, strangers)
    with settings.environ(protocol(run)):
        summary["submissions"] = _grade_all(run, work, progress)
    csv = Path(api.coursedir.root) / "autograder" / course.CSV_FILE
    try:
        course.export_csv(api.coursedir, csv)
        summary["csv"] = str(csv)
    except Exception as exc:
        summary["failures"].append({"step": "export", "error": str(exc)})
    return summary
