"""The correctness check's comparison and diagnosis, on hand-made outputs."""

from __future__ import annotations

import numpy as np

from tilelab.catalog.problems import MATMUL, TRANSPOSE
from tilelab.catalog.reference import KERNELS
from tilelab.grading.correctness import POISON_BITS, compare, poisoned

LAUNCH32 = KERNELS["tiled32"].launch


def _exact(shape, rng):
    inputs = MATMUL.make_inputs(shape, rng)
    return inputs, MATMUL.reference(inputs).astype(np.float32)


def test_correct_output_passes(rng):
    inputs, got = _exact((37, 53, 29), rng)
    assert compare(MATMUL, (37, 53, 29), inputs, got, LAUNCH32).ok


def test_float32_rounding_is_tolerated_but_a_small_error_is_not(rng):
    inputs, _got = _exact((64, 64, 256), rng)
    got32 = (inputs["A"] @ inputs["B"]).astype(np.float32)  # float32 accumulation order
    assert compare(MATMUL, (64, 64, 256), inputs, got32, LAUNCH32).ok
    got32[5, 7] += 1e-2
    res = compare(MATMUL, (64, 64, 256), inputs, got32, LAUNCH32)
    assert not res.ok and res.first_wrong == (5, 7) and res.wrong == 1


def test_unwritten_boundary_is_named(rng):
    shape = (40, 50, 30)
    inputs, got = _exact(shape, rng)
    got[32:, :] = poisoned((8, 50))
    res = compare(MATMUL, shape, inputs, got, LAUNCH32)
    assert not res.ok
    assert res.first_wrong == (32, 0)
    assert res.cause.startswith("boundary")
    assert "never written" in res.message


def test_wrong_values_at_the_edge_only_point_at_loads(rng):
    shape = (40, 50, 30)
    inputs, got = _exact(shape, rng)
    got[:, 45] += 1.0
    res = compare(MATMUL, shape, inputs, got, LAUNCH32)
    assert res.cause.startswith("boundary") and "loads outside the matrix" in res.cause


def test_nan_from_poisoned_shared_memory(rng):
    inputs, got = _exact((64, 64, 64), rng)
    got[3, :] = np.nan
    res = compare(MATMUL, (64, 64, 64), inputs, got, LAUNCH32)
    assert "NaN computed" in res.cause
    assert "missing __syncthreads" not in res.cause  # no race analysis here: no such claim


def test_transposed_result_is_recognised(rng):
    inputs, got = _exact((48, 48, 48), rng)
    res = compare(MATMUL, (48, 48, 48), inputs, np.ascontiguousarray(got.T), LAUNCH32)
    assert res.cause.startswith("swapped row/column: C is stored column-major")


def test_nondeterministic_results_are_called_a_race(rng):
    inputs, got = _exact((64, 64, 64), rng)
    bad = got.copy()
    bad[10, 10] += 3.0
    again = got.copy()
    again[11, 11] += 3.0
    res = compare(MATMUL, (64, 64, 64), inputs, bad, LAUNCH32, again=again)
    assert res.cause.startswith("race")


def test_transpose_must_be_exact(rng):
    inputs = TRANSPOSE.make_inputs((33, 65), rng)
    got = inputs["in"].T.copy()
    launch = KERNELS["transpose_shared"].launch
    assert compare(TRANSPOSE, (33, 65), inputs, got, launch).ok
    got[0, 0] = np.nextafter(got[0, 0], np.float32(2))
    assert not compare(TRANSPOSE, (33, 65), inputs, got, launch).ok


def test_poison_is_a_marked_nan():
    p = poisoned((2, 2))
    assert np.isnan(p).all() and (p.view(np.uint32) == POISON_BITS).all()
