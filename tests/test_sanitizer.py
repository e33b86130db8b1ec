"""compute-sanitizer's two tools run at once, are read back as before, and never outlive the
grading step; a problem they find takes back what the grader did meanwhile. A stand-in
compute-sanitizer on PATH plays the tool here (no GPU); the real one runs in the `gpu`
tests of test_gpu_grading.py."""

from __future__ import annotations

import os
import textwrap

import pytest

from tilelab.catalog.reference import KERNELS
from tilelab.grading import sanitizer

# Each tool waits for the other one to have started: run one after the other, the first
# would give up and report no summary.
STAND_IN = textwrap.dedent("""\
    #!/bin/sh
    tool=$2
    touch "$MEET/$tool"
    other=memcheck; [ "$tool" = memcheck ] && other=racecheck
    n=0
    while [ ! -e "$MEET/$other" ]; do
      n=$((n+1)); [ $n -gt 600 ] && { echo "alone"; exit 1; }; sleep 0.05
    done
    if [ "$tool" = racecheck ]; then
      echo "========= Error: Race reported between Write access at 0x10 in matmul_tiled"
      echo "========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)"
    else
      echo "========= ERROR SUMMARY: 0 errors"
    fi
    """)


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "compute-sanitizer"
    exe.parent.mkdir()
    exe.write_text(STAND_IN)
    exe.chmod(0o755)
    (tmp_path / "meet").mkdir()
    monkeypatch.setenv("MEET", str(tmp_path / "meet"))
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "meet"


def test_both_tools_run_at_once_and_are_read_back(stand_in):
    res = sanitizer.run_sanitizers("tiled", KERNELS["tiled16"].source(), timeout=60)
    assert set(res) == {"racecheck", "memcheck"}
    assert res["racecheck"]["errors"] == 3
    assert "Race reported" in res["racecheck"]["summary"]
    assert res["memcheck"]["errors"] == 0
    assert sorted(os.listdir(stand_in)) == ["memcheck", "racecheck"]


def test_a_tool_past_its_time_is_stopped_and_not_judged(stand_in, monkeypatch):
    monkeypatch.setenv("MEET", str(stand_in / "nowhere"))  # neither can mark its start
    tools = sanitizer.Sanitizers("tiled", KERNELS["tiled16"].source(), timeout=0.5)
    res = tools.results()
    assert all("timed out" in r["summary"] and r["errors"] == 0 for r in res.values())
    assert all(p.poll() is not None for p in tools.procs.values())  # ended, reaped
    assert not os.path.exists(tools._tmp.name)


def test_the_grader_takes_back_what_it_did_while_a_tool_found_a_problem(stand_in):
    from tilelab.catalog import exercises
    from tilelab.device.runtime import get_runtime
    from tilelab.grading import pipeline
    from tilelab.grading.verdict import Verdict

    ex = exercises.get("tiled")
    run = pipeline.Run(ex, get_runtime("emu"), "", text=KERNELS["tiled16"].source())
    v = Verdict.for_exercise(ex, "gpu")
    v.correct = True
    run.sanitizing = (sanitizer.Sanitizers(ex.id, run.text, timeout=60), None, 0)
    v.traffic = {"counted": "meanwhile"}
    v.messages.append("a remark made meanwhile")
    assert pipeline.sanitizer_verdict(run, v)
    assert not v.correct and v.traffic is None
    assert v.messages == [v.sanitizer["racecheck"]["summary"]]
    assert run.sanitizing is None
