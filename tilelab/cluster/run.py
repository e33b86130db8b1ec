"""The Dask executor of a class run: its tasks on a cluster, one per worker at a time.

:func:`on_dask` hands :func:`tilelab.classroom.run.grade_class` an executor that sends each
task (:func:`tilelab.classroom.task.grade`) to a local cluster or the running cluster at a
scheduler's address, and yields each result as it arrives. No more tasks are in flight
than the cluster has workers, and the scheduler never runs a task again itself
(:data:`tilelab.cluster.start.SCHEDULER_ALLOWED_FAILURES`), so a worker that dies was
running exactly one task: this executor runs that task again once a worker is free, and a
task whose worker dies twice gets 0 points with a message saying so. A worker that dies
while it makes the course's inputs (a task of their own, which every grading task reads)
is no submission's doing: the inputs are made again and the tasks waiting on them are
run again, no death counted; where that happens more than :data:`COURSE_LOSSES` times,
the tasks left are graded on the next run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from distributed import as_completed, get_worker
from distributed.scheduler import KilledWorker

from tilelab.classroom import task
from tilelab.cluster import start

#: Times the course's inputs may be lost (their worker died while making them) in one run.
COURSE_LOSSES = 3
COURSE_LOST = (
    "not graded in this run: the grading cluster's workers died {n} times while they made "
    "the course's inputs (nothing this submission did); it is graded again on the next run"
)
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
            inputs = [client.submit(_identity, course, key="tilelab-course", pure=False)]
            pending = list(reversed(todo))
            futures: dict[Any, task.Submission] = {}

            def submit_more(ac: Any) -> None:
                while pending and len(futures) < max(1, len(client.nthreads())):
                    sub = pending.pop()
                    run = died.get((sub.assignment, sub.student), 0)
                    fut = client.submit(
                        grade_on_worker, inputs[-1], sub,
                        key=("tilelab-grade", sub.assignment, sub.student, run, len(inputs)),
                        pure=False,
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
                except KilledWorker as exc:
                    if exc.task in {f.key for f in inputs}:  # lost: the course's inputs
                        fut.release()
                        if exc.task == inputs[-1].key and len(inputs) <= COURSE_LOSSES:
                            inputs.append(client.submit(
                                _identity, course, key=f"tilelab-course-{len(inputs)}",
                                pure=False))
                        if exc.task != inputs[-1].key:  # made again: run this task again
                            pending.append(sub)
                            submit_more(ac)
                            continue
                        yield task.zero_result(course, sub, "worker",
                                               COURSE_LOST.format(n=len(inputs)), retry=True)
                        continue
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
