"""compute-sanitizer's two tools run at once, are read back as before, and never outlive the
grading step; a problem they find is judged as if found before anything was timed. A stand-in
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
from tilelab.grading import gpu_steps, pipeline, sanitizer
from tilelab.grading.correctness import launch
from tilelab.grading.judge import Kind

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


def test_a_clean_tools_summary_names_no_first_problem():
    """racecheck's own summary line ("0 hazards displayed") is its count, not a hazard."""
    clean = sanitizer.parse("racecheck", "========= COMPUTE-SANITIZER\n========= RACECHECK "
                            "SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    assert clean["summary"] == "compute-sanitizer racecheck: 0 problem(s)"
    racy = sanitizer.parse("racecheck", "========= Error: Race reported between Write access "
                           "at 0x10 in k\n========= RACECHECK SUMMARY: 1 hazard displayed "
                           "(1 error, 0 warnings)\n")
    assert racy["errors"] == 1
    assert racy["summary"].endswith("; first: Error: Race reported between Write access at "
                                    "0x10 in k")


def test_a_tool_past_its_time_is_stopped_and_not_judged(stand_in, monkeypatch):
    monkeypatch.setenv("MEET", str(stand_in / "nowhere"))  # neither can mark its start
    tools = sanitizer.Sanitizers("tiled", timeout=0.5)
    tools.go(KERNELS["tiled16"].source())
    res = tools.results()
    assert all("timed out" in r["summary"] and r["errors"] == 0 for r in res.values())
    assert all(t.proc.poll() is not None for t in tools.tools.values())  # ended, reaped
    assert not os.path.exists(tools._tmp.name)


def test_tools_never_given_the_source_are_never_judged(stand_in):
    """Started ahead of the grade, the tools wait for the source: asking them for findings
    they never had the kernel for is the grader's error, never a clean report."""
    tools = sanitizer.Sanitizers("tiled", timeout=60)
    assert not os.path.exists(tools.source)
    with pytest.raises(RuntimeError, match="never given the source"):
        tools.results()
    assert all(t.proc.poll() is not None for t in tools.tools.values())
    assert not os.path.exists(tools._tmp.name)


# racecheck waits for go, as the real worker does; memcheck ends at once
WAITING_RACECHECK = textwrap.dedent("""\
    #!/bin/sh
    if [ "$2" = racecheck ]; then
      read line
      echo "========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)"
    else
      echo "========= ERROR SUMMARY: 0 errors"
    fi
    """)


def test_a_tool_skipped_is_ended_at_once_and_reported_as_not_run(stand_in):
    """racecheck over a kernel with no shared memory: ended where it stands (its start is
    the heaviest of the tools'), never given the source, and named as not run, and why."""
    (stand_in.parent / "bin" / "compute-sanitizer").write_text(WAITING_RACECHECK)
    tools = sanitizer.Sanitizers("naive", timeout=60)
    racecheck = tools.tools["racecheck"]
    assert not racecheck.wait(0.2)  # waiting for its source
    tools.skip("racecheck", "no shared memory")
    assert racecheck.proc.poll() is not None and "racecheck" not in tools.tools
    tools.skip("racecheck", "asked twice")  # nothing more: it is reported once
    tools.go(KERNELS["naive"].source())
    res = tools.results()
    assert res["racecheck"] == {"tool": "racecheck", "errors": 0,
                                "summary": "compute-sanitizer racecheck: not run: "
                                           "no shared memory"}
    assert res["memcheck"]["errors"] == 0 and "not run" not in res["memcheck"]["summary"]
    assert not os.path.exists(tools._tmp.name)


def timed_meanwhile(message: str | None = None) -> pipeline.Run:
    """A GPU grade right at every shape, the sanitizer run beside it, and what the timed
    run, the lesson and the emulator's count found meanwhile (read before the sanitizer)."""
    ex = exercises.get("tiled")
    run = pipeline.Run(ex, get_runtime("emu"), "", pipeline.names(pipeline.GPU_ORDER),
                       text=KERNELS["tiled16"].source())
    run.find(Kind.CHECKED, message, step="check_outputs")
    run.find(Kind.NOTE, "correct on 9 shapes", step="time_speed")
    run.find(Kind.TIMED, step="time_speed", speed_measured=True, speedup=2.5)
    run.find(Kind.NOTE, step="take_traffic", traffic={"counted": "meanwhile"})
    run.find(Kind.NOTE, "the lesson, from the counters", step="grade_lesson",
             counters={"source": "ncu"})
    run.sanitizing = sanitizer.Sanitizers(ex.id, timeout=60)
    run.sanitizing.go(run.text)
    run.step = "take_sanitizer"
    return run


def test_a_problem_the_tools_find_is_judged_before_anything_timed(stand_in):
    run = timed_meanwhile("correct at every shape")
    gpu_steps.take_sanitizer(run)
    v = run.so_far()
    assert not v.correct and v.traffic is None and v.counters is None
    assert not v.speed_measured and v.speedup is None and v.speed_passed is None
    assert v.messages == ["correct at every shape", v.sanitizer["racecheck"]["summary"]]
    assert {"racecheck_read", "memcheck_read"} <= set(run.timeline)  # the tools' own times
    assert run.sanitizing is None


def test_a_clean_sanitizer_leaves_the_timed_runs_verdict(stand_in, monkeypatch):
    monkeypatch.setattr(sanitizer, "parse", lambda tool, out: {
        "tool": tool, "errors": 0, "summary": f"compute-sanitizer {tool}: 0 problem(s)"})
    run = timed_meanwhile()
    gpu_steps.take_sanitizer(run)
    v = run.so_far()
    assert v.correct and v.speed_passed and v.speedup == 2.5 and v.counters == {"source": "ncu"}
    assert set(v.sanitizer) == {"racecheck", "memcheck"}


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


def test_a_kernel_wrong_before_keeps_the_verdict_it_had_without_the_sanitizer(stand_in):
    # the checks and the emulator's schedules run while the tools do; when they find the
    # kernel wrong, the sanitizer's step is not run (in turn, it would not have been) and
    # its tools are stopped unread
    ex = exercises.get("tiled")
    run = pipeline.Run(ex, get_runtime("emu"), "", pipeline.names(pipeline.GPU_ORDER),
                       text=KERNELS["tiled32"].source())
    tools = sanitizer.Sanitizers(ex.id, timeout=60)
    tools.go(run.text)
    run.sanitizing = tools
    run.find(Kind.CHECKED, step="check_outputs")
    run.find(Kind.WRONG, "right on this GPU, but not on the emulator", step="take_schedules")
    v = pipeline.grade(run, [gpu_steps.take_sanitizer])
    assert v.sanitizer == {} and v.messages == ["right on this GPU, but not on the emulator"]
    assert "take_sanitizer" not in v.step_seconds
    assert all(t.proc.poll() is not None for t in tools.tools.values())  # stopped, reaped
