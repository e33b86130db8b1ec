"""``tilelab.settings``: every TILELAB_* variable is read when asked, and a bad value says
which variable is wrong instead of breaking an import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tilelab import cli, settings


def test_defaults_when_unset(monkeypatch):
    for var in settings.ALL:
        monkeypatch.delenv(var.name, raising=False)
    assert settings.GRADE_TIMEOUT.get() == 300.0
    assert settings.CELL_TIMEOUT.get() == 120
    assert settings.BACKEND.get() == "auto"
    assert settings.AWARD_SPEED_WITHOUT_GPU.get() is False
    assert settings.VERDICT_CACHE.get() is None


@pytest.mark.parametrize(
    "var, value",
    [
        (settings.GRADE_TIMEOUT, "five"),
        (settings.GRADE_TIMEOUT, "-1"),
        (settings.CELL_TIMEOUT, "1.5"),
        (settings.BACKEND, "cuda"),
        (settings.AWARD_SPEED_WITHOUT_GPU, "maybe"),
    ],
)
def test_a_bad_value_names_the_variable(monkeypatch, var, value):
    monkeypatch.setenv(var.name, value)
    with pytest.raises(settings.SettingsError, match=f"{var.name}='{value}' is not valid"):
        var.get()


@pytest.mark.slow
def test_a_bad_value_does_not_break_imports():
    env = dict(os.environ, TILELAB_GRADE_TIMEOUT="five", TILELAB_CELL_TIMEOUT="x")
    code = "import tilelab.notebook, tilelab.classroom, tilelab.grading.sandbox, tilelab.cli"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_the_cli_says_which_variable_is_wrong(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TILELAB_GRADE_TIMEOUT", "five")
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void matmul_naive() {}")
    assert cli.main(["check", "naive", str(cu), "--backend", "emu"]) == 2
    err = capsys.readouterr().err
    assert "TILELAB_GRADE_TIMEOUT='five' is not valid" in err and "Traceback" not in err


def test_environ_sets_and_restores(monkeypatch):
    monkeypatch.setenv("TILELAB_CLASS_GRADING", "old")
    monkeypatch.delenv("TILELAB_VERDICT_CACHE", raising=False)
    with settings.environ({**settings.CLASS_GRADING.set_to(None),
                           **settings.VERDICT_CACHE.set_to("/somewhere")}):
        assert settings.CLASS_GRADING.get() is False
        assert settings.VERDICT_CACHE.get() == "/somewhere"
    assert settings.CLASS_GRADING.raw() == "old" and settings.VERDICT_CACHE.get() is None
