"""``tilelab.notebook``: the visible check never raises, the speed test says why it fails."""

from __future__ import annotations

import re

import pytest

from tilelab import notebook, settings
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, tiled_without_barrier
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict


def verdict(exercise_id: str = "naive", **kw) -> Verdict:
    ex = exercises.get(exercise_id)
    base = dict(
        exercise=ex.id,
        backend="emu",
        compiled=True,
        correct=True,
        gate=ex.gate,
        baseline=ex.baseline.label,
        max_points_correct=ex.points_correct,
        max_points_speed=ex.points_speed,
        points_correct=ex.points_correct,
    )
    return Verdict(**(base | kw))


def test_setup_names_the_emulator(monkeypatch, capsys):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    notebook.setup()
    out = capsys.readouterr().out
    assert "CPU emulator" in out and "speed is not measured" in out
    assert exercises.GRADING_GPU in out  # where the gates were calibrated


@pytest.mark.parametrize(("gpu", "advisory"), [("Tesla T4", True),
                                                (exercises.GRADING_GPU, False)])
def test_speed_verdict_is_advisory_off_the_grading_gpu(gpu, advisory):
    said = notebook.speed_advice(gpu)
    assert exercises.GRADING_GPU in said
    assert ("advisory" in said) is advisory
    assert (gpu in said) if advisory else "the graded one" in said


def test_a_checked_kernel_on_another_gpu_is_told_its_verdict_is_advisory(monkeypatch, capsys):
    v = verdict(backend="gpu", gpu="Tesla T4", speed_measured=True, speedup=3.0,
                speed_passed=True, candidate_ms=1.0, baseline_ms=3.0)
    monkeypatch.setattr(notebook, "grade_source", lambda *a, **k: v)
    monkeypatch.setattr(notebook, "backend_line", lambda: "Backend: GPU Tesla T4 (PyCUDA)")
    notebook.check("naive", "")
    assert "(advisory: This GPU (Tesla T4) is not the grading GPU" in capsys.readouterr().out


@pytest.mark.slow
def test_check_prints_a_verdict_and_the_bank_analysis(monkeypatch, capsys):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    notebook.check("transpose_shared", KERNELS["transpose_shared"].source())
    out = capsys.readouterr().out
    assert "on CPU emulator" in out and "correctness: PASS" in out
    assert "Backend:" not in out  # the report's first line names the backend, once
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == len(set(lines)), out  # each line printed once
    assert "speed: not measured" in out
    assert "Bank conflicts" in out and "32.00" in out  # the column read of a [32][32] tile
    # one name and one number for the degree a bank gate judges, with its line
    assert "Kernel-wide average" not in out
    assert re.search(r"Worst-line bank-conflict degree 32\.00 \(line \d+: tile, read\)", out)


@pytest.mark.slow
@pytest.mark.parametrize(
    "exercise_id, source, says",
    [
        (
            "naive",
            exercises.get("naive").signature + " { M = ; }",
            "does not compile",
        ),
        ("naive", "", "empty"),
        ("tiled", tiled_without_barrier(1), "RACES"),
    ],
)
def test_check_explains_a_wrong_kernel_without_raising(
    monkeypatch, capsys, exercise_id, source, says
):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    notebook.check(exercise_id, source)
    out = capsys.readouterr().out
    assert "correctness: FAIL" in out and says in out
    if says == "RACES":  # one barrier named, the same in the diagnosis and the table
        assert "put __syncthreads()" in out and "__syncwarp" not in out


def test_check_is_skipped_while_a_class_is_graded(monkeypatch, capsys):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    monkeypatch.setenv(notebook.CLASS_GRADING_ENV, "1")
    notebook.check("naive", "not even C")
    assert "skipped during class grading" in capsys.readouterr().out


def test_speed_not_measured_earns_nothing_but_is_no_failure_of_the_learner(monkeypatch,
                                                                           capsys):
    """A correct kernel nobody timed (no GPU): the hidden speed test says so and passes,
    the points are 0 (unless the instructor awards them); a wrong kernel's speed test
    fails."""
    v = verdict()
    monkeypatch.delenv(notebook.AWARD_ENV, raising=False)
    notebook.assert_speed(v)
    assert ("speed (naive): not measured (no GPU): 0 points, not a failure of yours"
            in capsys.readouterr().out)
    assert scoring.points(v, award=False).speed == 0
    wrong = verdict(correct=False)
    with pytest.raises(AssertionError, match="not correct"):
        notebook.assert_speed(wrong)
    monkeypatch.setenv(notebook.AWARD_ENV, "1")
    notebook.assert_speed(v)
    assert scoring.points(v, award=True).speed == v.max_points_speed


def test_the_emulators_bank_degree_decides_no_speed_points(monkeypatch):
    """Padded (degree 1) or not (16.5), the emulator's analysis is feedback: no speed
    points without a GPU, and both by the instructor's policy when it awards them."""
    padded = verdict("transpose_padded", bank_degree=1.0, max_bank_degree=1.1)
    unpadded = verdict("transpose_padded", bank_degree=16.5, max_bank_degree=1.1)
    monkeypatch.delenv(notebook.AWARD_ENV, raising=False)
    for v in (padded, unpadded):
        assert scoring.speed_status(v, award=False) == (False, "not measured: needs a GPU")
        assert scoring.points(v, award=False).speed == 0
    monkeypatch.setenv(notebook.AWARD_ENV, "1")
    for v in (padded, unpadded):
        notebook.assert_speed(v)
        assert scoring.points(v, award=True).speed == v.max_points_speed


def test_a_slow_kernel_is_told_its_numbers(capsys):
    v = verdict(
        backend="gpu",
        gpu="NVIDIA H100",
        speed_measured=True,
        speed_passed=False,
        speedup=1.02,
        candidate_ms=18.0,
        baseline_ms=18.4,
    )
    gate = f"{exercises.get(v.exercise).gate:g}".replace(".", r"\.")
    with pytest.raises(AssertionError, match=rf"1\.02x over .* on NVIDIA H100 \(gate {gate}x"):
        notebook.assert_speed(v)
    assert "FAIL" in capsys.readouterr().out


def test_an_incorrect_kernel_earns_no_speed_points(monkeypatch):
    monkeypatch.setenv(notebook.AWARD_ENV, "1")
    v = verdict(correct=False, points_correct=0)
    with pytest.raises(AssertionError, match="not correct"):
        notebook.assert_speed(v)
    assert scoring.points(v, award=True).speed == 0


def started_processes(monkeypatch) -> list[str]:
    """What this process starts from now on, counted (and let through): forks, spawns and
    subprocesses, whoever asks and whatever catches their errors."""
    import _posixsubprocess
    import os
    import subprocess

    started: list[str] = []

    def counting(owner: object, name: str) -> None:
        real = getattr(owner, name)

        def spy(*a, **k):
            started.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return real(*a, **k)
        monkeypatch.setattr(owner, name, spy)

    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        counting(os, name)
    counting(_posixsubprocess, "fork_exec")  # what subprocess.Popen starts a child with
    counting(subprocess.Popen, "__init__")
    return started


@pytest.mark.slow
def test_the_analysis_and_the_picture_come_in_the_verdict_and_nothing_starts_here(
        monkeypatch, capsys, tmp_path):
    """The emulator's table and both traces of the picture are measured in the grader's
    child; the notebook's own process (a threaded Jupyter kernel) starts no process while
    it reports, decides on the picture and draws it."""
    from matplotlib import font_manager

    from tilelab.grading.sandbox import grade_source

    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    monkeypatch.chdir(tmp_path)  # where the picture is written, outside a notebook
    wrong = tiled_without_barrier(1)
    v = grade_source("tiled", wrong, backend_name="emu", trace_reference=True)  # the child
    asked: list[dict] = []
    monkeypatch.setattr(notebook, "grade_source", lambda *a, **k: asked.append(k) or v)
    assert font_manager.fontManager  # matplotlib's own font cache, made before the count
    started = started_processes(monkeypatch)
    notebook.check("tiled", wrong, show=True)  # the picture drawn too
    assert started == []
    out = capsys.readouterr().out
    assert "correctness: FAIL" in out and "RACES" in out and "At M=64, N=64, K=64" in out
    assert "What one block of your kernel read and wrote" in out and "(no picture" not in out
    assert asked and asked[0]["trace_reference"]


def test_setup_in_a_class_run_speaks_of_the_class_grader_not_of_this_notebooks_backend(
        monkeypatch, capsys):
    # a class run that shares its GPU runs the notebook on the emulator: its feedback must
    # not tell the learner that speed was not measured
    monkeypatch.setenv(settings.CLASS_GRADING.name, "1")
    monkeypatch.setenv(settings.BACKEND.name, "emu")
    notebook.setup()
    out = capsys.readouterr().out
    assert "Class grading" in out and "hidden tests" in out
    assert "emulator" not in out and "not measured" not in out
