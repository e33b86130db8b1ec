"""The out-of-process grader on the CPU emulator: verdicts a learner can act on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tilelab import cli
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, tiled_without_barrier
from tilelab.grading import pipeline, scoring
from tilelab.grading.sandbox import grade_source

pytestmark = pytest.mark.slow


def emu(exercise_id: str, source: str | bytes, **kw):
    return grade_source(exercise_id, source, backend_name="emu", **kw)


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_reference_solutions_are_correct_on_the_emulator(exercise_id):
    ex = exercises.get(exercise_id)
    v = emu(exercise_id, ex.reference.source())
    assert v.correct, scoring.report(v)
    assert v.points_correct == ex.points_correct
    assert len(v.shapes) == len(ex.shapes)
    assert v.races == 0
    # every exercise alike: the emulator's analysis is feedback, speed needs a GPU
    assert not v.speed_measured and v.speed_passed is None and v.points_speed == 0
    if not ex.speed_graded:  # a step whose lesson is correctness or a barrier
        assert "graded for correctness only" in scoring.report(v)
        return
    assert any("not measured: needs a GPU" in m for m in v.messages)
    assert "speed: not measured: needs a GPU  (0/" in scoring.report(v)
    if ex.max_bank_degree is not None:  # padded kernels: the degree, told as feedback
        assert v.bank_degree <= ex.max_bank_degree
        assert "feedback only" in scoring.report(v)


def test_unpadded_kernels_are_told_their_bank_conflicts():
    unpadded = KERNELS["transpose_shared"].source()
    unpadded = unpadded.replace("transpose_padded", "unused").replace(
        "transpose_shared", "transpose_padded")
    v = emu("transpose_padded", unpadded)
    assert v.correct and not v.speed_passed and v.points_speed == 0
    assert v.bank_degree > 10
    assert any("worst-line bank-conflict degree" in m for m in v.messages)
    v = emu("matmul_at_padded", KERNELS["tiled32_at"].source())
    assert v.correct and not v.speed_passed and v.bank_degree > 1.1


def test_the_instructors_policy_awards_speed_on_the_emulator_and_says_so():
    v = emu("transpose_padded", KERNELS["transpose_padded"].source())
    assert scoring.points(v, award=True).speed == v.max_points_speed
    assert "awarded by the instructor's policy" in scoring.report(v, award=True)


@pytest.mark.parametrize("which", [1, 2])
def test_missing_barrier_is_wrong_and_named(which):
    v = emu("tiled", tiled_without_barrier(which))
    assert not v.correct and v.points_correct == 0
    text = "\n".join(v.messages)
    assert "wrong" in text or "race" in text


def test_compile_error_reports_the_learners_line():
    src = KERNELS["naive"].source().replace("float acc = 0.0f;", "float acc = 0.0f")
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if "float acc = 0.0f" in ln)
    v = emu("naive", src)
    assert not v.compiled and not v.correct
    assert "does not compile" in v.messages[0]
    assert f"{line}" in v.messages[0] or f"{line + 1}" in v.messages[0]
    assert list(v.step_seconds) == ["validate", "compile_candidate"]  # it stopped there
    # g++'s errors on the learner's kernel.cu, the line shown; nothing of the emulator's
    # prelude, its translation (kernel.cpp) or the names it keeps from the kernel
    text = v.messages[0]
    assert "error: expected ',' or ';'" in text and f"{line + 1:>5} | " in text
    for noise in ("poison", "kernel.cpp", "tilelab_emu", "prelude", "warning"):
        assert noise not in text, noise


def test_the_verdict_times_every_step_it_ran():
    v = emu("naive", KERNELS["naive"].source() + "// timed\n")
    assert v.correct
    assert list(v.step_seconds) == list(pipeline.names(pipeline.EMU_STEPS))
    assert v.step_seconds["check_outputs"] > 0


def test_wrong_kernel_name_is_explained():
    v = emu("naive", KERNELS["naive"].source().replace("matmul_naive", "matmul"))
    assert not v.correct and "no kernel named 'matmul_naive'" in v.messages[0]


def test_a_kernel_declared_extern_c_is_graded_as_the_kernel_itself():
    """PyCUDA's ``extern "C" __global__`` (nested in the ``extern "C" { }`` SourceModule
    wraps the source in) earns the reference's points, its lines numbered as written."""
    source = KERNELS["naive"].source().replace("__global__", 'extern "C"\n__global__')
    v = emu("naive", source)
    assert v.correct, scoring.report(v)
    assert v.points_correct == exercises.get("naive").points_correct and v.races == 0
    broken = source.replace("float acc = 0.0f;", "float acc = 0.0f")
    line = next(i for i, t in enumerate(broken.splitlines(), 1) if "float acc = 0.0f" in t)
    v = emu("naive", broken)
    assert "does not compile" in v.messages[0] and f"{line + 1:>5} | " in v.messages[0]


def test_missing_boundary_guard_is_caught():
    src = KERNELS["naive"].source().replace("if (row < M && col < N) {", "{")
    v = emu("naive", src)
    assert not v.correct
    assert any("launch failed" in m or "boundary" in m for m in v.messages), v.messages


def test_endless_loop_becomes_a_verdict():
    src = KERNELS["naive"].source().replace("float acc = 0.0f;",
                                            "float acc = 0.0f; volatile int spin = 1; "
                                            "while (spin) { }")
    v = emu("naive", src, timeout=20)
    assert not v.correct
    assert any("longer than" in m or "did not finish" in m for m in v.messages), v.messages


def test_check_command_json(tmp_path, capsys):
    f = tmp_path / "k.cu"
    f.write_text(KERNELS["naive"].source())
    rc = cli.main(["check", "naive", str(f), "--json", "--backend", "emu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert {"exercise", "passed", "correct", "speedup", "gate", "backend", "gpu",
            "messages"} <= out.keys()
    assert out["correct"] is True and out["backend"] == "emu" and out["speedup"] is None


def test_a_class_runs_cached_verdict_is_returned_only_for_the_same_source(tmp_path, monkeypatch):
    from tilelab.grading.cache import CACHE_ENV, cache_verdict
    from tilelab.grading.verdict import Verdict

    source = KERNELS["naive"].source()
    stored = Verdict("naive", "emu", correct=True, points_correct=3.0, messages=["stored"])
    cache_verdict(tmp_path, source, stored)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    hit = emu("naive", source)
    assert hit.correct and hit.messages[0] == "stored" and not hit.shapes  # not re-graded
    other = emu("naive", source + "\n// edited after the clean grade\n")
    assert other.correct and len(other.shapes) == len(exercises.get("naive").shapes), other.messages
    assert "stored" not in other.messages


@pytest.mark.parametrize("exercise_id", [e.id for e in exercises.EXERCISES.values()
                                         if e.speed_graded])
def test_slow_but_right_kernels_keep_their_correctness_points(exercise_id):
    from tilelab.catalog.reference import slow_but_right

    ex = exercises.get(exercise_id)
    v = emu(exercise_id, slow_but_right(exercise_id))
    assert v.correct and v.points_correct == ex.points_correct, scoring.report(v)
    if ex.max_bank_degree is not None:  # unpadded: the emulator's conflict gate fails it
        assert not v.speed_passed and v.bank_degree > ex.max_bank_degree


def test_the_speed_runs_output_is_checked_on_sampled_rows():
    import numpy as np

    from tilelab.grading.timed import sampled_compare

    ex = exercises.get("tiled")
    rng = np.random.default_rng(3)
    shape = (512, 384, 256)
    inputs = ex.problem.make_inputs(shape, rng)
    right = (inputs["A"].astype(np.float64) @ inputs["B"]).astype(np.float32)
    assert sampled_compare(ex, shape, inputs, right, rng).ok
    cut = right.copy()
    cut[200:] = np.nan  # a kernel that stops at row 200, or returns for a large M
    assert not sampled_compare(ex, shape, inputs, cut, rng).ok


def test_each_timed_round_is_checked_against_its_own_inputs():
    """The speed run's check keeps a round's float64 inputs for its other kernels: a new
    round's inputs are never compared with the last round's (each right output passes, and
    a launch that returns the last round's output is wrong)."""
    import numpy as np

    from tilelab.device.bench import Sample, sampled_rows
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.timed import ROWS_PER_LAUNCH, launch_check

    ex = exercises.get("tiled")
    rng = np.random.default_rng(5)
    shape = (256, 192, 128)
    check = launch_check(ex, shape)
    rounds = [ex.problem.make_inputs(shape, rng) for _ in range(3)]
    outputs = [(x["A"].astype(np.float64) @ x["B"]).astype(np.float32) for x in rounds]
    picks = [sampled_rows(rng, shape[0], ROWS_PER_LAUNCH) for _ in rounds]
    for x, right, rows in zip(rounds, outputs, picks, strict=True):
        assert check(x, Sample.of(right, POISON_BITS, rows)) is None
        assert check(x, Sample.of(right.copy(), POISON_BITS, rows)) is None  # its 2nd kernel
    # a replay of the round before, on this round's rows
    assert check(rounds[2], Sample.of(outputs[1], POISON_BITS, picks[2])) is not None
    # the first round's inputs, come again
    assert check(rounds[0], Sample.of(outputs[0], POISON_BITS, picks[0])) is None
    unwritten = outputs[0].copy()
    unwritten[7, 3] = np.uint32(POISON_BITS).view(np.float32)
    why = check(rounds[0], Sample.of(unwritten, POISON_BITS, picks[0]))
    assert why is not None and "1 of 49152 elements of C were never written" in why


def test_the_padded_matmul_must_also_beat_a_kernel_that_skips_the_lesson():
    ex = exercises.get("matmul_at_padded")
    assert ex.must_beat is not None and ex.must_beat.name == "matmul_naive"


def test_the_worker_is_sandboxed_where_a_sandbox_can_be_made():
    from tilelab.isolation import bubblewrap as sandbox

    if sandbox.problem():
        pytest.skip(sandbox.problem())
    walk = (__import__("pathlib").Path(__file__).parent / "data" / "hostile" /
            "libc_walk.h").read_text()
    src = walk + KERNELS["naive"].source().replace(
        "float acc = 0.0f;",
        'float acc = 0.0f;\n    typedef int (*fn_t)(const char*);\n'
        '    fn_t f = (fn_t)libc_symbol("system");\n    if (f) f("id");')
    v = grade_source("naive", src, backend_name="emu", sandboxed=True)
    assert v.points_correct == 0  # refused by the graded subset before any compiler runs
    assert "function pointer is not allowed in a graded kernel" in "\n".join(v.messages)
    assert set(v.step_seconds) == {"validate"}
    good = grade_source("naive", KERNELS["naive"].source(), backend_name="emu", sandboxed=True)
    assert good.correct and good.points_correct == 3


@pytest.mark.gpu
def test_a_speed_run_that_goes_wrong_at_the_speed_shape_scores_nothing():
    ex = exercises.get("tiled")
    beyond = max(s[0] for s in ex.shapes)  # right at every correctness shape, wrong past it
    assert ex.speed_shape[0] > beyond
    src = KERNELS["tiled32"].source().replace(
        "float acc = 0.0f;", f"float acc = 0.0f;\n    if (M > {beyond}) return;")
    v = grade_source("tiled", src, backend_name="gpu", sanitize=False)
    assert v.points_correct == 0 and v.points_speed == 0, scoring.report(v)
    assert re.search(r"the speed run's launch \d+ of \d+ at M=\d+.* computed a wrong result",
                     "\n".join(v.messages)), scoring.report(v)


@pytest.mark.gpu
def test_a_naive_kernel_as_the_padded_matmul_earns_no_speed_points():
    src = KERNELS["naive"].source().replace("matmul_naive(", "matmul_tiled_at(")
    v = grade_source("matmul_at_padded", src, backend_name="gpu", sanitize=False)
    assert v.correct and not v.speed_passed, scoring.report(v)


# ------------------------------------------------ speed runs that cannot be replayed

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def _checked_run(exercise_id: str, source: str, shape: tuple, repeat: int = 3):
    """The graded speed run's launches (rotation, poison, per-launch checks) of ``source``
    beside the exercise's baseline, on the emulator at a small shape."""
    import numpy as np

    from tilelab.device.bench import Timed, time_checked
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.timed import ROWS_PER_LAUNCH, launch_check

    ex = exercises.get(exercise_id)
    rt = get_runtime("emu")
    rng = np.random.default_rng(5)
    kernels = {
        "candidate": Timed(rt.SourceModule(source).get_function(ex.kernel), ex.launch),
        "baseline": Timed(rt.SourceModule(ex.baseline.source()).get_function(ex.baseline.name),
                          ex.baseline.launch),
    }
    return time_checked(rt, kernels, ex.problem, shape, rng, launch_check(ex, shape),
                        POISON_BITS, _unwritten(rt), ROWS_PER_LAUNCH, warmup=1, repeat=repeat)


def _unwritten(rt):
    from tilelab.device.bench import UNWRITTEN, UNWRITTEN_SOURCE

    return rt.SourceModule(UNWRITTEN_SOURCE).get_function(UNWRITTEN)


@pytest.mark.parametrize("exercise_id,shape", [("tiled", (64, 96, 64)),
                                               ("transpose_padded", (64, 96))])
def test_every_checked_launch_of_the_reference_is_right_and_timed(exercise_id, shape):
    t = _checked_run(exercise_id, exercises.get(exercise_id).reference.source(), shape)
    assert len(t["candidate"].samples_ms) == 3 and len(t["baseline"].samples_ms) == 3


@pytest.mark.parametrize("fixture,exercise_id,shape", [
    ("tiled-replay_memo", "tiled", (64, 96, 64)),
    ("transpose_padded-replay_skip_tiles", "transpose_padded", (64, 96)),
])
def test_a_kernel_that_keeps_results_between_launches_fails_a_checked_launch(
        fixture, exercise_id, shape):
    """Right at its first launch, so the correctness step passes it; a later launch finds
    its memo (on a GPU when the rotated buffers come round again, at launch 4; the
    emulator may hand a kernel the same addresses sooner) and returns at once."""
    from tilelab.device.bench import BUFFER_GROUPS, WrongLaunch

    src = (SUBMISSIONS / f"{fixture}.cu").read_text()
    with pytest.raises(WrongLaunch) as caught:
        _checked_run(exercise_id, src, shape)
    assert caught.value.label == "candidate" and 1 <= caught.value.index <= BUFFER_GROUPS
    assert "never written" in caught.value.reason


def test_a_kernel_that_computes_only_into_the_poison_does_the_whole_work_every_launch():
    """``if (C[i] == C[i]) return;`` skipped every launch after the first when the poison
    was written once; refilled before each launch, it computes every time, so it is timed
    as what it is (an untiled product) and every launch is right."""
    src = (SUBMISSIONS / "tiled-replay_poison_check.cu").read_text()
    t = _checked_run("tiled", src, (64, 96, 64))
    assert len(t["candidate"].samples_ms) == 3


def test_a_kernel_that_faults_only_at_the_speed_shape_loses_its_correctness_points():
    """Right at every graded shape, it writes out of bounds at the larger speed shape: the
    speed run says so and the kernel is not correct (never an internal grader error)."""
    import dataclasses

    import numpy as np

    from tilelab.device.runtime import get_runtime
    from tilelab.grading import timed
    from tilelab.grading.judge import Findings, Kind, judge
    from tilelab.grading.verdict import Verdict

    ex = exercises.get("tiled")
    ex = dataclasses.replace(ex, speed_shape=(64, 96, 64))
    src = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
    body = src.index("{", src.index(ex.kernel + "(")) + 1
    src = src[:body] + "\n    if (M == 64 && N == 96) C[M * N + 4096] = 1.0f;" + src[body:]
    rt = get_runtime("emu")
    found = Findings()
    found.find("check_outputs", Kind.CHECKED)  # right at every graded shape
    fn = rt.SourceModule(src).get_function(ex.kernel)
    timed.measure_speed(rt, fn, ex, np.random.default_rng(1), found)
    v = judge(Verdict.for_exercise(ex, rt.name), found)
    assert not v.correct and not v.speed_measured
    assert "the speed run's launch at M=64, N=96, K=64 failed" in v.messages[-1]
    assert "Out-of-bounds" in v.messages[-1]


def test_a_timed_round_the_cpu_held_up_is_run_again_on_new_inputs_for_every_kernel():
    """On a busy machine a grader may be held up between its start event and its launch,
    and the GPU's time would count the wait: such a round's times are dropped for every
    kernel alike and the round run again on inputs no launch saw, at most `repeat` times;
    held up once more, the speed is not measured (a held-up time is never counted), after
    the rounds run so far are checked. On the emulator every launch takes milliseconds, so
    a limit of 0 holds every round up."""
    import numpy as np

    from tilelab.device.bench import HeldUp, Timed, time_checked
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.timed import ROWS_PER_LAUNCH, launch_check

    ex, shape = exercises.get("tiled"), (64, 96, 64)
    rt, rng = get_runtime("emu"), np.random.default_rng(5)
    right = launch_check(ex, shape)
    unwritten = _unwritten(rt)
    seen: list[bytes] = []

    def check(inputs, got, wide):
        seen.append(inputs["A"].tobytes())
        return right(inputs, got, wide)

    kernels = {
        "candidate": Timed(rt.SourceModule(ex.reference.source()).get_function(ex.kernel),
                           ex.launch),
        "baseline": Timed(rt.SourceModule(ex.baseline.source()).get_function(ex.baseline.name),
                          ex.baseline.launch),
    }
    with pytest.raises(HeldUp, match="held up 3 of the timed rounds"):
        time_checked(rt, kernels, ex.problem, shape, rng, check, POISON_BITS, unwritten,
                     ROWS_PER_LAUNCH, warmup=1, repeat=2, redo_after_ms=0.0)
    rounds = seen[::2]  # each round checks the candidate, then the baseline, on its inputs
    # the warm-up, two rounds run again, the third held up: all checked, none counted
    assert seen[1::2] == rounds and len(rounds) == 1 + 2 + 1 == len(set(rounds))
    seen.clear()
    t = time_checked(rt, kernels, ex.problem, shape, rng, check, POISON_BITS, unwritten,
                     ROWS_PER_LAUNCH, warmup=1, repeat=2)
    assert t["candidate"].redone == 0 and len(seen) == 2 * 3


def test_a_timed_launchs_sample_counts_its_unwritten_words_on_the_device():
    """What the speed run reads back of a launch: the poison's count, made on the device,
    equals the host's count of the whole output, and the sampled rows are its rows."""
    import numpy as np

    from tilelab.device.bench import DevicePools, InputSets, Rotation, Sample, Timed
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.diagnosis import POISON_BITS

    ex, shape = exercises.get("tiled"), (70, 50, 30)
    rt, rng = get_runtime("emu"), np.random.default_rng(3)
    half = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(").replace(
        "if (row < M && col < N)", "if (row < M && col < N && row % 3 != 1)")
    kernel = Timed(rt.SourceModule(half).get_function(ex.kernel), ex.launch)
    sets = InputSets(ex.problem.make_inputs, shape, rng, 1)
    rot = Rotation(rt, kernel, ex.problem, shape, sets[0], POISON_BITS, _unwritten(rt))
    rot.prepare(0, DevicePools(rt, sets))()
    rows = np.array([1, 2, 40, 69])
    got = rot.sample(rows)
    whole = rt.from_device(rot.current["C"], (70, 50), np.float32)
    assert got.unwritten == Sample.of(whole, POISON_BITS, rows).unwritten == 23 * 50
    assert np.array_equal(got.data, whole[rows], equal_nan=True) and got.size == 70 * 50
    assert np.isnan(got.data[0]).all() and not np.isnan(got.data[1]).any()


def test_the_counted_runs_rotation_launches_without_samples():
    """Nsight Compute's worker launches a speed run's rotation as the timed run does
    (:func:`tilelab.grading.worker._launch_rotated`) and reads nothing back: its rotation
    needs no count of unwritten words, and refuses a sample."""
    import numpy as np

    from tilelab.device.bench import DevicePools, InputSets, Rotation, Timed
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.worker import _launch_rotated

    ex, shape = exercises.get("tiled"), (40, 30, 20)
    rt = get_runtime("emu")
    sets = InputSets(ex.problem.make_inputs, shape, np.random.default_rng(2), 2)
    kernel = Timed(rt.SourceModule(ex.reference.source()).get_function(ex.reference.name),
                   ex.launch)
    rot = Rotation(rt, kernel, ex.problem, shape, sets[0], POISON_BITS)
    _launch_rotated(rt, rot, DevicePools(rt, sets), 1)
    out = rt.from_device(rot.current["C"], (40, 30), np.float32)
    want = sets[1]["A"].astype(np.float64) @ sets[1]["B"]
    assert np.allclose(out, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="without the count"):
        rot.sample(None)


def test_each_launch_gets_inputs_no_other_launch_saw():
    import numpy as np

    from tilelab.catalog.problems import MATMUL
    from tilelab.device.bench import InputSets

    sets = InputSets(MATMUL.make_inputs, (48, 40, 36), np.random.default_rng(1), 25)
    firsts = [sets[i]["A"] for i in range(len(sets))]
    for i, a in enumerate(firsts):
        assert a.shape == (48, 36) and a.dtype == np.float32
        for b in firsts[i + 1:]:
            assert not np.array_equal(a, b)
            # not the same rows shifted either (no output rebuilt from an earlier one)
            assert not any(np.array_equal(a[s:], b[:-s]) for s in range(1, 48))


def test_a_launchs_float64_check_reads_pools_widened_once_and_judges_as_before():
    """A speed run checks every launch against float64 on sampled rows; the whole inputs
    (a matmul's B) come from pools widened once per run, not per launch, and the reference
    and error scale are the very ones widening each launch's inputs gives."""
    import numpy as np

    from tilelab.device.bench import InputSets, Sample, sampled_rows
    from tilelab.grading.diagnosis import POISON_BITS
    from tilelab.grading.timed import ROWS_PER_LAUNCH, SampledRows, launch_check

    ex, shape = exercises.get("tiled"), (96, 80, 72)
    rng = np.random.default_rng(3)
    sets = InputSets(ex.problem.make_inputs, shape, rng, 6)
    for j in range(len(sets)):
        wide, plain = sets.wide(j), sets[j]
        assert np.array_equal(wide.value("B"), plain["B"].astype(np.float64))
        assert np.array_equal(wide.magnitude("B"), np.abs(plain["B"].astype(np.float64)))
        pick = sampled_rows(rng, shape[0], ROWS_PER_LAUNCH)
        made = SampledRows(ex, shape, plain, pick=pick, wide=wide).known
        assert all(np.array_equal(a, b) for a, b in
                   zip(made, SampledRows(ex, shape, plain, pick=pick).known, strict=True))
    # one widened pool for every launch: windows of the same memory
    assert sets.wide(1).value("B").base is sets.wide(4).value("B").base
    assert sets.wide(1).magnitude("B").base is sets.wide(4).magnitude("B").base
    check, plain = launch_check(ex, shape), sets[2]
    right = (plain["A"].astype(np.float64) @ plain["B"]).astype(np.float32)
    rows = sampled_rows(rng, shape[0], ROWS_PER_LAUNCH)
    assert check(plain, Sample.of(right, POISON_BITS, rows), sets.wide(2)) is None
    wrong = right.copy()
    wrong[rows[1], 5] += 1.0
    assert f"first at C[{rows[1]}][5]" in check(plain, Sample.of(wrong, POISON_BITS, rows),
                                                sets.wide(2))


def test_a_wrong_timed_launch_earns_nothing_and_says_why():
    import numpy as np

    from tilelab.device.bench import Sample, WrongLaunch, sampled_rows
    from tilelab.grading import timed
    from tilelab.grading.diagnosis import POISON_BITS

    ex = exercises.get("tiled")
    msg = timed.wrong_launch_message(ex, WrongLaunch("candidate", 3, 25, "12 of 99 "
                                                        "elements of C were never written."))
    assert "launch 4 of 25" in msg and "never written" in msg and "no points" in msg
    check = timed.launch_check(ex, (40, 40, 40))
    inputs = ex.problem.make_inputs((40, 40, 40), np.random.default_rng(0))
    right = (inputs["A"].astype(np.float64) @ inputs["B"]).astype(np.float32)
    rows = sampled_rows(np.random.default_rng(0), 40, timed.ROWS_PER_LAUNCH)
    assert check(inputs, Sample.of(right, POISON_BITS, rows)) is None
    earlier = ex.problem.make_inputs((40, 40, 40), np.random.default_rng(1))
    stale = (earlier["A"].astype(np.float64) @ earlier["B"]).astype(np.float32)
    # an earlier launch's answer
    assert "sampled rows" in check(inputs, Sample.of(stale, POISON_BITS, rows))
    one = right.copy()
    one[rows[5], 7] += 1.0  # the message names the output's own row, not the sample's
    assert f"1 of 320 elements wrong; first at C[{rows[5]}][7]" in check(
        inputs, Sample.of(one, POISON_BITS, rows))


# ------------------------------------------------ the same correctness on both backends

V16 = "block_sum-device_scratch_race"  # a __device__ array as every block's scratch


def test_a_kernel_racing_in_global_memory_fails_the_emulators_schedules():
    """What a GPU grade also asks of a kernel: right under the emulator's varied orders."""
    import numpy as np

    from tilelab.grading.gpu_steps import emulator_finding

    src = (SUBMISSIONS / "naive-global_race.cu").read_text()
    ex = exercises.get("naive")
    why = emulator_finding(ex, src, np.random.default_rng(0))
    assert why is not None and "wrong" in why
    assert emulator_finding(ex, ex.reference.source(), np.random.default_rng(0)) is None
    v = emu("naive", src)  # and graded on the emulator: no points either
    assert not v.correct and v.points == 0, scoring.report(v)


def test_every_exercise_is_analysed_where_blocks_can_race():
    """Both backends analyse a kernel where two blocks or more run: the emulator at the
    problem's analysis shape (and, where that is one block, at the smallest graded shapes
    of two), a GPU grade at those smallest graded shapes."""
    from tilelab.grading.emu_steps import SCHEDULE_SHAPES, blocks, two_block_shapes

    one_block = set()
    for ex in exercises.EXERCISES.values():
        shapes = two_block_shapes(ex)
        assert len(shapes) == SCHEDULE_SHAPES and set(shapes) <= set(ex.shapes), ex.id
        assert all(blocks(ex, s) >= 2 for s in shapes), ex.id
        if blocks(ex, ex.problem.analysis_shape) < 2:
            one_block.add(ex.id)
    assert one_block == {"regblock_1d", "regblock", "vec4"}  # their tiles are 64 or 128


def test_a_race_between_blocks_is_found_on_the_emulator_where_its_analysis_shape_is_one_block():
    import dataclasses

    from tilelab.device.runtime import get_runtime

    ex = exercises.get("block_sum")
    one = dataclasses.replace(ex.problem, analysis_shape=(200,))  # one block of 256
    ex = dataclasses.replace(ex, reference=dataclasses.replace(ex.reference, problem=one))
    run = pipeline.Run(ex, get_runtime("emu"), (SUBMISSIONS / f"{V16}.cu").read_bytes(),
                       pipeline.names(pipeline.EMU_STEPS))
    v = pipeline.grade(run, pipeline.EMU_STEPS)
    assert not v.correct and v.points == 0, scoring.report(v)
    assert v.races == 0  # none at the analysis shape: one block
    assert v.messages[-1].startswith("race found by the emulator's analysis"), v.messages
    assert " at n=257:" in v.messages[-1]




def test_a_race_between_blocks_is_found_beside_a_gpu_grade():
    """The emulator runs blocks one at a time, so v16's sums are right there, as they may
    be on a GPU; its analysis, run beside a GPU grade, sees one block write a word another
    reads: a finding, on both backends."""
    import numpy as np

    from tilelab.grading.gpu_steps import emulator_finding

    ex = exercises.get("block_sum")
    why = emulator_finding(ex, (SUBMISSIONS / f"{V16}.cu").read_text(), np.random.default_rng(0))
    assert why is not None and "race found by the emulator's analysis" in why, why
    assert "scratch" in why
    assert emulator_finding(ex, ex.reference.source(), np.random.default_rng(0)) is None


def test_the_gpu_steps_give_a_kernel_right_on_the_device_but_racing_no_points():
    """The GPU's step list with the emulator standing in for the GPU's own launches (so
    that its checks pass, as v16's may on a GPU): the analysis beside finds the race,
    and the judge drops what the timed step said after it."""
    from tilelab.device.runtime import get_runtime

    ex = exercises.get("block_sum")
    run = pipeline.Run(ex, get_runtime("emu"), (SUBMISSIONS / f"{V16}.cu").read_bytes(),
                       pipeline.names(pipeline.GPU_ORDER), speed=False, sanitize=False)
    v = pipeline.grade(run, pipeline.GPU_STEPS)
    assert not v.correct and v.points == 0, scoring.report(v)
    assert [s["ok"] for s in v.shapes] == [True] * len(ex.shapes)  # right at every shape
    assert "time_speed" in v.step_seconds and "schedules_wait" in v.timeline
    assert not any(m.startswith("correct on") for m in v.messages), v.messages
    assert "race found by the emulator's analysis" in v.messages[-1]


@pytest.mark.gpu
def test_a_race_between_blocks_earns_nothing_on_a_gpu():
    v = grade_source("block_sum", (SUBMISSIONS / f"{V16}.cu").read_text(), backend_name="gpu")
    print(scoring.report(v))
    assert not v.correct and v.points == 0, scoring.report(v)
    assert "race found by the emulator's analysis" in "\n".join(v.messages), scoring.report(v)


@pytest.mark.gpu
def test_a_kernel_racing_in_global_memory_earns_nothing_on_a_gpu():
    """Its schedules run beside the speed run; found wrong there, what was done since
    correctness is taken back: the verdict is the one the steps in turn would give."""
    v = grade_source("naive", (SUBMISSIONS / "naive-global_race.cu").read_text(),
                     backend_name="gpu")
    assert not v.correct and v.points == 0, scoring.report(v)
    if any("not on the emulator" in m for m in v.messages):  # right on the GPU itself
        assert "schedules_wait" in v.timeline and not v.speed_measured, scoring.report(v)
        assert v.counters is None and v.traffic is None and not v.sanitizer
        assert not any(m.startswith(("correct on", "speed")) for m in v.messages)
