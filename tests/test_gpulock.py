"""One GPU's lock: untimed GPU work shares it, a timed round has it alone, a waiting timed
round goes before new untimed work, a dead or overlong holder frees it, two tasks that each
hold it shared and want it alone never wait for each other, a grading sandbox takes the
same lock as the grader outside it, one profiler per GPU, CUDA's start and teardown under
it, and a grading worker that compiles and checks on the CPU holds nothing. Real processes
and real ``flock`` throughout."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilelab import settings
from tilelab.grading import scoring
from tilelab.grading.worker import launch_lock
from tilelab.isolation import bubblewrap as bwrap
from tilelab.isolation import gpulock

HOLD = """
import os, sys, time
from pathlib import Path
from tilelab.isolation import gpulock
lock = gpulock.GpuLock(Path(sys.argv[1]), wait=60)
how, flag = sys.argv[2], Path(sys.argv[3])
with {"shared": lock.shared, "profiler": lock.profiler,
      "exclusive": lambda: lock.exclusive(hold=int(sys.argv[4]))}[how]():
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
    assert sorted(os.listdir(empty)) == ["gpu", "ncu", "turn"]
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
    code = ("import sys, time; from pathlib import Path; from tilelab.isolation import gpulock\n"
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
    code = ("import os; from tilelab.isolation import gpulock\n"
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
    assert sorted(os.listdir(tmp_path / "locks" / "gpu-0")) == ["gpu", "ncu", "turn"]


def test_a_grading_worker_holds_nothing_while_it_compiles_and_checks(lock, tmp_path):
    # another task times a kernel for as long as this test likes; a worker whose work is
    # all on the CPU (compile, correctness and the analysis on the emulator) grades anyway
    from tilelab.catalog.reference import KERNELS

    (tmp_path / "k.cu").write_text(KERNELS["naive"].source())
    timed = holder(lock, "exclusive", tmp_path / "a")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), gpulock.ENV: str(lock)}
    env.pop("TILELAB_BACKEND", None)  # the backend it finds (here, with no GPU, the emulator)
    worker = subprocess.run([sys.executable, "-m", "tilelab.grading.worker", "--exercise",
                             "naive", "--source", str(tmp_path / "k.cu"), "--out",
                             str(tmp_path / "v.json"), "--no-speed"], env=env, timeout=300)
    assert worker.returncode == 0
    assert '"correct": true' in (tmp_path / "v.json").read_text()
    assert timed.poll() is None  # the timed step held the GPU throughout
    (tmp_path / "go").touch()
    timed.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["reference", "wrong_result"])
def test_a_gpu_checks_every_shape_in_one_hold_and_compares_holding_nothing(
        lock, monkeypatch, key):
    """The correctness launches of a GPU check (run here on the emulator, with a real lock):
    every shape's copies and launch in one shared hold, not one per shape (each hold waits
    behind a timed round awaiting the GPU); the float64 comparisons after it, with the lock
    free (another task's timed round takes the GPU at each); a wrong shape launched again to
    see whether it is repeatable. The results are the shape-by-shape check's."""
    import numpy as np

    from tilelab.catalog import exercises
    from tilelab.device.runtime import get_runtime
    from tilelab.grading import correctness

    monkeypatch.setenv(gpulock.ENV, str(lock))
    ex = exercises.get("naive")
    rt = get_runtime("emu")
    wrong_result = Path(__file__).parent / "fixtures" / "submissions" / "naive-wrong_result.cu"
    source = ex.reference.source() if key == "reference" else wrong_result.read_text()
    fn = rt.SourceModule(source).get_function(ex.kernel)
    events: list[str] = []
    take, compare = gpulock.GpuLock.hold_shared, correctness.compare

    def spied_take(self):
        events.append("hold")
        take(self)

    def spied_compare(*a, **k):
        probe = gpulock.GpuLock(lock, wait=0.2)  # another task's timed round gets the GPU
        with probe.exclusive():
            events.append("compare")
        probe.close()
        return compare(*a, **k)

    monkeypatch.setattr(gpulock.GpuLock, "hold_shared", spied_take)
    monkeypatch.setattr(correctness, "compare", spied_compare)
    held = list(correctness._held_once(rt, fn, ex.problem, ex.launch, ex.shapes,
                                       np.random.default_rng(7), quick=True))
    monkeypatch.setattr(correctness, "compare", compare)
    one_by_one = list(correctness._one_by_one(rt, fn, ex.problem, ex.launch, ex.shapes,
                                              np.random.default_rng(7), True, None))
    assert [(s, r.ok, r.wrong) for s, r in held] == [(s, r.ok, r.wrong) for s, r in one_by_one]
    wrong = sum(not r.ok for _, r in held)
    assert (wrong > 0) == (key != "reference")
    # one hold for every shape's launch; each comparison after it (a wrong shape's twice:
    # its launch again, which on a GPU holds the lock once more, is compared too)
    assert events == ["hold"] + ["compare"] * (len(ex.shapes) + wrong)


def test_regions_nest_within_one_process(lock):
    mine = gpulock.GpuLock(lock, wait=0.3)
    with mine.exclusive():
        with mine.shared():  # a copy inside a timed round: still alone
            assert mine.mode == fcntl.LOCK_EX
        with mine.exclusive():
            assert mine.mode == fcntl.LOCK_EX
        assert mine.mode == fcntl.LOCK_EX
    assert mine.mode == 0
    with mine.shared(), mine.shared():
        assert mine.mode == fcntl.LOCK_SH
    assert mine.mode == 0
    other = gpulock.GpuLock(lock, wait=0.3)  # nothing left behind
    with other.exclusive():
        pass
    with pytest.raises(ValueError):
        gpulock.region("sometimes")


def test_one_profiler_per_gpu_and_it_holds_no_gpu_time(lock, tmp_path):
    p = holder(lock, "profiler", tmp_path / "a")
    mine = gpulock.GpuLock(lock, wait=0.3)
    with pytest.raises(gpulock.GpuBusy, match="Nsight Compute"), mine.profiler():
        pass
    with mine.exclusive():  # a timed round goes on while another task profiles
        pass
    with mine.shared():
        pass
    (tmp_path / "go").touch()
    p.wait(timeout=60)
    with mine.profiler():
        pass


def test_only_the_counted_launch_holds_the_profiler(lock, tmp_path, monkeypatch):
    """Several ncu processes overlap on one GPU but for the launch each counts (measured on
    an H100: eight at once, no profiler's error, counts as alone): the counted launch holds
    the GPU's one profiler and the counted mode, every other launch shares the GPU."""
    monkeypatch.setenv(gpulock.ENV, str(lock))
    p = holder(lock, "profiler", tmp_path / "a")  # another process's counted launch
    gpulock.worker_lock().wait = 0.3
    with launch_lock(3, 7, gpulock.ALONE):  # not the counted one: shares the GPU
        pass
    with pytest.raises(gpulock.GpuBusy, match="Nsight Compute"), launch_lock(7, 7, "alone"):
        pass
    (tmp_path / "go").touch()
    p.wait(timeout=60)
    (tmp_path / "b").mkdir()
    q = holder(lock, "shared", tmp_path / "b" / "flag")  # another task's copy in flight
    with pytest.raises(gpulock.GpuBusy), launch_lock(7, 7, gpulock.ALONE):
        pass  # the counted launch waits for other tasks' GPU work, as the setting says
    with launch_lock(7, 7, gpulock.SHARED):
        pass
    (tmp_path / "b" / "go").touch()
    q.wait(timeout=60)
    with launch_lock(0, -1, gpulock.ALONE):  # nothing counted: every launch as --lock says
        assert gpulock.worker_lock().mode == fcntl.LOCK_EX


def test_a_counted_launch_takes_the_lock_as_the_setting_says(lock, tmp_path, monkeypatch):
    monkeypatch.setenv(gpulock.ENV, str(lock))
    assert gpulock.counted_mode() == gpulock.ALONE  # the safe default
    assert gpulock.sandbox_binds()[1][settings.COUNTERS_LOCK.name] == gpulock.ALONE
    p = holder(lock, "shared", tmp_path / "a")  # another task's copy in flight
    gpulock.worker_lock().wait = 0.3
    with pytest.raises(gpulock.GpuBusy), gpulock.region(gpulock.counted_mode()):
        pass
    monkeypatch.setenv(settings.COUNTERS_LOCK.name, "shared")
    assert gpulock.sandbox_binds()[1][settings.COUNTERS_LOCK.name] == gpulock.SHARED
    with gpulock.region(gpulock.counted_mode()):  # counts beside untimed work
        pass
    (tmp_path / "go").touch()
    p.wait(timeout=60)


START = """
import atexit, fcntl, os, sys
from pathlib import Path
from tilelab.isolation import gpulock

def held() -> str:  # whether some process holds the GPU's lock (a probe on its own fd)
    fd = os.open(Path(sys.argv[1]) / "gpu", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return "free"
    except BlockingIOError:
        return "held"
    finally:
        os.close(fd)

def start():  # as pycuda.autoinit does: a context, and its teardown registered at exit
    print("start", held(), flush=True)
    atexit.register(lambda: print("teardown", held(), flush=True))

gpulock.start_cuda(start)
print("grading", held(), flush=True)
"""


@pytest.mark.parametrize("setting,during", [(None, "held"), ("shared", "held"),
                                            ("none", "free")])
def test_cudas_start_and_teardown_hold_the_lock_as_the_setting_says(lock, setting, during):
    """By default (and with TILELAB_START_LOCK=shared) a process's CUDA start and its
    teardown hold the GPU's lock shared and the grading between holds nothing; with
    ``none`` neither does (and the sandbox is told the same)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), gpulock.ENV: str(lock)}
    env.pop(settings.START_LOCK.name, None)
    if setting is not None:
        env[settings.START_LOCK.name] = setting
    out = subprocess.run([sys.executable, "-c", START, str(lock)], env=env, timeout=120,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == [f"start {during}", "grading free",
                                          f"teardown {during}"]
    with gpulock.GpuLock(lock, wait=5).exclusive():  # and the process's end freed it
        pass
    with settings.environ({gpulock.ENV: str(lock), **settings.START_LOCK.set_to(setting)}):
        told = gpulock.sandbox_binds()[1][settings.START_LOCK.name]
    assert told == (setting or "shared")


@pytest.mark.parametrize("hold_seconds,hold_bytes,order", [
    (60.0, 1 << 30, ["candidate", "baseline"] * 3 + ["check", "check"] * 3),
    (0.0, 1 << 30, ["candidate", "baseline", "check", "check"] * 3),
    (60.0, 1, ["candidate", "baseline", "check", "check"] * 3),
])
def test_a_speed_runs_timed_rounds_are_alone_and_its_checks_hold_nothing(
        lock, monkeypatch, hold_seconds, hold_bytes, order):
    """The graded speed run on the emulator with a real lock: its rounds' launches run
    with the GPU's lock held exclusive, as many rounds in one hold as its time and the
    outputs it may keep allow (one wait for the GPU per hold, not per round); the float64
    checks of a hold's outputs come after it, with the lock free (probed on a descriptor
    of its own, as another task would)."""
    from tilelab.device import bench

    monkeypatch.setattr(bench, "HOLD_SECONDS", hold_seconds)
    monkeypatch.setattr(bench, "HOLD_BYTES", hold_bytes)
    import numpy as np

    from tilelab.catalog import exercises
    from tilelab.device.bench import UNWRITTEN, UNWRITTEN_SOURCE, Timed, time_checked
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.timed import ROWS_PER_LAUNCH, launch_check

    def probe(how: int) -> bool:  # could another task take it `how` now?
        fd = os.open(lock / "gpu", os.O_RDONLY)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    seen: list[str] = []

    def counted(fn, label):
        def launch(*args, **kw):
            seen.append(label if not probe(fcntl.LOCK_SH) else f"{label} NOT alone")
            return fn(*args, **kw)
        return launch

    ex, shape = exercises.get("tiled"), (64, 96, 64)
    rt, rng = get_runtime("emu"), np.random.default_rng(5)
    mine = gpulock.GpuLock(lock)
    right = launch_check(ex, shape)
    unwritten = rt.SourceModule(UNWRITTEN_SOURCE).get_function(UNWRITTEN)

    def check(inputs, got, wide):
        seen.append("check" if probe(fcntl.LOCK_EX) else "check while held")
        return right(inputs, got, wide)

    kernels = {
        "candidate": Timed(counted(rt.SourceModule(ex.reference.source())
                                   .get_function(ex.kernel), "candidate"), ex.launch),
        "baseline": Timed(counted(rt.SourceModule(ex.baseline.source())
                                  .get_function(ex.baseline.name), "baseline"),
                          ex.baseline.launch),
    }
    began = time.monotonic()
    t = time_checked(rt, kernels, ex.problem, shape, rng, check, POISON_BITS, unwritten,
                     ROWS_PER_LAUNCH, warmup=1, repeat=2, gpu_work=mine.shared,
                     alone=mine.exclusive)
    assert len(t["candidate"].samples_ms) == 2
    assert seen == order
    holds = 1 if order.index("check") > 2 else 3  # one hold, or one per round
    assert t["candidate"].holds == t["baseline"].holds == holds
    assert 0 < t["candidate"].alone_s < time.monotonic() - began
    assert mine.mode == 0 and probe(fcntl.LOCK_EX)


@pytest.mark.gpu
def test_three_graders_sharing_one_gpu_each_measure_speed_and_read_counters(lock, monkeypatch):
    """The whole path on a GPU, as a class run with three tasks per GPU grades: each
    worker's CUDA start, loads, launches and copies shared, each timed round alone, one
    Nsight Compute at a time (three at once without the profiler's mutex: 'a driver
    resource was unavailable')."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from tilelab.catalog import exercises
    from tilelab.grading.sandbox import grade_source

    monkeypatch.setenv(gpulock.ENV, str(lock))
    source = exercises.get("tiled").reference.source()

    def grade(_: int):  # a fresh comment each: never a cached verdict
        return grade_source("tiled", f"{source}\n// {uuid.uuid4()}\n", backend_name="gpu")

    t0 = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        verdicts = list(pool.map(grade, range(3)))
    print(f"three graders on one GPU: {time.monotonic() - t0:.1f} s;",
          [(round(v.speedup or 0, 2), v.step_seconds.get("counters")) for v in verdicts])
    for v in verdicts:
        assert v.correct and v.speed_measured and v.speed_passed, scoring.report(v)
        assert v.counters and "error" not in v.counters, v.counters
    assert mode_free(lock)


def mode_free(lock: Path) -> bool:
    """Whether nothing holds the GPU's lock now (every grader let it go)."""
    fd = os.open(lock / "gpu", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.gpu
@pytest.mark.parametrize("setting", ["shared", "none"])
def test_a_workers_real_cuda_start_waits_for_a_timed_round_only_as_the_setting_says(
        lock, tmp_path, monkeypatch, setting):
    """The grading worker started ahead of a grade (as ``tilelab bench start_load`` churns
    it) starts CUDA for real while another task holds the GPU alone: with the default it
    waits, making no start; with TILELAB_START_LOCK=none it starts and ends meanwhile."""
    from tilelab.experiments import start_load

    monkeypatch.setenv(gpulock.ENV, str(lock))
    monkeypatch.setenv(settings.START_LOCK.name, setting)
    p = holder(lock, "exclusive", tmp_path / "a")  # a timed round in flight
    worker = subprocess.Popen(start_load.command("cuda", str(tmp_path / "kernel.cu")),
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        worker.wait(timeout=15)  # a CUDA start takes a second or two
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
    (tmp_path / "go").touch()
    p.wait(timeout=60)
    _, err = worker.communicate(timeout=120)  # freed: the waiting one starts and ends too
    assert worker.returncode == 0, err
    assert "tilelab-worker ready" in err
    assert ended == (setting == "none")


def test_a_class_runs_notebook_leaves_a_shared_gpu_sandboxed_or_not(lock, monkeypatch):
    from types import SimpleNamespace

    from tilelab.classroom.steps import off_the_gpu

    assert off_the_gpu(SimpleNamespace(sandboxed=True)) == {}  # no lock: the GPU's as before
    monkeypatch.setenv(gpulock.ENV, str(lock))
    assert off_the_gpu(SimpleNamespace(sandboxed=True)) == {"TILELAB_BACKEND": "emu"}
    assert off_the_gpu(SimpleNamespace(sandboxed=False)) == {
        "TILELAB_BACKEND": "emu", "CUDA_VISIBLE_DEVICES": ""}


STARTED = """
import sys
from pathlib import Path
from tilelab.isolation import gpulock
with gpulock.shared():
    Path(sys.argv[1]).write_text(str(gpulock.folder()))
"""


def test_a_check_with_no_lock_named_gets_its_own_for_the_processes_it_starts(tmp_path,
                                                                            monkeypatch):
    """A learner's check (no class run's lock) starts its sanitizers and ncu beside its
    speed run: within ``private`` they share a lock of its own, so a process it starts
    cannot put work beside a timed round; afterwards the folder and the name are gone.
    Where a class run names a lock, that one is kept."""
    monkeypatch.delenv(gpulock.ENV, raising=False)
    with gpulock.private():
        path = gpulock.folder()
        assert path is not None and sorted(p.name for p in path.iterdir()) == sorted(
            gpulock.FILES)
        flag = tmp_path / "a"
        with gpulock.exclusive():  # a timed round of this process
            p = subprocess.Popen(  # a sanitizer, say: it inherits the name
                [sys.executable, "-c", STARTED, str(flag)],
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            time.sleep(1.0)
            assert p.poll() is None and not flag.exists()  # it waits for the round
        assert p.wait(timeout=60) == 0 and flag.read_text() == str(path)
    assert gpulock.folder() is None and not path.exists()
    named = gpulock.make(tmp_path / "scratch", "0")
    monkeypatch.setenv(gpulock.ENV, str(named))
    with gpulock.private():
        assert gpulock.folder() == named
    assert gpulock.folder() == named
