"""One GPU's lock: untimed work shares it, a timed step has it alone, a waiting timed step
goes before new untimed work, a dead or overlong holder frees it, two tasks that each hold
it shared and want it alone never wait for each other, and a grading sandbox takes the
same lock as the grader outside it. Real processes and real ``flock`` throughout."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilelab.grading import bubblewrap as bwrap
from tilelab.grading import gpulock

HOLD = """
import os, sys, time
from pathlib import Path
from tilelab.grading import gpulock
lock = gpulock.GpuLock(Path(sys.argv[1]), wait=60)
how, flag = sys.argv[2], Path(sys.argv[3])
with (lock.shared() if how == "shared" else lock.exclusive(hold=int(sys.argv[4]))):
    flag.write_text("held")
    while not (flag.parent / "go").exists():
        time.sleep(0.01)
"""


def holder(lock: Path, how: str, flag: Path, hold: int = 60) -> subprocess.Popen:
    """A process that takes the lock ``how`` and keeps it until ``go`` appears by ``flag``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), how, str(flag), str(hold)],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    for _ in range(3000):
        if flag.exists() or proc.poll() is not None:
            break
        time.sleep(0.01)
    assert flag.exists(), "the holder never took the lock"
    return proc


@pytest.fixture
def lock(tmp_path):
    return gpulock.make(tmp_path / "scratch", "0")


def test_untimed_work_shares_the_gpu_and_a_timed_step_waits_for_it(lock, tmp_path):
    p = holder(lock, "shared", tmp_path / "a")
    mine = gpulock.GpuLock(lock, wait=0.3)
    with mine.shared():  # two shared holders at once
        pass
    with pytest.raises(gpulock.GpuBusy), mine.exclusive():
        pass
    (tmp_path / "go").touch()
    p.wait(timeout=60)
    with gpulock.GpuLock(lock, wait=30).exclusive():
        assert mine.mode == 0


def test_untimed_work_waits_while_a_kernel_is_timed(lock, tmp_path):
    p = holder(lock, "exclusive", tmp_path / "a")
    with pytest.raises(gpulock.GpuBusy), gpulock.GpuLock(lock, wait=0.3).shared():
        pass
    (tmp_path / "go").touch()
    p.wait(timeout=60)


def test_a_waiting_timed_step_goes_before_new_untimed_work(lock, tmp_path):
    reader = holder(lock, "shared", tmp_path / "a")
    flag = tmp_path / "b"  # the timed step: waits for the reader, meanwhile holds the turn
    writer = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "exclusive", str(flag),
                               "60"], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    for _ in range(3000):  # until the writer holds the turnstile
        try:
            fd = os.open(lock / "turn", os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        except BlockingIOError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the timed step never queued")
    with pytest.raises(gpulock.GpuBusy), gpulock.GpuLock(lock, wait=0.3).shared():
        pass  # a new reader would starve the timed step: it waits instead
    assert not flag.exists()  # the timed step is still waiting for the first reader
    (tmp_path / "go").touch()
    reader.wait(timeout=60)
    writer.wait(timeout=60)
    assert flag.read_text() == "held"


def test_an_empty_lock_folder_named_to_workers_started_elsewhere_works(tmp_path, monkeypatch):
    empty = tmp_path / "given"
    empty.mkdir()
    monkeypatch.setenv(gpulock.ENV, str(empty))
    assert gpulock.sandbox_binds()[0] == [(str(empty), gpulock.INSIDE)]
    assert sorted(os.listdir(empty)) == ["gpu", "turn"]
    with gpulock.GpuLock(empty).exclusive():
        pass


def test_a_holder_that_dies_or_holds_too_long_frees_the_gpu(lock, tmp_path):
    p = holder(lock, "exclusive", tmp_path / "a")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    with gpulock.GpuLock(lock, wait=30).exclusive():
        pass
    p = holder(lock, "exclusive", tmp_path / "b", hold=1)  # never told to go
    assert p.wait(timeout=60) == -signal.SIGALRM
    with gpulock.GpuLock(lock, wait=30).exclusive():
        pass


def test_two_tasks_holding_it_shared_each_time_a_kernel_in_turn(lock, tmp_path):
    code = ("import sys, time; from pathlib import Path; from tilelab.grading import gpulock\n"
            "lock = gpulock.GpuLock(Path(sys.argv[1]), wait=60)\n"
            "with lock.shared():\n"
            "    time.sleep(0.2)\n"
            "    with lock.exclusive():\n"
            "        time.sleep(0.05)\n"
            "    assert lock.mode\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(lock)], env=env)
             for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]


@pytest.mark.skipif(bwrap.problem() is not None, reason=f"no sandbox: {bwrap.problem()}")
def test_a_grading_sandbox_takes_the_graders_lock_and_cannot_remove_it(lock, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv(gpulock.ENV, str(lock))
    read_only, env = gpulock.sandbox_binds()
    code = ("import os; from tilelab.grading import gpulock\n"
            "lock = gpulock.worker_lock(); lock.wait = 0.3\n"
            "try:\n"
            "    with lock.exclusive(): print('alone')\n"
            "except gpulock.GpuBusy: print('busy')\n"
            "try:\n"
            "    os.remove(os.path.join(gpulock.INSIDE, 'gpu')); print('removed')\n"
            "except OSError: print('kept')\n")
    with gpulock.GpuLock(lock).shared(), bwrap.private_folder() as work:
        res = bwrap.run([sys.executable, "-c", code], work, read_only=read_only, env=env,
                        limits=bwrap.Limits(wall_seconds=60))
    assert res.stdout.decode().split() == ["busy", "kept"], res.stderr.decode()[-2000:]
    with bwrap.private_folder() as work:
        res = bwrap.run([sys.executable, "-c", code], work, read_only=read_only, env=env,
                        limits=bwrap.Limits(wall_seconds=60))
    assert res.stdout.decode().split()[0] == "alone", res.stderr.decode()[-2000:]


@pytest.mark.slow
def test_the_workers_of_one_gpu_share_its_lock_and_see_only_it(tmp_path):
    pytest.importorskip("distributed")
    import dask
    from distributed import Client

    from tilelab.cluster import start

    def seen() -> tuple[str, str]:
        return os.environ["CUDA_VISIBLE_DEVICES"], os.environ[gpulock.ENV]

    with (dask.config.set(start.CONFIG),
          start.per_gpu_cluster([0], 2, tmp_path / "locks") as cluster,
          Client(cluster) as client):
        client.wait_for_workers(2, timeout=120)
        got = client.run(seen)
    assert len(got) == 2
    assert set(got.values()) == {("0", str(tmp_path / "locks" / "gpu-0"))}
    assert sorted(os.listdir(tmp_path / "locks" / "gpu-0")) == ["gpu", "turn"]


def test_a_grading_worker_waits_while_a_kernel_is_timed_on_its_gpu(lock, tmp_path):
    # the worker takes the lock shared before anything runs on its GPU (here, with no GPU,
    # the backend it picks is the emulator's, and it still takes it)
    from tilelab.catalog.reference import KERNELS

    (tmp_path / "k.cu").write_text(KERNELS["naive"].source())
    timed = holder(lock, "exclusive", tmp_path / "a")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), gpulock.ENV: str(lock)}
    env.pop("TILELAB_BACKEND", None)
    worker = subprocess.Popen([sys.executable, "-m", "tilelab.grading.worker", "--exercise",
                               "naive", "--source", str(tmp_path / "k.cu"), "--out",
                               str(tmp_path / "v.json"), "--no-speed"], env=env)
    with pytest.raises(subprocess.TimeoutExpired):
        worker.wait(timeout=3)  # it cannot grade while the GPU is someone else's
    assert not (tmp_path / "v.json").exists()
    (tmp_path / "go").touch()
    timed.wait(timeout=60)
    assert worker.wait(timeout=300) == 0
    assert '"correct": true' in (tmp_path / "v.json").read_text()
