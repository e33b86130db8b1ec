"""A class run on a Dask cluster: one task per (student, assignment), one writer.

The coordinator lists the submissions, leaves out those already graded from the same
files and grading inputs (unless asked to regrade them), sends the rest to the cluster as
tasks (:func:`tilelab.cluster.tasks.grade`), and records each result as it arrives
(:class:`tilelab.cluster.writer.Writer`). No more tasks are in flight than the cluster has
workers, so a worker that dies was running exactly one task: Dask runs that task again on
another worker, and a task whose worker dies twice gets 0 points with a message saying so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.classroom import course as nbcourse
from tilelab.classroom import submissions
from tilelab.classroom.progress import Progress
from tilelab.cluster import resume, start, tasks
from tilelab.cluster.writer import VERDICT_JSON, Writer
from tilelab.device import backend as backends

KILLED = (
    "not graded (0 points): the grading worker died {n} times while running this submission "
    "(its code killed the grading process, or used all of its memory); the other submissions "
    "were graded"
)


def _identity(value: Any) -> Any:
    return value


def read_submission(cd: Any, student: str, assignment: str) -> tasks.Submission:
    """A submission's files; none where its folder holds links or special files (the task
    then refuses it, naming them)."""
    folder = Path(cd.format_path(cd.submitted_directory, student, assignment))
    if unsafe := submissions.refused_entries(folder, cd.max_file_size * 1000):
        return tasks.Submission(student, assignment, {},
                                resume.digest_files({"\0unsafe": "\n".join(unsafe).encode()}),
                                unsafe)
    files = resume.read_tree(folder)
    return tasks.Submission(student, assignment, files, resume.digest_files(files))


def grade_class_on_cluster(
    course_root: str | Path = ".",
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    backend: str | None = None,
    award_speed_without_gpu: bool = False,
    progress: bool = True,
    cell_timeout: int | None = None,
    gates: dict[str, float] | None = None,
    workers: int = 2,
    scheduler: str | None = None,
    force: bool = False,
    sandboxed: bool = True,
) -> dict[str, Any]:
    """Grade every submission (or the named students', always regraded) on a local cluster
    of ``workers`` workers, or on the running cluster at ``scheduler``; a submission graded
    before from the same files and grading inputs is left as it is unless ``force``."""
    cell_timeout = settings.CELL_TIMEOUT.get() if cell_timeout is None else cell_timeout
    api = nbcourse.open_api(course_root, cell_timeout)
    cd = api.coursedir
    work, strangers = nbcourse.to_grade(api, assignments, students)
    chosen = backend if (backend or scheduler) else backends.active()
    all_gates = {e.id: (gates or {}).get(e.id, e.gate) for e in exercises.EXERCISES.values()}
    summary: dict[str, Any] = {
        "backend": chosen,
        "speed_measured": chosen == "gpu",
        "award_speed_without_gpu": award_speed_without_gpu,
        "gates": all_gates,
        "cluster": scheduler or f"local, {workers} worker(s)",
        "submissions": [],
        "failures": [],
        "graded": 0,
        "up_to_date": 0,
        "timings": [],
    }
    nbcourse.report_strangers(summary, summary["failures"], strangers)
    for a in sorted({a for a, _ in work}):
        try:
            nbcourse.ensure_in_gradebook(api, a)
        except Exception as exc:
            summary["failures"].append({"assignment": a, "step": "release", "error": str(exc)})
    files = tasks.course_files(course_root)
    run_settings = {
        "backend": chosen,
        "award_speed_without_gpu": award_speed_without_gpu,
        "cell_timeout": cell_timeout,
        "gates": all_gates,
        "sandboxed": sandboxed,
    }
    course = tasks.Course(
        files=files,
        gradebook=tasks.template_gradebook(files, sorted({a for a, _ in work})),
        backend=chosen,
        award_speed_without_gpu=award_speed_without_gpu,
        cell_timeout=cell_timeout,
        gates=gates or {},
        digest=resume.inputs_digest(files, run_settings),
        sandboxed=sandboxed,
    )
    begun = time.monotonic()
    with Writer(cd) as writer:
        todo = []
        for a, s in work:
            sub = read_submission(cd, s, a)
            doc = resume.recorded(writer.folder("feedback", s, a) / VERDICT_JSON)
            fresh = resume.up_to_date(doc, sub.digest, course.digest, writer.scores(s, a))
            if fresh and not force and not students:
                summary["up_to_date"] += 1
            else:
                todo.append(sub)
        bar = Progress(len(todo), progress, skipped=summary["up_to_date"])
        try:
            if todo:
                _dispatch(todo, course, workers, scheduler, chosen, writer, summary, bar)
        finally:
            bar.close()
    summary["wall_seconds"] = round(time.monotonic() - begun, 2)
    summary["timing"] = _timing(summary["timings"], summary["wall_seconds"])
    csv = Path(cd.root) / "autograder" / nbcourse.CSV_FILE
    try:
        nbcourse.export_csv(cd, csv)
        summary["csv"] = str(csv)
    except Exception as exc:
        summary["failures"].append({"step": "export", "error": str(exc)})
    return summary


def _dispatch(
    todo: list[tasks.Submission],
    course: tasks.Course,
    workers: int,
    scheduler: str | None,
    chosen: str | None,
    writer: Writer,
    summary: dict[str, Any],
    bar: Progress,
) -> None:
    """Send the tasks to the cluster, at most one per worker at a time; record each result."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    opened = time.monotonic()
    with start.open_client(workers, scheduler, gpus=chosen == "gpu" and not scheduler) as client:
        summary["workers"] = len(client.nthreads())
        summary["cluster_start_seconds"] = round(time.monotonic() - opened, 2)
        deaths = start.allowed_failures(client) + 1
        course_future = client.submit(_identity, course, key="tilelab-course", pure=False)
        pending = list(reversed(todo))
        futures: dict[Any, tasks.Submission] = {}

        def submit_more(ac: Any) -> None:
            while pending and len(futures) < max(1, len(client.nthreads())):
                sub = pending.pop()
                fut = client.submit(
                    tasks.grade, course_future, sub,
                    key=("tilelab-grade", sub.assignment, sub.student), pure=False,
                )
                futures[fut] = sub
                ac.add(fut)

        ac = as_completed()
        submit_more(ac)
        for fut in ac:
            sub = futures.pop(fut)
            # the freed worker starts its next task while this one's result travels here
            submit_more(ac)
            try:
                result = fut.result()
            except KilledWorker:
                result = tasks.zero_result(course, sub, KILLED.format(n=deaths), chosen or "gpu")
            except Exception as exc:  # the grader's own failure: 0 points, say why, go on
                why = f"not graded (0 points): internal grader error: {type(exc).__name__}: {exc}"
                result = tasks.zero_result(course, sub, why, chosen or "gpu")
            fut.release()
            try:
                writer.record(result)
            except Exception as exc:
                summary["failures"].append({
                    "assignment": sub.assignment, "student": sub.student, "step": "record",
                    "error": f"{type(exc).__name__}: {exc}",
                })
            summary["submissions"].append(
                {**result.summary, "seconds": round(result.seconds, 2), "worker": result.worker}
            )
            summary["failures"].extend(result.failures)
            summary["timings"].append({
                "student": sub.student, "assignment": sub.assignment,
                "seconds": round(result.seconds, 2), "worker": result.worker,
                "started": round(result.started, 3),
            })
            summary["graded"] += 1
            if result.gpu:
                summary["gpu"] = result.gpu
            bar.step(f"{sub.assignment} {sub.student}", result.seconds)


def _timing(timings: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """Per-task time and throughput of a run."""
    seconds = [t["seconds"] for t in timings if t["seconds"] > 0]
    if not seconds:
        return {"tasks": 0, "wall_seconds": wall}
    return {
        "tasks": len(seconds),
        "wall_seconds": wall,
        "task_seconds_mean": round(statistics.fmean(seconds), 2),
        "task_seconds_median": round(statistics.median(seconds), 2),
        "task_seconds_max": round(max(seconds), 2),
        "submissions_per_minute": round(len(timings) / wall * 60, 2) if wall > 0 else None,
    }
