"""The Dask executor of a class run: its tasks on a cluster, one per worker at a time.

:func:`on_dask` hands :func:`tilelab.classroom.run.grade_class` an executor that sends each
task (:func:`tilelab.classroom.task.grade`) to a local cluster or the running cluster at a
scheduler's address, and yields each result as it arrives. No more tasks are in flight
than the cluster has workers, and the scheduler never runs a task again itself
(:data:`tilelab.cluster.start.SCHEDULER_ALLOWED_FAILURES`), so a worker that dies was
running exactly one task: this executor runs that task again once a worker is free, and a
task whose worker dies twice gets 0 points with a message saying so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from distributed import as_completed, get_worker
from distributed.scheduler import KilledWorker

from tilelab.classroom import task
from tilelab.cluster import start

KILLED = (
    "the grading worker died {n} times while running this submission (its code killed the "
    "grading process, or used all of its memory); the other submissions were graded"
)


def _identity(value: Any) -> Any:
    return value


def grade_on_worker(course: task.Course, sub: task.Submission) -> task.Result:
    """:func:`tilelab.classroom.task.grade` on a worker, which it names by its address."""
    result = task.grade(course, sub)
    result.worker = get_worker().address
    return result


class OnDask:
    """Tasks on a Dask cluster: a local one of ``workers`` workers (one per GPU with
    ``gpus``, ``tasks_per_gpu`` workers to a GPU), or the running one at ``scheduler``."""

    def __init__(self, workers: int = 2, scheduler: str | None = None,
                 gpus: bool = False, tasks_per_gpu: int = 1) -> None:
        self.workers, self.scheduler, self.gpus = workers, scheduler, gpus
        self.tasks_per_gpu = tasks_per_gpu
        self.remote = scheduler is not None
        self.where = scheduler or f"a local Dask cluster of {workers} worker(s)"

    def __call__(self, course: task.Course, todo: list[task.Submission],
                 about: dict[str, Any]) -> Iterator[task.Result]:
        opened = time.monotonic()
        with start.open_client(self.workers, self.scheduler, gpus=self.gpus,
                               tasks_per_gpu=self.tasks_per_gpu) as client:
            about["workers"] = len(client.nthreads())
            about["cluster_start_seconds"] = round(time.monotonic() - opened, 2)
            # worker deaths behind one KilledWorker: 1 where the scheduler reruns nothing
            deaths = start.allowed_failures(client) + 1
            died: dict[tuple[str, str], int] = {}  # (assignment, student) -> deaths so far
            course_future = client.submit(_identity, course, key="tilelab-course", pure=False)
            pending = list(reversed(todo))
            futures: dict[Any, task.Submission] = {}

            def submit_more(ac: Any) -> None:
                while pending and len(futures) < max(1, len(client.nthreads())):
                    sub = pending.pop()
                    run = died.get((sub.assignment, sub.student), 0)
                    fut = client.submit(
                        grade_on_worker, course_future, sub,
                        key=("tilelab-grade", sub.assignment, sub.student, run), pure=False,
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
                    who = (sub.assignment, sub.student)
                    n = died[who] = died.get(who, 0) + deaths
                    if n <= start.ALLOWED_FAILURES:  # again, next, once a worker is free
                        fut.release()
                        pending.append(sub)
                        submit_more(ac)
                        continue
                    result = task.zero_result(course, sub, "worker", KILLED.format(n=n))
                except Exception as exc:  # the grader's own failure: 0 points, say why, go on
                    result = task.zero_result(
                        course, sub, "internal",
                        f"internal grader error: {type(exc).__name__}: {exc}", retry=True)
                fut.release()
                yield result


def on_dask(workers: int = 2, scheduler: str | None = None, gpus: bool = False,
            tasks_per_gpu: int = 1) -> OnDask:
    """The executor that grades a class's tasks on a Dask cluster (see :class:`OnDask`);
    ``tasks_per_gpu`` tasks at once on each GPU of a local cluster."""
    return OnDask(workers, scheduler, gpus, tasks_per_gpu)
