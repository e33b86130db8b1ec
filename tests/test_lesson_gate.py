"""On a GPU a speed gate is passed only with the lesson: the emulator counts the traffic of
the same source, and a fast kernel that walks a column keeps its correctness points but not
its speed points (on an H100 a transpose with no tile and strided reads beat the shared-tile
reference in `tilelab calibrate`)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelab.catalog import exercises
from tilelab.catalog.variants import VARIANTS
from tilelab.grading.pipeline import count_traffic, lesson_gate
from tilelab.grading.verdict import Verdict


def gpu_verdict(exercise_id: str, source: str, speedup: float) -> Verdict:
    """A verdict as the GPU's speed step leaves it: correct, timed over the gate."""
    ex = exercises.get(exercise_id)
    v = Verdict.for_exercise(ex, "gpu", "a GPU")
    v.correct, v.speed_measured, v.speedup = True, True, speedup
    v.speed_passed = speedup >= ex.gate
    counted = count_traffic(ex, source, np.random.default_rng(3))
    assert isinstance(counted, dict), counted
    v.traffic = counted
    lesson_gate(ex, v)
    return v


def variant(exercise_id: str, key: str) -> str:
    return next(v for v in VARIANTS[exercise_id] if v.key == key).source()


def test_a_fast_transpose_with_strided_reads_loses_its_speed_points():
    v = gpu_verdict("transpose_shared", variant("transpose_shared", "strided_reads"), 3.8)
    assert v.correct and not v.speed_passed
    assert "sectors per request" in " ".join(v.messages)


@pytest.mark.parametrize("exercise_id", ["naive", "tiled", "transpose_shared",
                                         "transpose_padded", "matmul_at_padded", "regblock"])
def test_every_reference_keeps_its_speed_points(exercise_id):
    ex = exercises.get(exercise_id)
    v = gpu_verdict(exercise_id, ex.reference.source(), ex.gate + 1)
    assert v.speed_passed, v.messages


@pytest.mark.parametrize("exercise_id,key", [
    (e, v.key) for e, vs in VARIANTS.items() for v in vs if v.must == "pass"])
def test_no_correct_variant_is_refused_by_its_traffic(exercise_id, key):
    ex = exercises.get(exercise_id)
    v = gpu_verdict(exercise_id, variant(exercise_id, key), ex.gate + 1)
    assert v.speed_passed, v.messages
