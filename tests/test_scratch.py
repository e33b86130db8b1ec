"""Temporary folders: a check and a class run leave none behind in their temp folder, and
the folder of a check killed mid-grading is removed by the next process that makes one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilelab.catalog import exercises
from tilelab.isolation import bubblewrap, scratch

REPO = Path(__file__).resolve().parents[1]
ENDLESS = ("__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, "
           "int N, int K) { while (1) {} }\n")
needs_sandbox = pytest.mark.skipif(bubblewrap.problem() is not None,
                                   reason="bubblewrap cannot make a sandbox here")


def _env(tmpdir: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmpdir), "TILELAB_BACKEND": "emu",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _check(tmpdir: Path, source: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tilelab.cli", "check", "tiled", str(source)],
                            env=_env(tmpdir), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _grading_folder(tmpdir: Path, seconds: float = 60) -> Path:
    """The folder a running check grades in, once its sandbox has it."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = list(tmpdir.glob("tilelab-*/grade-*/kernel.cu"))
        if found:
            return found[0].parent.parent
        time.sleep(0.05)
    raise AssertionError(f"no grading folder appeared in {tmpdir}")


def _endless_check(tmp_path: Path) -> tuple[Path, Path, subprocess.Popen]:
    """A check of an endless kernel under its own TMPDIR: the folder, the source, the process."""
    tmpdir, src = tmp_path / "tmp", tmp_path / "kernel.cu"
    tmpdir.mkdir()
    src.write_text(ENDLESS)
    return tmpdir, src, _check(tmpdir, src)


@needs_sandbox
@pytest.mark.slow
def test_a_check_leaves_no_folder_and_a_killed_ones_is_removed_by_the_next(tmp_path):
    tmpdir, src, killed = _endless_check(tmp_path)
    left = _grading_folder(tmpdir)
    killed.kill()  # SIGKILL: no finally block, no atexit
    killed.wait()
    assert left.is_dir()  # what a killed process leaves ...
    src.write_text(exercises.get("tiled").reference.source().replace(
        exercises.get("tiled").reference.name + "(", "matmul_tiled("))
    done = _check(tmpdir, src)
    assert done.wait(timeout=120) == 0
    assert list(tmpdir.iterdir()) == []  # ... the next check removed, and its own too


@needs_sandbox
@pytest.mark.slow
def test_a_check_told_to_stop_kills_its_sandbox_and_removes_its_folder(tmp_path):
    tmpdir, _, proc = _endless_check(tmp_path)
    _grading_folder(tmpdir)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert list(tmpdir.iterdir()) == []


def test_a_live_processs_folder_is_never_swept(tmp_path):
    live = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from tilelab.isolation import scratch; "
         "print(scratch.make('x'), flush=True); time.sleep(60)"],
        env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
    try:
        made = Path(live.stdout.readline().strip())
        assert made.is_dir()
        assert scratch.sweep(tmp_path) == 0 and made.is_dir()
    finally:
        live.kill()
        live.wait()
    assert scratch.sweep(tmp_path) == 1 and list(tmp_path.iterdir()) == []


CLASS_RUN = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from support.classroom import slow_notebook, small_class, write_submissions
from tilelab import classroom
root = Path(sys.argv[1])
small_class(root, ["alice"])
write_submissions(root, {("slow", "01-naive"): slow_notebook()})
summary = classroom.grade_class(root, backend="emu", progress=False, cell_timeout=4)
print(json.dumps(summary["failures"]))
"""


@needs_sandbox
@pytest.mark.slow
def test_a_class_run_leaves_no_folder_and_stops_a_notebook_at_its_budget(tmp_path):
    """A small class run leaves nothing in $TMPDIR, even of a notebook whose kernel was
    killed: cells that each stay under the cell limit cannot add up without bound. That
    notebook is stopped at ``TILELAB_NOTEBOOK_TIMEOUT``, the summary and the learner's
    verdict say so, and its kernel keeps the clean grade's points; the honest student
    beside it is graded as ever."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    root = tmp_path / "course"
    run = subprocess.run([sys.executable, "-c", CLASS_RUN, str(root),
                          str(Path(__file__).parent)],
                         env={**_env(tmpdir), "TILELAB_NOTEBOOK_TIMEOUT": "6"},
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list(tmpdir.iterdir()) == []
    failures = json.loads(run.stdout.strip().splitlines()[-1])
    assert {f["student"] for f in failures} == {"slow"}, failures
    stopped = [f for f in failures if f["step"] == "timeout"]
    assert len(stopped) == 1, failures
    assert "longer than the 6 s a class run allows one notebook" in stopped[0]["error"]
    # named for what it was, not as nbgrader's failure (no notebook ran to its end, so
    # nbgrader has no feedback page to make: the verdict files are the feedback)
    assert "autograde" not in {f["step"] for f in failures}
    feedback = root / "autograder" / "feedback"
    for student in ("alice", "slow"):
        doc = json.loads((feedback / student / "01-naive" / "tilelab_verdict.json").read_text())
        naive = next(v for v in doc["verdicts"] if v["exercise"] == "naive")
        assert naive["points_correct"] == exercises.get("naive").points_correct, student
        stopped_note = any("all its cells together" in m for m in naive["messages"])
        assert stopped_note == (student == "slow")


@pytest.mark.slow
def test_the_kernels_socket_folder_stays_short_under_a_deep_tmpdir(tmp_path):
    """A Unix socket's path holds at most 107 bytes: under a deep ``$TMPDIR`` (pytest-xdist's
    own made one) every notebook of a class run failed to start its kernel."""
    deep = tmp_path / ("d" * 50) / ("e" * 50)
    deep.mkdir(parents=True)
    out = subprocess.run([sys.executable, "-c", "from tilelab.classroom.jupyter_sandbox import "
                          "ipc_folder; print(ipc_folder())"], env=_env(deep), text=True,
                         capture_output=True, check=True, timeout=120).stdout.strip()
    try:
        assert Path(out).is_dir() and len(f"{out}/k-99") <= 100
    finally:
        shutil.rmtree(out)
