"""compute-sanitizer's two tools run at once, are read back as before, and never outlive the
grading step; a problem they find takes back what the grader did meanwhile. A stand-in
compute-sanitizer on PATH plays the tool here (no GPU); the real one runs in the `gpu`
tests of test_gpu_grading.py."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, tiled_without_barrier
from tilelab.device.runtime import get_runtime
from tilelab.emu import errors
from tilelab.grading import pipeline, sanitizer
from tilelab.grading.correctness import launch
from tilelab.grading.verdict import Verdict

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


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "submissions")


def planted_faults() -> list[tuple[str, str, str]]:
    """(name, exercise, source) of every kernel with a planted race or out-of-bounds access
    in the project's corpus."""
    naive = KERNELS["naive"].source()
    loop = exercises.get("tiled_loop").reference.source()
    cut = loop.rindex("__syncthreads();")
    out = [(f"tiled without barrier {b}", "tiled", tiled_without_barrier(b)) for b in (1, 2)]
    out.append(("tiled_loop without its second barrier", "tiled_loop",
                loop[:cut] + "/* removed */" + loop[cut + len("__syncthreads();"):]))
    out.append(("naive without its guard", "naive",
                naive.replace("if (row < M && col < N) {", "{")))
    for name in ("tiled-missing_barrier", "tiled-no_boundary_guard",
                 "transpose_padded-out_of_bounds_write"):
        with open(os.path.join(FIXTURES, f"{name}.cu"), encoding="utf-8") as f:
            out.append((name, name.split("-")[0], f.read()))
    return out


def emulator_flags(exercise_id: str, source: str, shape: tuple[int, ...]) -> bool:
    """Whether one analysed launch on the emulator at ``shape`` reports a race or an
    out-of-bounds access (what racecheck and memcheck look for)."""
    ex, rt = exercises.get(exercise_id), get_runtime("emu")
    fn = rt.SourceModule(source, analysis=True).get_function(ex.kernel)
    try:
        launch(rt, fn, ex.problem, ex.launch, shape,
               ex.problem.make_inputs(shape, np.random.default_rng(0)))
    except errors.EmulatorError:
        return True
    return bool(fn.last_report.analysis.races)


@pytest.mark.slow
@pytest.mark.parametrize("name,exercise_id,source", planted_faults(),
                         ids=[n for n, _, _ in planted_faults()])
def test_the_small_sanitizer_shape_still_shows_every_planted_fault(name, exercise_id, source):
    # on the emulator, as a stand-in for the GPU's tools (their own comparison is a `gpu`
    # test in test_gpu_grading.py)
    old = exercises.get(exercise_id).problem.sanitize_shape
    assert emulator_flags(exercise_id, source, old), f"{name}: no fault at {old} either"
    assert emulator_flags(exercise_id, source, sanitizer.grading_shape(exercise_id)), name


def references() -> list[tuple[str, str, str]]:
    """(name, exercise, source) of every exercise's reference solution."""
    return [(f"{ex.id} reference", ex.id, ex.reference.source().replace(
        ex.reference.name + "(", ex.kernel + "(")) for ex in exercises.EXERCISES.values()]


@pytest.mark.slow
@pytest.mark.parametrize("name,exercise_id,source", references(),
                         ids=[n for n, _, _ in references()])
def test_the_references_stay_clean_at_the_small_sanitizer_shape(name, exercise_id, source):
    assert not emulator_flags(exercise_id, source, sanitizer.grading_shape(exercise_id)), name


def test_a_kernel_failed_meanwhile_keeps_the_verdict_it_had_without_the_sanitizer(stand_in):
    # the emulator's schedules run while the tools do; when they fail the kernel, the
    # tools' findings are no part of the verdict (in turn, the sanitizer would not have run)
    ex = exercises.get("tiled")
    run = pipeline.Run(ex, get_runtime("emu"), "", text=KERNELS["tiled32"].source())
    v = Verdict.for_exercise(ex, "gpu")
    tools = sanitizer.Sanitizers(ex.id, run.text, timeout=60)
    run.sanitizing = (tools, None, 0)
    v.correct = False
    v.messages.append("right on this GPU, but not on the emulator")
    assert pipeline.sanitizer_verdict(run, v)
    assert v.sanitizer == {} and v.messages == ["right on this GPU, but not on the emulator"]
    assert all(p.poll() is not None for p in tools.procs.values())  # stopped, reaped
    assert run.sanitizing is None
