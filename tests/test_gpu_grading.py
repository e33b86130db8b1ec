"""The grader on a GPU: references pass both gates; slow-but-right kernels lose speed only."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, slow_but_right, tiled_without_barrier
from tilelab.catalog.variants import VARIANTS
from tilelab.grading import scoring
from tilelab.grading.sandbox import grade_source

pytestmark = pytest.mark.gpu


def _report(v):
    print(scoring.report(v))
    return v


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_reference_solution_passes_both_gates(exercise_id):
    ex = exercises.get(exercise_id)
    v = _report(grade_source(exercise_id, ex.reference.source(), backend_name="gpu"))
    if not ex.speed_graded:  # a correctness-only step: every point, and no time taken
        assert v.correct and not v.speed_measured and v.points == ex.points_correct
        return
    assert v.correct and v.speed_measured and v.speed_passed, scoring.report(v)
    assert v.speedup >= ex.gate and v.gpu
    # the emulator's traffic count, made on a thread beside the speed run, as made alone
    import numpy as np

    from tilelab.grading.gpu_steps import count_traffic

    assert "traffic_wait" in v.timeline
    assert v.traffic == count_traffic(ex, ex.reference.source(), np.random.default_rng())


SLOW_BUT_RIGHT = ("naive", "tiled", "transpose_padded", "matmul_at_padded", "regblock",
                  "regblock_1d")


@pytest.mark.parametrize("exercise_id", list(SLOW_BUT_RIGHT))
def test_slow_but_correct_kernels_keep_correctness_and_lose_speed(exercise_id):
    v = _report(grade_source(exercise_id, slow_but_right(exercise_id), backend_name="gpu"))
    assert v.correct and v.points_correct > 0, scoring.report(v)
    assert v.speed_measured and not v.speed_passed and v.points_speed == 0, scoring.report(v)


@pytest.mark.parametrize("exercise_id,key", [
    (e, v.key) for e, vs in VARIANTS.items() for v in vs if v.must == "fail"])
def test_every_lesson_skipping_variant_loses_its_speed_points(exercise_id, key):
    """Fast or not on this GPU (a strided-read transpose beats the shared-tile reference on
    an H100), a kernel that skips the lesson earns no speed points."""
    src = next(v for v in VARIANTS[exercise_id] if v.key == key).source()
    v = _report(grade_source(exercise_id, src, backend_name="gpu"))
    assert v.correct and not v.speed_passed and v.points_speed == 0, scoring.report(v)


def test_sanitizers_flag_a_missing_barrier_and_pass_the_reference():
    from tilelab.grading.sanitizer import find_sanitizer, run_sanitizers

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not installed")
    clean = run_sanitizers("tiled", KERNELS["tiled32"].source())
    racy = run_sanitizers("tiled", tiled_without_barrier(2))
    print(clean["racecheck"]["summary"], "|", racy["racecheck"]["summary"])
    assert clean["racecheck"]["errors"] == 0 and clean["memcheck"]["errors"] == 0
    assert racy["racecheck"]["errors"] > 0


def test_memcheck_flags_an_out_of_bounds_store():
    from tilelab.grading.sanitizer import find_sanitizer, run_sanitizers

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not installed")
    oob = KERNELS["naive"].source().replace("if (row < M && col < N) {", "{")
    res = run_sanitizers("naive", oob)
    print(res["memcheck"]["summary"])
    assert res["memcheck"]["errors"] > 0


def test_racecheck_runs_where_the_build_has_shared_memory_and_only_there():
    """Whether racecheck runs is read from the compiled kernel (its static shared memory):
    the naive reference has none, and racecheck, which looks for races in shared memory
    alone, is named as not run; the same kernel staging through a shared array gets
    racecheck; memcheck runs over both."""
    from tilelab.grading.gpu_steps import NO_SHARED_MEMORY
    from tilelab.grading.sanitizer import find_sanitizer

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not installed")
    plain = _report(grade_source("naive", KERNELS["naive"].source(), backend_name="gpu"))
    assert plain.correct and plain.sanitizer["memcheck"]["errors"] == 0
    assert plain.sanitizer["racecheck"]["summary"].endswith(NO_SHARED_MEMORY)
    assert "not run" not in plain.sanitizer["memcheck"]["summary"]
    staged = KERNELS["naive"].source().replace(
        "    int row = blockIdx.y",
        "    __shared__ float stage[256];\n"
        "    stage[threadIdx.y * 16 + threadIdx.x] = 0.0f;\n"
        "    int row = blockIdx.y", 1).replace(
        "        float acc = 0.0f;", "        float acc = stage[threadIdx.y * 16 + threadIdx.x];")
    assert "float acc = stage" in staged
    v = _report(grade_source("naive", staged, backend_name="gpu", speed=False))
    assert v.correct, scoring.report(v)
    assert v.sanitizer["racecheck"]["summary"] == "compute-sanitizer racecheck: 0 problem(s)"
    assert v.sanitizer["memcheck"]["errors"] == 0


def test_the_class_runs_base_cache_holds_every_speed_runs_course_build():
    from tilelab.device.runtime import PYCUDA_CACHE
    from tilelab.isolation import basecache
    from tilelab.isolation import bubblewrap as bwrap

    if bwrap.problem() is not None:
        pytest.skip(f"no sandbox here: {bwrap.problem()}")
    basecache.base_cache.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a part that could not be built fails here, saying why
        base = basecache.base_cache("gpu")
    assert base is not None
    from tilelab.device.bench import UNWRITTEN_SOURCE

    sources = {ref.source() for ex in exercises.EXERCISES.values() if ex.speed_graded
               for ref in (ex.baseline, ex.must_beat) if ref is not None} | {UNWRITTEN_SOURCE}
    assert len(list((base / PYCUDA_CACHE).glob("*.cubin"))) == len(sources)
    assert list((base / "emu").iterdir())  # the emulator's prelude probe too


def test_a_racing_kernel_gets_the_verdict_of_the_steps_in_turn():
    # racecheck and memcheck run while the emulator analyses the same source and counts
    # its traffic; a race either finds is judged before anything is timed
    v = _report(grade_source("tiled", tiled_without_barrier(2), backend_name="gpu"))
    assert not v.correct and v.points == 0, scoring.report(v)
    if not all(s["ok"] for s in v.shapes):  # wrong already at some shape on this GPU
        return
    said = "\n".join(v.messages)
    assert "race found by the emulator's analysis" in said or \
        v.sanitizer["racecheck"]["summary"] in said, said
    assert v.traffic is None and not v.speed_measured and v.counters is None
    assert {"start_tools", "start_beside", "take_schedules"} <= set(v.step_seconds)
    assert not any(m.startswith(("correct on", "speed")) for m in v.messages)


def test_the_sanitizers_small_shape_judges_the_corpus_as_its_sanitize_shape_does():
    # every planted race and out-of-bounds access of the corpus, and the clean references:
    # racecheck's and memcheck's findings at the grader's small shape match those at the
    # problem's sanitize_shape; for an exercise graded on whole tiles only (a partial tile
    # is out of its bounds by design, so memcheck rightly finds its reference reading past
    # the matrix at the sanitize_shape), at a shape of twice as many whole tiles each way
    from test_sanitizer import planted_faults, references

    from tilelab.grading import sanitizer

    if sanitizer.find_sanitizer() is None:
        pytest.skip("compute-sanitizer not installed")
    cases = planted_faults() + references()
    differ = []
    for name, exercise_id, source in cases:
        ex = exercises.get(exercise_id)
        whole = all(d % sanitizer.WHOLE_TILE == 0 for s in ex.shapes for d in s)
        old = tuple(2 * d for d in sanitizer.grading_shape(exercise_id)) if whole \
            else ex.problem.sanitize_shape
        found = {shape: {t: r["errors"] > 0 for t, r in
                         sanitizer.run_sanitizers(exercise_id, source, shape=shape).items()}
                 for shape in (old, sanitizer.grading_shape(exercise_id))}
        print(name, found)
        if len(set(map(str, found.values()))) > 1:
            differ.append((name, found))
    assert differ == []


SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"
REPLAYING = {  # fixture -> exercise: each scored 5/5 when its timed launches could replay
    "tiled-replay_poison_check": "tiled",
    "tiled-replay_memo": "tiled",
    "transpose_padded-replay_skip_tiles": "transpose_padded",
}


@pytest.mark.parametrize("fixture", list(REPLAYING))
def test_a_replaying_kernel_earns_at_most_its_correctness_points(fixture):
    """Every timed launch gets new inputs, fresh poison and rotated buffers, and is checked:
    a memo makes a launch wrong (nothing at all); a kernel that computes only into the
    poison is timed doing the whole work (an untiled product: no speed points)."""
    ex = exercises.get(REPLAYING[fixture])
    v = _report(grade_source(ex.id, (SUBMISSIONS / f"{fixture}.cu").read_text(),
                             backend_name="gpu"))
    assert v.points <= ex.points_correct and not v.speed_passed, scoring.report(v)
    if "memo" in fixture or "skip" in fixture:
        assert v.points == 0 and "computed a wrong result" in scoring.report(v)
