"""Correctness checks: fresh random inputs, a float64 reference, and a diagnosis.

Outputs are poisoned with a marked NaN before every launch, so an element the kernel
never wrote is told apart from one it computed wrongly. The message names the first wrong
element and its likely cause: never written, boundary, race, or indexing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tilelab.problems import Launch, Problem, Shape
from tilelab.runtime import Runtime

POISON_BITS = np.uint32(0x7FC0DEAD)  # a quiet NaN no arithmetic produces
RTOL = 1e-5  # per element, relative to sum_k |A_ik| |B_kj|; float32 sums land near 1e-7


def poisoned(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 array filled with the marked NaN."""
    return np.full(shape, POISON_BITS, dtype=np.uint32).view(np.float32)


@dataclass
class ShapeResult:
    """The outcome of one launch at one shape."""

    shape: Shape
    ok: bool
    wrong: int = 0
    total: int = 0
    max_error: float = 0.0
    first_wrong: tuple[int, int] | None = None
    got: float | None = None
    expected: float | None = None
    cause: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch(
    rt: Runtime,
    fn: Any,
    problem: Problem,
    launch_: Launch,
    shape: Shape,
    inputs: dict[str, np.ndarray],
) -> np.ndarray:
    """Run ``fn`` once on these inputs with a poisoned output; return the output."""
    sizes = problem.sizes(shape)
    out = poisoned(problem.output_shape(shape))
    bufs = {name: rt.to_device(arr) for name, arr in inputs.items()}
    bufs[problem.output] = rt.to_device(out)
    args = problem.arguments(bufs, shape)
    fn(*args, block=launch_.block, grid=launch_.grid(sizes))
    rt.synchronize()
    return rt.from_device(bufs[problem.output], out.shape, np.float32)


def compare(
    problem: Problem,
    shape: Shape,
    inputs: dict[str, np.ndarray],
    got: np.ndarray,
    launch_: Launch,
    again: np.ndarray | None = None,
) -> ShapeResult:
    """Compare a kernel's output with the float64 reference and explain the first miss."""
    expected = problem.reference(inputs)
    if problem.exact:
        bad = ~(got.astype(np.float64) == expected)
        err = np.where(np.isnan(got), np.inf, np.abs(got - expected))
    else:
        scale = problem.error_bound(inputs) + np.finfo(np.float32).tiny
        err = np.abs(got.astype(np.float64) - expected) / scale
        err = np.where(np.isnan(got), np.inf, err)
        bad = ~(err <= RTOL)
    result = ShapeResult(
        shape=tuple(shape),
        ok=not bad.any(),
        wrong=int(bad.sum()),
        total=int(bad.size),
        max_error=float(np.max(err, initial=0.0)),
    )
    if result.ok:
        result.message = f"shape {fmt_shape(problem, shape)}: correct"
        return result
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    result.first_wrong = idx  # type: ignore[assignment]
    result.got = float(got[idx])
    result.expected = float(expected[idx])
    result.cause = diagnose(problem, shape, got, expected, bad, launch_, again)
    result.message = (
        f"shape {fmt_shape(problem, shape)}: {result.wrong} of {result.total} elements wrong; "
        f"first at {problem.output}[{idx[0]}][{idx[1]}]: got {describe_value(got[idx])}, "
        f"expected {result.expected:.6g}. Likely cause: {result.cause}"
    )
    return result


def describe_value(v: np.float32) -> str:
    if np.isnan(v):
        if np.float32(v).view(np.uint32) == POISON_BITS:
            return "never written (still the NaN poison)"
        return "NaN"
    return f"{float(v):.6g}"


def fmt_shape(problem: Problem, shape: Shape) -> str:
    return ", ".join(f"{d}={s}" for d, s in zip(problem.dims, shape, strict=True))


def diagnose(
    problem: Problem,
    shape: Shape,
    got: np.ndarray,
    expected: np.ndarray,
    bad: np.ndarray,
    launch_: Launch,
    again: np.ndarray | None,
) -> str:
    """The most likely cause of wrong elements, in words a learner can act on."""
    unwritten = got.view(np.uint32) == POISON_BITS
    rows, cols = got.shape
    tile_y, tile_x = launch_.tile[1], launch_.tile[0]
    edge = np.zeros_like(bad)
    edge[(rows // tile_y) * tile_y :, :] = True
    edge[:, (cols // tile_x) * tile_x :] = True
    if again is not None and not np.array_equal(again.view(np.uint32), got.view(np.uint32)):
        return (
            "race: two runs on the same inputs gave different results. A thread reads "
            "shared memory another thread has not finished writing (or is overwriting): "
            "check both __syncthreads() calls."
        )
    if unwritten[bad].all():
        if edge[bad].all() and edge.any():
            return (
                "boundary: the elements in the last partial tile were never written. The "
                "grid or the store guard stops short of the edge; cover the whole output "
                "(round the grid up) and guard with row < M && col < N."
            )
        return (
            "never written: these output elements kept the poison value. Check the grid "
            "covers the output and that every thread that should store does."
        )
    if np.isnan(got[bad]).any():
        return (
            "NaN computed: a value was read before anything wrote it, typically shared "
            "memory read before the whole tile was loaded (missing __syncthreads() after "
            "the loads) or a load outside the matrix that is not replaced by 0."
        )
    if edge.any() and edge[bad].all():
        return (
            "boundary: only elements in the last partial tile are wrong. Loads outside the "
            "matrix must contribute 0 (guard each load, not only the store)."
        )
    if got.shape[0] == got.shape[1] and np.allclose(got, expected.T, rtol=1e-4, atol=1e-4):
        return "indexing: the result is the transpose of the expected one; swap row and column."
    return (
        "indexing or synchronisation: most elements are wrong. Check the row/column "
        "formulas, the K loop bounds, and that each tile is complete before it is used "
        "and not overwritten before everyone has used it."
    )


def check_function(
    rt: Runtime,
    fn: Any,
    problem: Problem,
    launch_: Launch,
    shape: Shape,
    rng: np.random.Generator,
    repeat_on_error: bool = True,
) -> ShapeResult:
    """Check one compiled kernel at one shape with fresh random inputs."""
    inputs = problem.make_inputs(shape, rng)
    got = launch(rt, fn, problem, launch_, shape, inputs)
    result = compare(problem, shape, inputs, got, launch_)
    if not result.ok and repeat_on_error and rt.name == "gpu":
        again = launch(rt, fn, problem, launch_, shape, inputs)
        result = compare(problem, shape, inputs, got, launch_, again=again)
    return result
