"""One submission's whole tree of processes capped together, and nothing left after it.

Real sandboxes, real cgroups (skipped where the machine gives none: the grader then says
so before grading, tested last), the launcher run as the real file it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tilelab.device.backend import Backend
from tilelab.grading import budget
from tilelab.isolation import bubblewrap as bwrap
from tilelab.isolation import enter, limits

pytestmark = pytest.mark.skipif(bwrap.problem() is not None,
                                reason=f"no sandbox here: {bwrap.problem()}")
needs_cgroup = pytest.mark.skipif(limits.missing_caps() is not None,
                                  reason=f"no cgroup here: {limits.missing_caps()}")


@pytest.fixture
def made(monkeypatch):
    """Every cgroup the sandboxes of a test made (real ones, recorded)."""
    found: list[limits.Cgroup] = []
    real = limits.Cgroup.make.__func__

    def make(cls, lim):
        cg = real(cls, lim)
        if cg:
            found.append(cg)
        return cg

    monkeypatch.setattr(limits.Cgroup, "make", classmethod(make))
    return found


def run_py(code: str, work, **kw) -> bwrap.Result:
    return bwrap.run([sys.executable, "-c", textwrap.dedent(code)], work,
                     limits=limits.Limits(**{"wall_seconds": 120, **kw}))


def test_the_launcher_is_a_file_that_sets_limits_and_joins_nothing_else():
    pairs = [["RLIMIT_NOFILE", 64], ["RLIMIT_CORE", 0]]
    out = subprocess.run(
        [sys.executable, "-S", limits.SHIM, json.dumps(pairs), "[]", "--", sys.executable,
         "-c", "import resource, sys; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0],"
         " 'site' in sys.modules)"],
        capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["64", "True"]  # the command's own Python, not -S
    bad = subprocess.run([sys.executable, "-S", limits.SHIM, "[]", '["/nonexistent/cg"]',
                          "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 126 and "could not join its cgroup" in bad.stderr


def test_private_tmpfs_mounts_have_a_size(tmp_path):
    res = run_py("""
        import errno
        for where in ("/tmp/x", "/dev/shm/x"):
            try:
                with open(where, "wb") as f:
                    for _ in range(32):
                        f.write(b"x" * (1 << 20))
                print(where, "WROTE")
            except OSError as e:
                print(where, errno.errorcode[e.errno])
    """, tmp_path, tmp_bytes=8 << 20)
    assert res.stdout.decode().split() == ["/tmp/x", "ENOSPC", "/dev/shm/x", "ENOSPC"]


@pytest.mark.slow
@needs_cgroup
def test_a_process_tree_over_the_memory_cap_is_stopped_and_its_cgroup_removed(
        tmp_path, made):
    # four processes of 96 MiB each and 96 MiB in /dev/shm, under one 256 MiB cap: no
    # per-process limit would stop any one of them
    res = run_py("""
        import os, time
        with open("/dev/shm/fill", "wb") as f:
            f.write(b"s" * (96 << 20))
        kids = []
        for i in range(4):
            pid = os.fork()
            if pid == 0:
                block = bytearray(96 << 20)
                for j in range(0, len(block), 4096):
                    block[j] = 1
                print("held", i, flush=True)
                time.sleep(5)
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
    """, tmp_path, memory=256 << 20, address_space=None, tmp_bytes=256 << 20)
    held = res.stdout.decode().count("held")
    assert held < 4, res.stdout
    assert len(made) == 1 and made[0].caps_memory
    assert not any(os.path.exists(f) for f in made[0].folders)


@pytest.mark.slow
@needs_cgroup
def test_the_whole_trees_cpu_time_is_capped(tmp_path, made):
    res = run_py("""
        import os
        for _ in range(3):
            if os.fork() == 0:
                break
        while True:
            pass
    """, tmp_path, cpu_seconds=2, wall_seconds=300)
    assert res.timed_out
    assert not any(os.path.exists(f) for f in made[0].folders)


@needs_cgroup
def test_a_fork_bomb_meets_the_trees_process_cap(tmp_path, made):
    res = run_py("""
        import os, time
        n = 0
        for _ in range(200):
            try:
                if os.fork() == 0:
                    time.sleep(30); os._exit(0)
                n += 1
            except OSError:
                break
        print(n)
    """, tmp_path, processes=24)
    assert int(res.stdout) < 24
    assert not any(os.path.exists(f) for f in made[0].folders)


def test_kill_tree_ends_a_session_with_its_children():
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
         "print('started', flush=True)\ntime.sleep(60)"],
        start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "started\n"
    kids = psutil.Process(proc.pid).children()
    enter.kill_tree(proc.pid)
    assert proc.wait(timeout=10) == -9
    _, alive = psutil.wait_procs(kids, timeout=10)
    assert kids and alive == []


def test_without_cgroups_the_grader_says_which_caps_are_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "CGROUP_ROOT", str(tmp_path))
    limits._parents.cache_clear()
    try:
        why = limits.missing_caps()
        assert why and "memory" in why and "pids" in why and "Delegate=yes" in why
        assert limits.Cgroup.make(limits.Limits()) is None
        with pytest.warns(RuntimeWarning, match="cannot be capped together"):
            limits.warn_missing_caps()
    finally:
        monkeypatch.undo()
        limits._parents.cache_clear()


@pytest.mark.gpu
def test_a_gpu_kernel_is_graded_inside_its_cgroup(made, capsys):
    # the NVIDIA nodes bound in, the tree's memory capped by memory.max (never by the
    # address space: CUDA maps far more than it uses), the speed run measured
    from tilelab.catalog.reference import KERNELS
    from tilelab.grading.sandbox import grade_source, sandbox_limits

    v = grade_source("naive", KERNELS["naive"].source(), backend_name="gpu", sandboxed=True)
    with capsys.disabled():
        print(f"\ngpu in a sandbox: correct={v.correct} speed_measured={v.speed_measured} "
              f"cgroup={'memory+pids' if made and made[0].caps_memory else 'none'} "
              f"({limits.missing_caps() or 'every cap holds'})")
    assert v.correct and v.speed_measured, v.messages
    assert "RLIMIT_AS" not in dict(limits.rlimits(sandbox_limits(Backend.GPU, 60)))
    if limits.missing_caps() is None:
        assert made and made[0].caps_memory
        assert not any(os.path.exists(f) for f in made[0].folders)


@needs_cgroup
def test_the_supervising_launcher_ends_the_whole_cgroup_when_its_budget_is_spent(tmp_path):
    # as for a Jupyter kernel: the launcher supervises; a grandchild left the session
    import psutil

    cg = limits.Cgroup.make(limits.Limits())
    try:
        out = subprocess.run(
            [*limits.shim(limits.Limits(), cg, wall=2), sys.executable, "-c",
             "import os, time\n"
             "if os.fork() == 0:\n    os.setsid(); time.sleep(600)\n"
             "time.sleep(600)"], capture_output=True, text=True, timeout=120)
        assert "the 2 s budget is spent; stopped" in out.stderr
        assert out.returncode == (-9) & 0xFF  # the command's exit: killed
        left = [p for p in enter.members(cg.folders) if psutil.pid_exists(p)]
        assert left == []
    finally:
        cg.close()
    assert not any(os.path.exists(f) for f in cg.folders)


def test_a_checks_launches_share_one_time_budget_below_the_sum_of_their_limits():
    """Each emulated launch has its own limit, a base plus its work; the check's launches
    together have one base plus all their work: a kernel that waits out most of each
    launch's limit cannot stretch a check to their sum."""
    from tilelab.catalog import exercises

    for ex in exercises.EXERCISES.values():
        own = [budget.emu_launch_seconds(ex.problem, s) for s in ex.shapes]
        together = budget.emu_check_seconds(ex.problem, ex.shapes)
        assert max(own) <= together < sum(own) or len(own) == 1, (ex.id, own, together)


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_kernel_slow_at_every_shape_is_stopped_when_the_checks_budget_is_spent(lanes):
    """A launch that outlasts what is left of the check's budget is stopped there, and no
    later launch starts; each says it was the budget, not its own limit (which is 5 s or
    more at every shape)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from tilelab.catalog import exercises
    from tilelab.device.runtime import get_runtime
    from tilelab.emu.errors import KernelTimeout
    from tilelab.grading.correctness import check_shapes

    ex = exercises.get("tiled")
    src = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
    body = src.index("{", src.index(ex.kernel + "(")) + 1
    src = src[:body] + "\n    volatile int spin = 1; while (spin) { }" + src[body:]
    rt = get_runtime("emu")
    fn = rt.SourceModule(src).get_function(ex.kernel)
    pool = ThreadPoolExecutor(lanes) if lanes > 1 else None
    try:
        results = list(check_shapes(rt, fn, ex.problem, ex.launch, ex.shapes[:4],
                                    np.random.default_rng(3), quick=True, pool=pool,
                                    budget_s=1.0))
    finally:
        if pool is not None:
            pool.shutdown()
    assert len(results) == 4
    for _, res in results:
        assert isinstance(res, KernelTimeout) and type(res).__name__ == "CheckOverBudget", res
        assert "launches together did not finish within 1 s" in str(res), res
