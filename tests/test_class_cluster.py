"""The class run's Dask executor: its tasks on a cluster of local processes (the emulator).

The same tasks give the same results in this process and on 2 workers; a worker killed
(kill -9) in the middle of a task, or while it makes the course's inputs, costs nothing; a
task whose worker dies twice gets 0 points and the run goes on. Also the cluster's own
rules: one thread per worker, one worker per GPU, the Slurm job script. The driver itself
(resume, the CSVs, the summary): ``tests/test_classroom.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, Worker, WorkerPlugin
from nbgrader.api import Gradebook
from support.classroom import (
    EMU,
    SANDBOXED,
    expected_points,
    kernel_cell,
    points_in_gradebook,
    released_stub,
    small_class,
    solution_kernel,
    submission,
    write_submissions,
)

from tilelab import classroom, settings
from tilelab.catalog import exercises
from tilelab.classroom import course, task
from tilelab.classroom.inline import inline
from tilelab.classroom.run import read_submission
from tilelab.cluster import start
from tilelab.cluster.run import on_dask

SAW = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


def messages(root: Path, student: str, assignment: str) -> dict[str, list[str]]:
    path = root / "autograder" / "feedback" / student / assignment / "tilelab_verdict.json"
    return {v["exercise"]: v["messages"] for v in json.loads(path.read_text())["verdicts"]}


def tasks_of(root: Path) -> tuple[task.Course, list[task.Submission]]:
    """A course's grading inputs and its submissions, as the driver hands them over."""
    api = course.open_api(root)
    work, _ = course.to_grade(api, None, None)
    files = task.course_files(api)
    inputs = task.Course(
        files=files, gradebook=task.template_gradebook(files, sorted({a for a, _ in work})),
        backend="emu", award_speed_without_gpu=False, cell_timeout=settings.CELL_TIMEOUT.get(),
        gates={}, digest="inputs", sandboxed=SANDBOXED,
    )
    return inputs, [read_submission(api.coursedir, s, a) for a, s in work]


def same_parts(r: task.Result) -> dict:
    """What must not depend on where a task ran (messages name elements of fresh random
    inputs, so only their count is compared)."""
    doc = json.loads(r.feedback["tilelab_verdict.json"])
    return {
        "who": (r.student, r.assignment, r.submission_digest, r.inputs_digest, r.backend),
        "points": (r.summary["points"], r.summary["score"], r.summary["max_score"]),
        "notes": r.summary["notes"],
        "failures": [f["step"] for f in r.failures],
        "grades": r.grades,
        "notebooks": r.notebooks,
        "comments": {nb: sorted(c) for nb, c in r.comments.items()},
        "files": (sorted(r.autograded), sorted(r.feedback)),
        "verdicts": (doc["points"], [(v["exercise"], v["correct"], v["speed_passed"],
                                      len(v["messages"])) for v in doc["verdicts"]]),
    }


@pytest.mark.slow
@SAW
def test_in_this_process_and_on_two_workers_the_same_tasks_give_the_same_results(tmp_path):
    root = tmp_path / "course"
    small_class(root, ["alice", "bob", "frank"])
    inputs, todo = tasks_of(root)
    here = list(inline(inputs, todo, {}))
    about: dict = {}
    begun = time.time()
    there = list(on_dask(2)(inputs, todo, about))
    ended = time.time()
    assert about["workers"] == 2 and about["cluster_start_seconds"] > 0
    key = {(r.student, r.assignment): same_parts(r) for r in here}
    assert {(r.student, r.assignment): same_parts(r) for r in there} == key
    naive = sum(e.points_correct for e in exercises.EXERCISES.values()
                if e.assignment == "01-naive")  # alice's kernels are right: no GPU, no speed
    assert [r.summary["score"] for r in here] == [naive, 0.0, 0.0]  # alice, bob, frank
    assert all(r.worker.startswith("tcp://") for r in there)
    by_worker: dict[str, list[task.Result]] = {}
    for r in there:
        by_worker.setdefault(r.worker, []).append(r)
    for rs in by_worker.values():  # one task at a time on each worker, within the run
        rs.sort(key=lambda r: r.started)
        assert begun < rs[0].started and rs[-1].started + rs[-1].seconds < ended
        assert all(a.started + a.seconds <= b.started + 0.01 for a, b in itertools.pairwise(rs))


class Killer(threading.Thread):
    """Kills (-9) the worker running a task of the given students, after it has run a
    while, ``times[student]`` times each; remembers which worker ran what."""

    def __init__(self, address: str, times: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.address, self.times = address, dict(times)
        self.killed: list[tuple[str, str]] = []  # (student, worker address)
        self.stop = threading.Event()

    def run(self) -> None:
        with Client(self.address, timeout=30) as client:
            seen: dict[tuple[str, str], float] = {}
            while not self.stop.is_set() and any(self.times.values()):
                # the tasks running, not those queued (a worker that just died is left out)
                for worker, keys in client.run(executing, on_error="ignore").items():
                    for key in keys:
                        student = key[2] if isinstance(key, tuple) else ""
                        if not self.times.get(student):
                            continue
                        first = seen.setdefault((worker, student), time.monotonic())
                        if time.monotonic() - first > 1.0:  # well into the task
                            pid = client.run(os.getpid, workers=[worker])[worker]
                            os.kill(pid, signal.SIGKILL)
                            self.killed.append((student, worker))
                            self.times[student] -= 1
                time.sleep(0.2)


def executing(dask_worker: Worker) -> list:
    """The keys of the tasks a worker is running (:meth:`Client.run` passes the worker)."""
    return [ts.key for ts in dask_worker.state.executing]


class DiesMakingTheCourse(WorkerPlugin):
    """Kills the first worker that starts making the course's inputs (a machine lost at
    that moment), once: ``marker`` is made first."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key: object, start: str, finish: str, **kw: object) -> None:
        if (finish == "executing" and str(key).startswith("tilelab-course")
                and not os.path.exists(self.marker)):
            Path(self.marker).touch()
            os._exit(1)


def naive_points(root: Path, student: str) -> tuple[float, float]:
    """(correctness, speed) of a student's 01-naive submission in the gradebook."""
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    with Gradebook(db, "tilelab") as gb:
        nb = gb.find_submission_notebook("naive", "01-naive", student)
        grades = {g.name: g.score for g in nb.grades}
    return grades["test_naive_correct"], grades["test_naive_speed"]


def sleepy(kernel: str, seconds: int) -> bytes:
    """A 01-naive notebook whose kernel cell holds ``kernel`` and then sleeps ``seconds``
    (so its task is surely still running when the test kills its worker)."""
    cell = kernel_cell(released_stub("naive"), kernel) + f"import time\ntime.sleep({seconds})\n"
    return json.dumps(submission("01-naive", {"naive": cell})).encode()


@pytest.mark.slow
@SAW
def test_a_killed_worker_costs_nothing_and_twice_killed_gets_zero(tmp_path):
    root = tmp_path / "course"
    small_class(root, ["alice", "bob", "frank"])
    stub = (
        "__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N,"
        " int K) { }"
    )
    write_submissions(root, {
        ("sleepy", "01-naive"): sleepy(solution_kernel("naive"), 3),  # killed once
        ("crasher", "01-naive"): sleepy(stub, 60),  # its worker dies each time it runs
    })
    marker = tmp_path / "died"
    with dask.config.set(start.CONFIG), start.local_cluster(2, gpus=False) as cluster:
        with Client(cluster.scheduler_address) as client:  # and one making the course's inputs
            client.register_plugin(DiesMakingTheCourse(str(marker)))
        killer = Killer(cluster.scheduler_address, {"sleepy": 1, "crasher": 2})
        killer.start()
        try:
            summary = classroom.grade_class(
                root, backend="emu", run_tasks=on_dask(scheduler=cluster.scheduler_address),
                progress=False,
            )
        finally:
            killer.stop.set()
            killer.join(30)
    assert marker.exists()  # a worker died making the inputs every task reads: no one's doing
    assert [s for s, _ in killer.killed].count("sleepy") == 1
    assert [s for s, _ in killer.killed].count("crasher") == 2
    want = expected_points(EMU)
    got = points_in_gradebook(root)
    # sleepy's task ran again on another worker; every other result is kept
    for student in ("alice", "bob", "frank"):
        assert got[student]["naive"] == want[student]["naive"], student
    assert naive_points(root, "sleepy") == (3, 0)
    again = next(s for s in summary["submissions"] if s["student"] == "sleepy")
    assert again["worker"] != next(w for s, w in killer.killed if s == "sleepy")
    # crasher's task killed its worker twice: 0 points, a clear message, the run went on
    assert naive_points(root, "crasher") == (0, 0)
    msg = messages(root, "crasher", "01-naive")["naive"][0]
    assert "worker died 2 times" in msg and "0 points" in msg
    assert [f["student"] for f in summary["failures"]] == ["crasher"]
    assert summary["graded"] == 5


def test_a_worker_with_several_threads_is_refused():
    with (
        dask.config.set(start.CONFIG),
        start.LocalCluster(n_workers=1, threads_per_worker=2, host="127.0.0.1",
                           dashboard_address=None) as cluster,
        pytest.raises(start.ClusterError, match="--nthreads 1"),
        start.open_client(scheduler=cluster.scheduler_address),
    ):
        pass


def test_more_workers_than_gpus_is_refused():
    if start.gpu_count() > 8:
        pytest.skip("a machine with more than 8 GPUs")
    with pytest.raises(start.ClusterError, match="one worker per GPU"):
        start.local_cluster(9, gpus=True)


def test_slurm_job_script_asks_one_gpu_and_one_thread_per_worker():
    with start.slurm_cluster(
        queue="gpu", account="cs101", walltime="01:30:00", memory="24GB",
        prologue=["source .venv/bin/activate"], host="127.0.0.1",
    ) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
        failures = cluster.scheduler.allowed_failures
    lines = script.splitlines()
    assert lines[0].startswith("#!")
    for directive in ("-p gpu", "-A cs101", "-t 01:30:00", "--gres=gpu:1", "--cpus-per-task=1",
                      "-n 1"):
        assert f"#SBATCH {directive}" in lines, (directive, script)
    assert "source .venv/bin/activate" in lines
    worker = next(ln for ln in lines if "dask_worker" in ln or "dask worker" in ln)
    assert address in worker and "--nthreads 1" in worker and "--nanny" in worker
    assert failures == start.SCHEDULER_ALLOWED_FAILURES  # tasks are run again by the executor


def test_grade_refuses_fewer_than_one_worker(capsys):
    from tilelab import cli

    assert cli.main(["grade", "--workers", "0"]) == 2
    assert "--workers must be at least 1 (got 0)" in capsys.readouterr().err


@pytest.mark.slow
def test_without_dask_cuda_each_gpu_worker_sees_only_its_own_gpu():
    def visible() -> str:
        return os.environ.get("CUDA_VISIBLE_DEVICES", "")

    with (
        dask.config.set(start.CONFIG),
        start.per_gpu_cluster([0, 1]) as cluster,
        Client(cluster) as client,
    ):
        start.check_workers(client)
        seen = sorted(client.run(visible).values())
    assert seen == ["0", "1"]


@pytest.mark.gpu
def test_each_local_cuda_worker_grades_on_a_gpu_of_its_own():
    pytest.importorskip("dask_cuda")

    def device() -> str:
        import pycuda.autoinit  # noqa: F401
        import pycuda.driver as cuda

        return cuda.Context.get_device().pci_bus_id()

    n = start.gpu_count()
    with (
        dask.config.set(start.CONFIG),
        start.local_cluster(n, gpus=True) as cluster,
        Client(cluster) as client,
    ):
        assert type(cluster).__name__ == "LocalCUDACluster"
        start.check_workers(client)
        seen = list(client.run(device).values())
    assert len(seen) == n and len(set(seen)) == n, seen
