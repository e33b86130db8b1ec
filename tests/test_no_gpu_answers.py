"""Without a GPU, every answer is a sentence: GPU-only commands say what they need and what
to do instead (no traceback), and an endless kernel is stopped in seconds at a small shape."""

from __future__ import annotations

import pytest

from tilelab import cli
from tilelab.catalog import exercises
from tilelab.device import backend
from tilelab.grading import budget
from tilelab.grading.pipeline import evaluate

pytestmark = pytest.mark.skipif(backend.gpu_probe()[0], reason="a GPU is usable here")


@pytest.mark.parametrize("argv, says", [
    (["calibrate", "--write", "{tmp}/g.json", "--out", "{tmp}"], "default gates"),
    (["bench", "matmul", "--out", "{tmp}"], "emu_analysis"),
    (["check", "naive", "{tmp}/k.cu", "--backend", "gpu"], "--backend emu"),
])
def test_a_gpu_only_command_says_what_it_needs_in_one_line(tmp_path, capsys, argv, says):
    (tmp_path / "k.cu").write_text(exercises.get("naive").signature + " {}\n")
    code = cli.main([a.format(tmp=tmp_path) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "needs a CUDA GPU and PyCUDA" in err and says in err
    assert "Traceback" not in err and "internal grader error" not in err
    assert not (tmp_path / "g.json").exists()


def test_install_advice_fits_a_checkout():
    """This test runs from a checkout: its requirements-gpu.txt is the advice."""
    assert backend.install_gpu_hint() == "pip install -r requirements-gpu.txt"
    assert backend.install_gpu_hint() in backend.gpu_probe()[1]


def test_the_emulators_time_limit_grows_with_the_work(monkeypatch):
    monkeypatch.delenv("TILELAB_EMU_TIMEOUT", raising=False)
    p = exercises.get("naive").problem
    small, large = (budget.emu_launch_seconds(p, s) for s in ((1, 1, 1), (333, 290, 517)))
    assert small is not None and large is not None
    assert small <= 6 and large > 4 * small
    monkeypatch.setenv("TILELAB_EMU_TIMEOUT", "100")  # the instructor's setting wins
    assert budget.emu_launch_seconds(p, (1, 1, 1)) is None
    assert budget.emu_check_seconds(p, [(1, 1, 1), (333, 290, 517)]) is None  # and the budget


ENDLESS = """
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k += 0)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
"""


@pytest.mark.slow
def test_an_endless_loop_is_stopped_at_the_small_shapes_limit(monkeypatch):
    monkeypatch.delenv("TILELAB_EMU_TIMEOUT", raising=False)
    v = evaluate("naive", ENDLESS, "emu", speed=False)
    text = "\n".join(v.messages)
    limit = budget.emu_launch_seconds(exercises.get("naive").problem, (1, 1, 1))
    assert not v.correct and "KernelTimeout" in text
    assert f"did not finish within {limit:g} s" in text
    assert "Likely cause: timed out" in text and "line 8" in text  # the k += 0 loop
