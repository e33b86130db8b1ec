"""A sandboxed class run grades a submission's kernels and runs its notebook at once
(:func:`tilelab.classroom.steps.grade_beside`): what the two threads share, and in which
order they end."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from traitlets.config import Config

from tilelab import settings
from tilelab.classroom import steps
from tilelab.grading import cache as verdict_cache


class FakeBox:
    """A sandbox of nbgrader's steps whose autograde runs ``body`` (and records what it
    was told)."""

    def __init__(self, body):
        self.body, self.told, self.problem = body, None, None

    def autograde(self, environment, no_gpu):
        self.told = (environment, no_gpu)
        return self.body()


def test_the_notebook_runs_while_the_clean_grade_does_and_is_told_where_verdicts_come(
        tmp_path, monkeypatch):
    """The notebook starts before the clean grade ends; the verdicts are marked complete
    even when the clean grade fails; the notebook's kernel is told where they come and how
    long to wait, with no GPU, never through this process's environment, which the clean
    grade reads meanwhile."""
    monkeypatch.delenv(settings.VERDICT_CACHE.name, raising=False)
    folder = tmp_path / "verdicts"
    folder.mkdir()
    notebook_running = threading.Event()
    seen: dict[str, object] = {}

    def clean(run, sub, cache):
        assert notebook_running.wait(60)
        seen["environ"] = os.environ.get(settings.VERDICT_CACHE.name)
        raise RuntimeError("the clean grade failed")

    def body():
        notebook_running.set()  # and returns at once: the step waits for the clean grade
        return {"success": True}

    monkeypatch.setattr(steps, "clean_grade", clean)
    api = SimpleNamespace(config=Config(),
                          coursedir=SimpleNamespace(db_url=f"sqlite:///{tmp_path / 'gb.db'}"))
    run = SimpleNamespace(api=api, cell_timeout=10, failures=[], sandboxed=True,
                          notebook_timeout=600, failed=lambda *a: run.failures.append(a))
    box = FakeBox(body)
    with pytest.raises(RuntimeError, match="the clean grade failed"):
        steps.grade_beside(run, steps.Submission("01-naive", "ann"), folder, box)
    assert seen == {"environ": None}
    assert (folder / verdict_cache.DONE).exists()
    assert box.told == ({settings.VERDICT_CACHE.name: str(folder),
                         settings.VERDICT_WAIT.name: "8.0"}, True)
    assert run.failures == []


@pytest.mark.parametrize("cell, wait", [(120, 118.0), (10, 8.0), (3, 1.5)])
def test_a_hidden_test_waits_less_than_its_cells_time_limit(cell, wait):
    assert steps.verdict_wait(cell) == wait


@pytest.mark.timeout(300)
def test_a_stop_during_the_clean_grade_ends_the_notebooks_sandbox_at_once_and_is_raised(
        tmp_path, monkeypatch):
    """A signal reaches the thread that grades (nbgrader, on the other, would take it for
    the notebook's failure and go on): every sandbox of nbgrader's steps this process runs
    is killed, and the stop is raised once both threads have ended, long before the
    notebook would have."""
    from tilelab.classroom import notebook_sandbox

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(200)"],
                            start_new_session=True)
    box = FakeBox(lambda: {"success": proc.wait() == 0})
    box._proc, box._cgroup = proc, None
    notebook_sandbox._OPEN.append(box)

    def clean(run, sub, cache):
        time.sleep(2)
        raise KeyboardInterrupt

    monkeypatch.setattr(steps, "clean_grade", clean)
    api = SimpleNamespace(config=Config(),
                          coursedir=SimpleNamespace(db_url=f"sqlite:///{tmp_path / 'gb.db'}"))
    run = SimpleNamespace(api=api, cell_timeout=250, failures=[], sandboxed=True,
                          notebook_timeout=600, failed=lambda *a: run.failures.append(a))
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            steps.grade_beside(run, steps.Submission("01-naive", "ann"), tmp_path, box)
    finally:
        notebook_sandbox._OPEN.remove(box)
    assert time.monotonic() - t0 < 100  # the notebook alone runs 200 s
    assert proc.poll() == -9
