"""A check's emulated launches run several at once, each a process of its own: the
results are those of one launch at a time, in shape order; a kernel whose module keeps
device globals gets one lane; a check stopped early starts no further launch."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from tilelab import emu
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import get_runtime
from tilelab.emu import native
from tilelab.grading import budget, correctness, emu_steps, pipeline
from tilelab.grading.budget import MAX_EMU_LANES, emu_lanes
from tilelab.grading.judge import Kind
from tilelab.grading.steps import Run, build

NAIVE = exercises.get("naive")
# right only where every row of C is below 64: wrong at some graded shapes, right at others
ROWS_BELOW_64 = KERNELS["naive"].source().replace(
    KERNELS["naive"].name + "(", NAIVE.kernel + "(").replace("if (", "if (row < 64 && ", 1)


def naive_function(source: str) -> object:
    return build(get_runtime("emu"), source).get_function(NAIVE.kernel)


def test_lanes_follow_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = os.sched_getaffinity(0)
    assert emu_lanes() == max(1, min(len(cores), MAX_EMU_LANES))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as Dask's nanny sets it: one task, one core
    assert emu_lanes() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert emu_lanes() == max(1, min(len(cores), MAX_EMU_LANES))
    monkeypatch.delenv("OMP_NUM_THREADS")
    os.sched_setaffinity(0, {min(cores)})
    try:
        assert emu_lanes() == 1
    finally:
        os.sched_setaffinity(0, cores)


def test_a_module_with_device_globals_launches_one_at_a_time():
    rt = get_runtime("emu")
    counting = emu.SourceModule(
        "__device__ int launches;\n"
        "__global__ void k(float* out) { out[0] = (float)launches++; }").get_function("k")
    plain = emu.SourceModule("__global__ void k(float* out) { out[0] = 1.0f; }").get_function("k")
    assert not counting.stateless and correctness.lanes(rt, counting) == 1
    assert plain.stateless and correctness.lanes(rt, plain) == emu_lanes()


def test_launches_in_lanes_give_each_shape_its_own_result_in_order():
    rt, fn = get_runtime("emu"), naive_function(ROWS_BELOW_64)
    rng = np.random.default_rng(7)
    alone = list(correctness.check_shapes(rt, fn, NAIVE.problem, NAIVE.launch, NAIVE.shapes,
                                          rng, quick=True))
    with ThreadPoolExecutor(3) as pool:
        lanes = list(correctness.check_shapes(rt, fn, NAIVE.problem, NAIVE.launch,
                                              NAIVE.shapes, rng, quick=True, pool=pool))
    assert [s for s, _ in lanes] == [s for s, _ in alone] == list(NAIVE.shapes)
    failed = [f"{s}: {type(r).__name__}: {r}" for s, r in alone + lanes if not hasattr(r, "ok")]
    assert not failed, failed  # a launch that failed rather than judged (its message)
    verdicts = [(r.ok, r.total) for _, r in lanes]
    assert verdicts == [(r.ok, r.total) for _, r in alone]
    assert {ok for ok, _ in verdicts} == {True, False}  # the test tells shapes apart
    assert all(ok == (s[0] <= 64) for (s, _), (ok, _) in zip(lanes, verdicts, strict=True))


class Counted:
    """The emulated kernel, counting its launches."""

    def __init__(self, fn: object) -> None:
        self.fn, self.launches = fn, 0
        self.stateless = True

    def __call__(self, *args: object, **kw: object) -> object:
        self.launches += 1
        return self.fn(*args, **kw)


def test_a_check_stopped_early_starts_no_further_launch():
    rt, fn = get_runtime("emu"), Counted(naive_function(ROWS_BELOW_64))
    with ThreadPoolExecutor(1) as pool:
        checked = correctness.check_shapes(rt, fn, NAIVE.problem, NAIVE.launch, NAIVE.shapes,
                                           np.random.default_rng(), quick=True, pool=pool)
        next(checked)
        checked.close()
    assert 1 <= fn.launches <= 2 < len(NAIVE.shapes)  # the one read, at most one under way


class Recording(ThreadPoolExecutor):
    """A pool that keeps every future it hands out, in order."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.futures: list[Future] = []

    def submit(self, *args: object, **kw: object) -> Future:
        future = super().submit(*args, **kw)
        self.futures.append(future)
        return future


def test_a_check_stopped_early_stops_the_launches_under_way(monkeypatch):
    """An endless kernel's first launch (the smallest shape) times out; the largest one,
    started beside it with a limit many times longer, is stopped, not waited for."""
    monkeypatch.delenv("TILELAB_EMU_TIMEOUT", raising=False)
    monkeypatch.setattr(budget, "EMU_LAUNCH_BASE_S", 1.0)  # the smallest shape's limit
    endless = ROWS_BELOW_64.replace("if (row < 64 && ", "while (true) if (", 1)
    rt, fn = get_runtime("emu"), naive_function(endless)
    largest = max(NAIVE.shapes, key=NAIVE.problem.work)
    assert budget.emu_launch_seconds(NAIVE.problem, largest) > 10
    with Recording(2) as pool:
        checked = correctness.check_shapes(rt, fn, NAIVE.problem, NAIVE.launch, NAIVE.shapes,
                                           np.random.default_rng(), quick=True, pool=pool)
        shape, first = next(checked)
        checked.close()
    assert shape == NAIVE.shapes[0] and isinstance(first, emu.KernelTimeout)
    beside = pool.futures[1]  # the largest shape's launch, queued right after the first
    assert isinstance(beside.exception(), emu.LaunchStopped), beside.exception()
    assert "no longer needed" in str(beside.exception())
    rest = pool.futures[2:]  # never started, or (the first lane's next) stopped too
    assert all(f.cancelled() or isinstance(f.exception(), emu.LaunchStopped) for f in rest)
    assert sum(f.cancelled() for f in rest) >= len(rest) - 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (ptxas's report)")
def test_ptxas_report_is_collected_once_for_launches_on_several_threads():
    report = emu.SourceModule(KERNELS["tiled32"].source()).resources
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: report.wait(), range(8)))
    assert found[0] and all(f is found[0] for f in found)


def test_a_launchs_child_sees_no_other_launchs_buffers():
    """Launches run at once: a child forked while another launch's shared buffers exist
    must not reach them (a kernel could otherwise rewrite another launch's output)."""

    def writes_at(address: int):
        def child(fd: int, tag: bytes) -> None:
            ctypes.memmove(address, b"\x2a", 1)
            os.write(fd, native.tagged(tag, b'{"status": "ok"}'))
        return child

    page = mmap.PAGESIZE
    with native.shared_region(page) as (mine, at_mine), \
            native.shared_region(page) as (other, at_other):
        own = native.run_forked(writes_at(at_mine), timeout=10, region=at_mine)
        theirs = native.run_forked(writes_at(at_other), timeout=10, region=at_mine)
        assert own.status == 0 and own.report == b'{"status": "ok"}' and mine[0] == 42
        assert theirs.signal == signal.SIGSEGV and other[0] == 0
    assert not native._REGIONS  # each removed with its mapping


def test_a_kernel_whose_analysed_build_cannot_be_made_loses_its_correctness():
    """The analysed build is what rules races out: where it cannot be made (while the
    candidate built), the kernel is not graded correct, and the verdict says why."""
    ex = exercises.get("tiled")
    text = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
    run = Run(ex, get_runtime("emu"), text, pipeline.names(pipeline.EMU_STEPS), text=text)
    run.fn = build(run.rt, text).get_function(ex.kernel)  # its build: not launched here
    run.find(Kind.CHECKED, step="check_outputs")  # right at every shape
    run.analysing = Future()
    run.analysing.set_result((None, "its module did not load"))
    run.step = "analyse"
    assert run.so_far().correct
    emu_steps.analyse(run)
    v = run.so_far()
    assert not v.correct and "no race can be ruled out: its module did not load" in v.messages[-1]
    assert "could not be made" in v.analysis["error"]


FORKS_BESIDE_BLAS = """
import sys, threading, time
import numpy as np
from tilelab.emu import native

def ok(fd, tag):
    native.os.write(fd, native.tagged(tag, b'{"status": "ok"}'))

a, b = np.ones((300, 400)), np.ones((400, 200))
a @ b
forks, products, stop = [0], 0, time.monotonic() + float(sys.argv[1])
def launches():
    while time.monotonic() < stop:
        assert native.run_forked(ok, timeout=30).report == b'{"status": "ok"}'
        forks[0] += 1
lane = threading.Thread(target=launches)
lane.start()
while time.monotonic() < stop:  # the grader's own BLAS (a diagnosis, say) meanwhile
    a @ b
    products += 1
lane.join()
print(forks[0], products)
"""


@pytest.mark.slow
def test_launches_fork_safely_while_another_thread_is_in_numpys_blas():
    """A fork made while OpenBLAS's thread pool works never returned (the whole check hung,
    past every time limit): a process that forks launches keeps BLAS on one thread."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}  # a pool, even on one core
    proc = subprocess.run([sys.executable, "-c", FORKS_BESIDE_BLAS, "4"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    forks, products = map(int, proc.stdout.split())
    assert forks >= 3 and products >= 3, proc.stdout  # both ran, side by side


def test_a_child_that_closes_its_pipes_and_stays_is_killed_at_its_time():
    """The parent waits for the child's end within the time, not only for its pipes."""

    def lingers(fd: int, tag: bytes) -> None:
        for each in (1, 2, fd):
            os.close(each)
        time.sleep(60)

    t0 = time.monotonic()
    done = native.run_forked(lingers, timeout=1.0)
    assert done.timed_out and done.signal == signal.SIGKILL
    assert time.monotonic() - t0 < 10


BLAS_PROBE = """
import sys
import tilelab.emu.native
from threadpoolctl import threadpool_info
pool = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(sys.argv[1], pool)
"""


@pytest.mark.slow
def test_numpys_blas_runs_on_one_thread_in_every_process_that_forks_launches():
    """A grading sandbox starts with BLAS capped at one thread (and, its cores left to
    the launches, OMP_NUM_THREADS as the grader set it): there the emulator need not load
    threadpoolctl; anywhere else it caps BLAS itself when it loads."""
    from tilelab.isolation import bubblewrap

    env = bubblewrap.sandbox_env({})
    assert all(env[k] == "1" for k in native.BLAS_THREAD_CAPS)
    assert env.get("OMP_NUM_THREADS") == (os.environ.get("OMP_NUM_THREADS") or None)
    plain = {k: v for k, v in os.environ.items()
             if k not in (*native.BLAS_THREAD_CAPS, "OMP_NUM_THREADS", "TILELAB_SANDBOXED")}
    boxed = {**plain, **{k: env[k] for k in (*native.BLAS_THREAD_CAPS, "TILELAB_SANDBOXED")}}
    for name, given in (("plain", plain), ("sandboxed", boxed)):
        out = subprocess.run(
            [sys.executable, "-c", "import sys, tilelab.emu.native; "
             "print('threadpoolctl' in sys.modules)"], env=given, capture_output=True,
            text=True, check=True).stdout.split()
        assert out == [str(name == "plain")], (name, out)
        out = subprocess.run([sys.executable, "-c", BLAS_PROBE, name], env=given,
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == f"{name} [1]", out
