"""Class runs on a Dask cluster of local processes (the emulator, no GPU).

The class of ``test_classroom`` graded by 2 workers gets exactly the grades of the
one-process run; a worker killed (kill -9) in the middle of a task costs nothing; a task
whose worker dies twice gets 0 points and the run goes on; a coordinator killed mid-run
and run again grades only what is missing or changed; ``--student`` regrades one student.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import pytest
from distributed import Client
from nbgrader.api import Gradebook
from test_classroom import (
    CLASS,
    EMU,
    build_course,
    expected_points,
    kernel_cell,
    points_in_gradebook,
    released_stub,
    solution_kernel,
    submission,
    write_submissions,
)

from tilelab import classroom
from tilelab.catalog import exercises
from tilelab.classroom import resume
from tilelab.classroom.progress import Progress
from tilelab.cluster import start
from tilelab.cluster.run import on_dask

REPO = Path(__file__).resolve().parents[1]
SAW = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


def verdicts(root: Path) -> dict[tuple[str, str], dict]:
    """(student, assignment) -> the points and each kernel's outcome in its verdict file
    (messages name elements of fresh random inputs, so only their count is compared)."""
    out = {}
    for path in sorted((root / "autograder" / "feedback").glob("*/*/tilelab_verdict.json")):
        doc = json.loads(path.read_text())
        out[(doc["student"], doc["assignment"])] = {
            "points": doc["points"],
            "outcome": {
                v["exercise"]: (v["correct"], v["speed_passed"], len(v["messages"]))
                for v in doc["verdicts"]
            },
        }
    return out


def messages(root: Path, student: str, assignment: str) -> dict[str, list[str]]:
    path = root / "autograder" / "feedback" / student / assignment / "tilelab_verdict.json"
    return {v["exercise"]: v["messages"] for v in json.loads(path.read_text())["verdicts"]}


def csv_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return sorted(
            (r["assignment"], r["student_id"], r["score"]) for r in csv.DictReader(f)
        )


@pytest.mark.slow
@SAW
def test_two_workers_give_exactly_the_grades_of_one(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    build_course(one)
    shutil.copytree(one, two)
    serial = classroom.grade_class(one, backend="emu", progress=False)
    begun = time.time()
    parallel = classroom.grade_class(two, backend="emu", run_tasks=on_dask(2), progress=False)
    ended = time.time()
    assert serial["failures"] == [] and parallel["failures"] == [], parallel["failures"]
    assert parallel["workers"] == 2 and parallel["graded"] == len(serial["submissions"])
    assert points_in_gradebook(two) == points_in_gradebook(one) == expected_points(EMU)
    assert verdicts(two) == verdicts(one)
    assert csv_rows(Path(parallel["csv"])) == csv_rows(Path(serial["csv"]))
    for student in CLASS:  # nbgrader's own feedback is there too
        for a in {exercises.get(e).assignment for e in CLASS[student]}:
            nb = classroom.notebook_id(a)
            assert (two / "autograder" / "feedback" / student / a / f"{nb}.html").is_file()
            assert (two / "autograder" / "autograded" / student / a / f"{nb}.ipynb").is_file()
    timing = parallel["timing"]
    assert timing["tasks"] == parallel["graded"] and timing["task_seconds_mean"] > 0
    assert 0 < parallel["cluster_start_seconds"] < parallel["wall_seconds"]
    assert len(parallel["timings"]) == len(serial["submissions"])
    assert all(t["worker"].startswith("tcp://") for t in parallel["timings"])
    by_worker: dict[str, list[dict]] = {}
    for t in parallel["timings"]:
        by_worker.setdefault(t["worker"], []).append(t)
    for ts in by_worker.values():  # one task at a time on each worker, within the run
        ts.sort(key=lambda t: t["started"])
        assert begun < ts[0]["started"] and ts[-1]["started"] + ts[-1]["seconds"] < ended
        assert all(a["started"] + a["seconds"] <= b["started"] + 0.01
                   for a, b in itertools.pairwise(ts))


def small_class(root: Path, students: list[str], assignment: str = "01-naive") -> None:
    """``build_course`` keeping only some students' submissions of one assignment."""
    build_course(root)
    submitted = root / "autograder" / "submitted"
    for folder in submitted.glob("*/*"):
        if folder.parent.name not in students or folder.name != assignment:
            shutil.rmtree(folder)
    for folder in submitted.iterdir():
        if not any(folder.iterdir()):
            folder.rmdir()


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
                for worker, keys in client.processing().items():
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
    small_class(root, ["alice", "bob", "frank", "grace"])
    stub = (
        "__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N,"
        " int K) { }"
    )
    write_submissions(root, {
        ("sleepy", "01-naive"): sleepy(solution_kernel("naive"), 10),  # killed once
        ("crasher", "01-naive"): sleepy(stub, 60),  # its worker dies each time it runs
    })
    with dask.config.set(start.CONFIG), start.local_cluster(2, gpus=False) as cluster:
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
    assert [s for s, _ in killer.killed].count("sleepy") == 1
    assert [s for s, _ in killer.killed].count("crasher") == 2
    want = expected_points(EMU)
    got = points_in_gradebook(root)
    # sleepy's task ran again on another worker; every other result is kept
    for student in ("alice", "bob", "frank", "grace"):
        assert got[student]["naive"] == want[student]["naive"], student
    assert naive_points(root, "sleepy") == (3, 0)
    again = next(s for s in summary["submissions"] if s["student"] == "sleepy")
    assert again["worker"] != next(w for s, w in killer.killed if s == "sleepy")
    # crasher's task killed its worker twice: 0 points, a clear message, the run went on
    assert naive_points(root, "crasher") == (0, 0)
    msg = messages(root, "crasher", "01-naive")["naive"][0]
    assert "worker died 2 times" in msg and "0 points" in msg
    assert [f["student"] for f in summary["failures"]] == ["crasher"]
    assert summary["graded"] == 6


def coordinator(root: Path, *args: str) -> subprocess.Popen:
    """``tilelab grade`` on a 2-worker local cluster, in its own process group."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tilelab.cli", "grade", "--course", str(root), "--backend",
         "emu", "--workers", "2", *args],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )


@pytest.mark.slow
@SAW
def test_an_interrupted_run_grades_only_what_is_missing_or_changed(tmp_path):
    root = tmp_path / "course"
    small_class(root, ["alice", "bob", "carol", "frank", "grace", "henry", "mallory"])
    feedback = root / "autograder" / "feedback"
    proc = coordinator(root)
    deadline = time.monotonic() + 400
    while len(list(feedback.glob("*/*/tilelab_verdict.json"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the coordinator and its cluster, mid-run
    proc.wait()
    done = len(list(feedback.glob("*/*/tilelab_verdict.json")))
    total = 6  # carol submitted 02-tiled only
    assert 2 <= done < total

    again = classroom.grade_class(root, backend="emu", run_tasks=on_dask(2), progress=False)
    assert again["graded"] == total - done and again["up_to_date"] == done
    assert again["failures"] == []
    want = expected_points(EMU)
    got = points_in_gradebook(root)
    assert {s: p["naive"] for s, p in got.items()} == {s: want[s]["naive"] for s in got}

    # nothing changed: nothing graded
    rerun = classroom.grade_class(root, backend="emu", run_tasks=on_dask(2), progress=False)
    assert rerun["graded"] == 0
    # bob fixes his kernel: only his submission is graded again
    cell = kernel_cell(released_stub("naive"), solution_kernel("naive"))
    nb = root / "autograder" / "submitted" / "bob" / "01-naive" / "naive.ipynb"
    nb.write_text(json.dumps(submission("01-naive", {"naive": cell})))
    fixed = classroom.grade_class(root, backend="emu", run_tasks=on_dask(2), progress=False)
    assert fixed["graded"] == 1 and fixed["submissions"][0]["student"] == "bob"
    assert points_in_gradebook(root)["bob"]["naive"] == (3, 0)
    # --student regrades that student even though nothing changed
    one = classroom.grade_class(
        root, backend="emu", run_tasks=on_dask(2), students=["grace"], progress=False
    )
    assert [s["student"] for s in one["submissions"]] == ["grace"]
    # a changed grading input (a gate) makes every submission stale
    stale = classroom.grade_class(
        root, backend="emu", run_tasks=on_dask(2), gates={"naive": 9.0}, progress=False
    )
    assert stale["graded"] == total


def test_a_rerun_is_up_to_date_only_with_the_same_files_inputs_and_gradebook():
    files = {"solutions/01-naive/naive.ipynb": b"{}", "autograder/nbgrader_config.py": b"c"}
    inputs = resume.inputs_digest(files, {"backend": "emu", "gates": {"naive": 1.2}})
    assert inputs != resume.inputs_digest(files, {"backend": "emu", "gates": {"naive": 1.3}})
    assert inputs != resume.inputs_digest({**files, "solutions/01-naive/naive.ipynb": b"[]"},
                                          {"backend": "emu", "gates": {"naive": 1.2}})
    sub = resume.digest_files({"naive.ipynb": b"mine"})
    points = {"naive": {"correct": 3.0, "speed": 0.0}}
    doc = {"submission_sha256": sub, "inputs_sha256": inputs, "points": points}
    assert resume.up_to_date(doc, sub, inputs, points)
    assert not resume.up_to_date(doc, resume.digest_files({"naive.ipynb": b"new"}), inputs, points)
    assert not resume.up_to_date(doc, sub, "other", points)
    assert not resume.up_to_date(doc, sub, inputs, None)  # not in the gradebook
    assert not resume.up_to_date(doc, sub, inputs, {"naive": {"correct": 0.0, "speed": 0.0}})
    assert not resume.up_to_date(None, sub, inputs, points)


def test_progress_in_a_log_is_plain_lines_with_count_rate_and_time_left():
    out = io.StringIO()
    bar = Progress(3, stream=out, skipped=2)
    bar.step("01-naive alice", 4.2)
    bar.step("01-naive bob", 5.0)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "tilelab grade: grading 3 submission(s) (2 up to date, not graded again)"
    assert lines[1].startswith("tilelab grade: [1/3] 01-naive alice: 4.2 s; ")
    assert "submissions/min" in lines[2] and "left" in lines[2]
    assert lines[-1].startswith("tilelab grade: 2/3 recorded in ")
    assert "\r" not in out.getvalue()


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
    assert failures == start.ALLOWED_FAILURES


def test_grade_refuses_fewer_than_one_worker(capsys):
    from tilelab import cli

    assert cli.main(["grade", "--workers", "0"]) == 2
    assert "--workers must be at least 1 (got 0)" in capsys.readouterr().err


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


def test_a_submission_holding_a_link_sends_a_task_no_file_only_the_links_names(tmp_path):
    from nbgrader.coursedir import CourseDirectory

    from tilelab.classroom.run import read_submission

    cd = CourseDirectory(root=str(tmp_path))
    folder = tmp_path / "submitted" / "mallory" / "01-naive"
    folder.mkdir(parents=True)
    (folder / "naive.ipynb").write_text("{}")
    secret = tmp_path / "autograder"
    secret.mkdir()
    (secret / "gradebook.db").write_text("every grade")
    plain = read_submission(cd, "mallory", "01-naive")
    assert plain.files == {"naive.ipynb": b"{}"} and plain.unsafe == []
    (folder / "course").symlink_to(secret, target_is_directory=True)
    sub = read_submission(cd, "mallory", "01-naive")
    assert sub.files == {} and sub.unsafe == ["course (a symbolic link)"]
    assert sub.digest != plain.digest  # a rerun sees the change
    # a link to a folder is never followed by any reader of the cluster's files
    assert resume.read_tree(folder) == {"naive.ipynb": b"{}"}
