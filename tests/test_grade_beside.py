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


def test_the_notebook_runs_while_the_clean_grade_does_and_its_guard_ends_after_it(
        tmp_path, monkeypatch):
    """The notebook starts before the clean grade ends; the guard that kills what a
    notebook leaves running ends only after the clean grade (whose processes it would
    otherwise kill); the verdicts are marked complete even when the clean grade fails; the
    notebook is told where they come through its kernel manager, never through this
    process's environment, which the clean grade reads meanwhile."""
    monkeypatch.delenv(settings.VERDICT_CACHE.name, raising=False)
    folder = tmp_path / "verdicts"
    folder.mkdir()
    notebook_running = threading.Event()
    seen: dict[str, object] = {}

    def clean(run, sub, cache):
        assert notebook_running.wait(60)
        seen["environ"] = os.environ.get(settings.VERDICT_CACHE.name)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
        seen["child"] = child.wait()  # -9 had the notebook's guard killed it
        raise RuntimeError("the clean grade failed")

    def autograde(assignment, student, **kw):
        notebook_running.set()  # and returns at once: its guard is left meanwhile
        return {"success": True}

    monkeypatch.setattr(steps, "clean_grade", clean)
    api = SimpleNamespace(config=Config(), autograde=autograde,
                          coursedir=SimpleNamespace(db_url=f"sqlite:///{tmp_path / 'gb.db'}"))
    run = SimpleNamespace(api=api, cell_timeout=10, failures=[],
                          failed=lambda *a: run.failures.append(a))
    with pytest.raises(RuntimeError, match="the clean grade failed"):
        steps.grade_beside(run, steps.Submission("01-naive", "ann"), folder)
    assert seen == {"environ": None, "child": 0}
    assert (folder / verdict_cache.DONE).exists()
    kernels = api.config.SandboxedKernelManager
    assert kernels.no_gpu is True
    assert kernels.environment == {settings.VERDICT_CACHE.name: str(folder),
                                   settings.VERDICT_WAIT.name: "8.0"}
    assert run.failures == []  # nothing left behind by the notebook


@pytest.mark.parametrize("cell, wait", [(120, 118.0), (10, 8.0), (3, 1.5)])
def test_a_hidden_test_waits_less_than_its_cells_time_limit(cell, wait):
    assert steps.verdict_wait(cell) == wait


@pytest.mark.timeout(300)
def test_a_stop_during_the_clean_grade_ends_the_notebook_at_once_and_is_raised(
        tmp_path, monkeypatch):
    """A signal reaches the thread that grades (nbgrader, on the other, would take it for
    the notebook's failure and go on): the notebook's sandboxed kernel is killed, and the
    stop is raised once both threads have ended, long before the cell would have; the dead
    kernel's sandbox is cleaned up as a live one's is."""
    import nbformat
    from nbclient import NotebookClient

    from tilelab.classroom import jupyter_sandbox

    own = tmp_path / "submitted" / "ann"
    own.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time"),
                                         nbformat.v4.new_code_cell("time.sleep(200)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    ended: dict[str, object] = {}

    def autograde(assignment, student, **kw):
        try:
            NotebookClient(nb, kernel_manager_class=jupyter_sandbox.SandboxedKernelManager,
                           timeout=250, resources={"metadata": {"path": str(own)}}).execute()
        except Exception as exc:  # as nbgrader reports it
            ended["notebook"] = type(exc).__name__
            return {"success": False, "error": repr(exc)}
        return {"success": True}

    def clean(run, sub, cache):
        deadline = time.monotonic() + 120
        while not list(jupyter_sandbox._RUNNING) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3)  # its cells run
        ended["sockets"] = [km._ipc_dir for km in jupyter_sandbox._RUNNING]
        raise KeyboardInterrupt

    monkeypatch.setattr(steps, "clean_grade", clean)
    api = SimpleNamespace(config=Config(), autograde=autograde,
                          coursedir=SimpleNamespace(db_url=f"sqlite:///{tmp_path / 'gb.db'}"))
    run = SimpleNamespace(api=api, cell_timeout=250, failures=[],
                          failed=lambda *a: run.failures.append(a))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        steps.grade_beside(run, steps.Submission("01-naive", "ann"), tmp_path)
    assert time.monotonic() - t0 < 100  # the cell alone sleeps 200 s
    assert ended["notebook"] == "DeadKernelError"
    assert not list(jupyter_sandbox._RUNNING)
    assert len(ended["sockets"]) == 1 and not os.path.exists(ended["sockets"][0])  # cleaned up
