"""The class run's verdict cache, read by a notebook's hidden tests while the clean grader
may still be grading beside it (:mod:`tilelab.grading.cache`)."""

from __future__ import annotations

import threading
import time

import pytest

from tilelab import settings
from tilelab.device.backend import Backend
from tilelab.grading import cache
from tilelab.grading.verdict import Verdict

SOURCE = "__global__ void k() {}"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.VERDICT_CACHE.name, str(tmp_path))
    return tmp_path


def _later(seconds: float, then) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(seconds), then()))
    t.start()
    return t


def test_a_hidden_test_waits_for_the_verdict_the_clean_grade_is_still_measuring(
        folder, monkeypatch):
    monkeypatch.setenv(settings.VERDICT_WAIT.name, "30")
    stored = Verdict("naive", "emu", correct=True, messages=["measured"])
    t = _later(0.4, lambda: cache.cache_verdict(folder, SOURCE, stored))
    t0 = time.monotonic()
    got = cache.cached_verdict("naive", SOURCE, Backend.EMU)
    t.join()
    assert time.monotonic() - t0 >= 0.35  # it waited for the file, not for the deadline
    assert got is not None and got.correct and got.messages == ["measured", cache.NOTE]
    assert [p.name for p in folder.iterdir()] == [cache._path(folder, "naive", SOURCE).name]


@pytest.mark.parametrize("wait", ["30", "0"])
def test_a_source_the_clean_grade_never_grades_waits_only_until_it_is_done(
        folder, monkeypatch, wait):
    """The notebook changed its kernel as it ran: no verdict will come, the done mark ends
    the wait, and the hidden test does not grade it a second time (in the notebook, where
    that could outlast the cell's time limit): it says where the points come from."""
    monkeypatch.setenv(settings.VERDICT_WAIT.name, wait)
    cache.cache_verdict(folder, SOURCE, Verdict("naive", "emu", correct=True))
    t = _later(0.3 if wait != "0" else 0.0, lambda: cache.mark_done(folder))
    if wait == "0":  # marked done before the read: nothing to wait for
        t.join()
    t0 = time.monotonic()
    got = cache.cached_verdict("naive", SOURCE + "// changed", Backend.EMU)
    t.join()
    assert time.monotonic() - t0 < 10
    assert got is not None and not got.correct and got.points_correct == 0
    assert "is not the text of the notebook's submitted kernel cell" in got.messages[0]
    assert "tilelab_verdict.txt" in got.messages[0]
    assert cache.cached_verdict("naive", SOURCE, Backend.EMU).correct  # the submitted one's


def test_a_verdict_not_ready_within_the_wait_says_so_and_earns_nothing_here(
        folder, monkeypatch):
    monkeypatch.setenv(settings.VERDICT_WAIT.name, "0.3")
    monkeypatch.setenv(settings.BACKEND.name, "auto")  # the backend is the caller's, decided
    got = cache.cached_verdict("naive", SOURCE, Backend.EMU)
    assert got is not None and not got.correct and got.points_correct == 0
    assert got.backend == "emu"
    assert "still grading this kernel 0.3 s after" in got.messages[0]
    assert "tilelab_verdict.txt" in got.messages[0]


def test_without_a_wait_a_missing_verdict_is_none_at_once(folder, monkeypatch):
    monkeypatch.delenv(settings.VERDICT_WAIT.name, raising=False)
    t0 = time.monotonic()
    assert cache.cached_verdict("naive", SOURCE, Backend.EMU) is None
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("text", ["-1", "soon"])
def test_a_wait_that_is_not_a_number_of_seconds_is_refused_with_its_name(monkeypatch, text):
    monkeypatch.setenv(settings.VERDICT_WAIT.name, text)
    with pytest.raises(Exception, match="TILELAB_VERDICT_WAIT"):
        settings.VERDICT_WAIT.get()
