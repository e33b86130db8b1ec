"""The grading sandbox's process handling: a session of its own, caps set by the worker
itself, and a timed-out worker killed with everything it started."""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import psutil

from tilelab.device import runtime
from tilelab.grading import sandbox
from tilelab.isolation import limits


def test_the_worker_runs_in_a_session_of_its_own(tmp_path):
    code = "import os; open('sid', 'w').write(str(os.getsid(0) == os.getpid()))"
    assert sandbox._run([sys.executable, "-c", code], str(tmp_path), timeout=60) == 0
    assert (tmp_path / "sid").read_text() == "True"


def test_a_timed_out_worker_is_killed_with_what_it_started(tmp_path):
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "open('child', 'w').write(str(p.pid))\n"
        "time.sleep(120)\n"
    )
    start = time.monotonic()
    assert sandbox._run([sys.executable, "-c", code], str(tmp_path), timeout=3) is None
    assert time.monotonic() - start < 60
    pid = int((tmp_path / "child").read_text())
    for _ in range(50):  # the grandchild is killed (a zombie until its new parent reaps it)
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {pid} started by the worker is still alive")


def test_the_worker_caps_its_own_resources():
    code = (
        "import resource\n"
        "from tilelab.device.backend import Backend\n"
        "from tilelab.grading.worker import limit_resources\n"
        "limit_resources(Backend.EMU)\n"
        "print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], "
        "resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_CORE)[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(x) for x in out] == [limits.FILE_LIMIT, limits.MEMORY_LIMIT, 0]
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != limits.MEMORY_LIMIT  # not ours


def test_a_grading_sandbox_starts_with_the_class_runs_pycuda_builds(tmp_path, monkeypatch):
    base, mine = tmp_path / "base", tmp_path / "mine"
    (base / runtime.PYCUDA_CACHE).mkdir(parents=True)
    (base / runtime.PYCUDA_CACHE / "aa.cubin").write_bytes(b"baseline build")
    (base / runtime.PYCUDA_CACHE / "bb.cubin").write_bytes(b"course build")
    mine.mkdir()
    (mine / "bb.cubin").write_bytes(b"already here")
    monkeypatch.setenv("TILELAB_CACHE_BASE", str(base))
    monkeypatch.setenv("PYCUDA_CACHE_DIR", str(mine))
    runtime.seed_pycuda_cache()
    assert (mine / "aa.cubin").read_bytes() == b"baseline build"
    assert (mine / "bb.cubin").read_bytes() == b"already here"  # never overwritten
    assert (base / runtime.PYCUDA_CACHE / "aa.cubin").read_bytes() == b"baseline build"
    # the grading worker and its GPU tools seed one sandbox's cache at once: a build
    # another one linked meanwhile is no error (it was one: "SameFileError", an internal
    # grader error, for an honest learner in a class run with eight tasks per GPU)
    runtime.seed_pycuda_cache()
    assert (mine / "aa.cubin").read_bytes() == b"baseline build"


def test_a_build_that_cannot_be_linked_is_copied_whole(tmp_path, monkeypatch):
    built, into = tmp_path / "aa.cubin", tmp_path / "cache" / "aa.cubin"
    built.write_bytes(b"course build")
    into.parent.mkdir()

    def no_links(src, dst):
        raise PermissionError("no symbolic links here")

    monkeypatch.setattr(runtime.os, "symlink", no_links)
    runtime._seed(built, into)
    assert into.read_bytes() == b"course build" and not into.is_symlink()
    runtime._seed(built, into)  # there already (copied by another process): left as it is
    assert into.read_bytes() == b"course build"
    assert sorted(p.name for p in into.parent.iterdir()) == ["aa.cubin"]  # no part left


def test_the_pycuda_cache_folder_named_is_made_with_no_base_cache(tmp_path, monkeypatch):
    # the class run's base cache is built into a PYCUDA_CACHE_DIR that does not exist yet,
    # and PyCUDA makes only its default folder
    monkeypatch.delenv("TILELAB_CACHE_BASE", raising=False)
    monkeypatch.setenv("PYCUDA_CACHE_DIR", str(tmp_path / "new" / "pycuda"))
    runtime.seed_pycuda_cache()
    assert (tmp_path / "new" / "pycuda").is_dir()
