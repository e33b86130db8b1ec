"""Why a kernel's output is wrong, in words that match the mistake.

The checker runs every shape; the diagnosis reads the most telling failing one (large,
rectangular, not a multiple of the tile: where a boundary, a swapped index or a dropped
partial tile each leave a different mark) and, on the emulator, the race analysis. Each
cause is tested against evidence, never guessed: which elements kept the NaN poison,
whether they are the partial tiles, the last row or a rectangle the grid's x/y swap would
reach; whether the output equals what a specific mistake would compute (an index swapped,
the K loop one short, the last partial tile dropped, shared tiles left stale); which shapes
pass. The grid is fixed by the grader, so no cause asks the learner to change it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.emu.report import Race

POISON_BITS = np.uint32(0x7FC0DEAD)  # the checker's marked NaN: no arithmetic produces it
RTOL = 1e-5  # per element, relative to sum_k |A_ik| |B_kj|; float32 sums land near 1e-7

CAUSES = ("never written", "swapped row/column", "partial tile dropped", "boundary", "race",
          "stale shared data", "off-by-one", "indexing")


@dataclass
class Attempt:
    """One launch at one shape: its inputs, output and the reference."""

    shape: Shape
    inputs: dict[str, np.ndarray]
    got: np.ndarray
    expected: np.ndarray
    bad: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # one of CAUSES
    advice: str

    def __str__(self) -> str:
        return f"{self.cause}: {self.advice}"


def telling(attempts: Sequence[Attempt], launch: Launch) -> Attempt:
    """The failing attempt that says most: partial tiles at least two elements thick after
    at least one whole tile in each dimension of the output (so an edge is told from a last
    row, and a swapped index from an edge), then rectangular, then the largest."""
    def score(a: Attempt) -> tuple[bool, bool, bool, bool, int]:
        (rows, cols), (tx, ty) = a.got.shape, launch.tile
        thick = rows > ty and cols > tx and rows % ty >= 2 and cols % tx >= 2
        # a size one past a multiple of 8 makes "the last tile" and "the last row" (or the
        # last term of a sum) the same elements: such a shape cannot tell them apart
        distinct = all(s % 8 != 1 for s in a.shape)
        partial = any(s % t for s, t in zip(a.got.shape, (ty, tx), strict=True)) or any(
            s % max(launch.tile) for s in a.shape)
        return (thick, distinct, partial, len(set(a.shape)) > 1, int(np.prod(a.shape)))

    return max((a for a in attempts if a.bad.any()), key=score)


# ---------------------------------------------------------------- what a mistake computes


def _matmul_models(a: Attempt, tile: int, tiled: bool) -> list[tuple[str, str, np.ndarray]]:
    A, B = a.inputs["A"].astype(np.float64), a.inputs["B"].astype(np.float64)
    M, K = A.shape
    N = B.shape[1]
    E = a.expected
    out = [
        ("swapped row/column",
         "C is stored column-major (C[col * M + row]); C is M x N row-major: "
         "C[row * N + col]", E.T.reshape(M, N)),
        ("swapped row/column",
         "the loads of A walk it column-major (A[k * M + row]); A is M x K row-major: "
         "A[row * K + k]", A.reshape(-1).reshape(K, M).T @ B),
        ("swapped row/column",
         "the loads of B walk it column-major (B[col * K + k]); B is K x N row-major: "
         "B[k * N + col]", A @ B.reshape(-1).reshape(N, K).T),
        ("off-by-one",
         "every sum misses its last term: the loop over k stops one short of K (k < K - 1, "
         "or a guard such as t + tx < K - 1)", A[:, : K - 1] @ B[: K - 1]),
    ]
    for t in sorted({tile, 8, 16, 32}, reverse=True):  # the K tile: the output's, or smaller
        if not tiled or not K % t:
            continue
        whole = K // t * t
        out.append(("partial tile dropped",
                    f"every sum misses its last {K % t} terms: the loop over tiles stops at "
                    "the last whole tile (t + TILE <= K, or K / TILE phases); run "
                    "(K + TILE - 1) / TILE phases and load 0 past the edge",
                    A[:, :whole] @ B[:whole]))
        if whole >= t:  # the last phase reuses the previous phase's tile where not loaded
            prev, extra = whole - t, K - whole
            stale = A @ B + A[:, prev + extra: prev + t] @ B[prev + extra: prev + t]
            out.append(("stale shared data",
                        "in the last, partial tile the threads outside the matrix skip their "
                        "load, so the product uses the previous tile's values still in shared "
                        "memory: store 0.0f there instead (a ? b : 0.0f), in every phase",
                        stale))
    return out


def _transpose_models(a: Attempt) -> list[tuple[str, str, np.ndarray]]:
    x = a.inputs["in"].astype(np.float64)
    rows, cols = x.shape
    Y, X = np.indices((cols, rows))  # out[Y][X] should be in[X][Y]

    def gather(r: np.ndarray, c: np.ndarray) -> np.ndarray:
        ok = (r < rows) & (c < cols)
        return np.where(ok, x[np.minimum(r, rows - 1), np.minimum(c, cols - 1)], np.nan)

    return [
        ("swapped row/column",
         "out is written in the input's layout (out[row * cols + col]); out is cols x rows: "
         "out[col * rows + row]", x.reshape(-1).reshape(cols, rows)),
        ("swapped row/column",
         "the tile is read back untransposed (tile[threadIdx.y + j][threadIdx.x]); read "
         "tile[threadIdx.x][threadIdx.y + j] so each block's tile is transposed too",
         gather((X // 32) * 32 + Y % 32, (Y // 32) * 32 + X % 32)),
        ("swapped row/column",
         "the write does not swap the block indices: the tile read at block (bx, by) must be "
         "written at block (by, bx) (x = blockIdx.y * TILE + threadIdx.x, y = blockIdx.x * "
         "TILE + threadIdx.y)", gather((Y // 32) * 32 + X % 32, (X // 32) * 32 + Y % 32)),
    ]


def _matches(a: Attempt, problem: Problem, pred: np.ndarray) -> bool:
    """Whether the wrong, written elements are what ``pred`` says (and most are defined)."""
    got = a.got.astype(np.float64)
    bad_written = a.bad & ~np.isnan(a.got)
    if pred.shape != got.shape or not bad_written.any():
        return False
    defined = bad_written & np.isfinite(pred)
    if defined.sum() < max(1, bad_written.sum() // 2):
        return False
    if problem.exact:
        close = got == pred
    else:
        scale = problem.error_bound(a.inputs) + np.finfo(np.float32).tiny
        close = np.abs(got - np.nan_to_num(pred)) <= 10 * RTOL * scale
    return bool(close[defined].mean() >= 0.99) and bool(close[np.isfinite(pred)
                                                             & ~np.isnan(a.got)].mean() >= 0.99)


# ---------------------------------------------------------------- where the wrong ones are


def _edge(shape: tuple[int, int], launch: Launch) -> np.ndarray:
    rows, cols = shape
    edge = np.zeros(shape, bool)
    edge[(rows // launch.tile[1]) * launch.tile[1]:, :] = True
    edge[:, (cols // launch.tile[0]) * launch.tile[0]:] = True
    return edge


def _last_lines(mask: np.ndarray) -> bool:
    """``mask`` is exactly the last row, the last column, or both."""
    rows, cols = mask.shape
    for want in ((rows - 1, None), (None, cols - 1), (rows - 1, cols - 1)):
        m = np.zeros_like(mask)
        if want[0] is not None:
            m[want[0], :] = True
        if want[1] is not None:
            m[:, want[1]] = True
        if np.array_equal(m, mask) and not m.all():
            return True
    return False


def _swapped_reach(a: Attempt, problem: Problem, launch: Launch) -> np.ndarray:
    """The elements a kernel with its row and column swapped reaches: x covers rows."""
    rows, cols = a.got.shape
    gx, gy = launch.grid(problem.sizes(a.shape))
    reach = np.zeros((rows, cols), bool)
    reach[: min(rows, gx * launch.tile[0]), : min(cols, gy * launch.tile[1])] = True
    return reach


def _swapped_fits(a: Attempt, problem: Problem, launch: Launch) -> bool:
    """Exactly the elements a row/column-swapped kernel reaches are written, all right."""
    written = a.got.view(np.uint32) != POISON_BITS
    reach = _swapped_reach(a, problem, launch)
    return not reach.all() and np.array_equal(written, reach) and not a.bad[written].any()


def diagnose(problem: Problem, launch: Launch, a: Attempt, *, tiled: bool = False,
             races: Sequence[Race] | None = None, rerun_differs: bool = False,
             passed: Sequence[Shape] = (), failed: Sequence[Attempt] = ()) -> Diagnosis:
    """The cause of ``a``'s wrong elements. ``races``: what the emulator's analysis found
    (None: not run); ``passed``: the shapes that pass; ``failed``: every failing attempt."""
    unwritten = a.got.view(np.uint32) == POISON_BITS
    bad = a.bad
    edge = _edge(a.got.shape, launch)
    what = problem.output
    if rerun_differs:
        return Diagnosis("race", "two runs on the same inputs gave different results: a "
                         "thread reads shared memory another thread has not finished writing "
                         "(or overwrites it too early); check both __syncthreads() calls.")
    if races:
        return race_diagnosis(races)
    if unwritten[bad].all():
        if unwritten.all():
            return Diagnosis("never written", f"no element of {what} was stored: is the "
                             "store missing, or behind a condition no thread meets?")
        if _last_lines(unwritten):
            return Diagnosis("off-by-one", f"only the last row or column of {what} was never "
                             "written: a guard stops one short (row < M - 1, or col + 1 < N); "
                             "guard with row < M && col < N.")
        if all(_swapped_fits(f, problem, launch) for f in (a, *failed)):
            return Diagnosis("swapped row/column", "the row comes from the x index "
                             "(blockIdx.x, threadIdx.x), but the grid's x covers the columns "
                             f"of {what} (the launch is fixed by the grader): with a "
                             "rectangular shape part of the output is never reached. Take "
                             "the column from x and the row from y.")
        if edge[unwritten].all():
            return Diagnosis("boundary", f"the elements of {what} in the last, partial tiles "
                             "were never written: the grid covers them, so the threads there "
                             "returned early or a guard works in whole tiles. Let every "
                             "thread take part and guard only the store, with row < M && "
                             "col < N.")
        return Diagnosis("never written", f"{int(unwritten.sum())} elements of {what} kept "
                         "the poison value, inside the matrix too: check that every thread "
                         "computes and stores its own element (the store's index formula).")
    if problem.name == "matmul":
        models = _matmul_models(a, launch.tile[0], tiled)
    elif problem.name == "transpose":
        models = _transpose_models(a)
    else:
        models = []
    for cause, advice, pred in models:
        if _matches(a, problem, pred):
            return Diagnosis(cause, advice)
    computed_nan = np.isnan(a.got) & ~unwritten
    if computed_nan[bad].any():
        if tiled and races is not None:
            return Diagnosis("stale shared data", "a value read from shared memory was never "
                             "written in this block (the emulator fills shared memory with "
                             "NaN), and the analysis found no race: some threads skip storing "
                             "their tile element (outside the matrix?) instead of storing "
                             "0.0f, or read an element no thread stores.")
        return Diagnosis("stale shared data" if tiled else "indexing",
                         "NaN computed: a value was read that nothing wrote: shared memory "
                         "read before the tile was complete or never loaded, or an element "
                         "of the output read back.")
    if _last_lines(bad):
        return Diagnosis("off-by-one", f"only the last row or column of {what} is wrong: a "
                         "bound stops one short or runs one past (< versus <=).")
    partial_only = bool(failed) and bool(passed) and all(
        any(s % t for s, t in zip(f.shape, _tiles(problem, launch), strict=True))
        for f in failed)
    if (edge.any() and edge[bad].all()) or partial_only:
        return Diagnosis("stale shared data" if tiled and edge[bad].all() else "boundary",
                         "only elements in the last, partial tiles are wrong (shapes that are "
                         "multiples of the tile pass): loads outside the matrix must "
                         "contribute 0 (guard each load, not only the store, and store 0.0f "
                         "in the tile where there is no element).")
    share = 100.0 * bad.sum() / bad.size
    return Diagnosis("indexing", f"{share:.0f}% of {what} is wrong, inside the matrix too, and "
                     "no race was found: check the row and column formulas and each index "
                     f"expression ({_index_hint(problem)}).")


def race_diagnosis(races: Sequence[Race]) -> Diagnosis:
    """One race and the one barrier that orders them all: ``__syncthreads()`` when any race
    is between threads of different warps (it orders the lanes of a warp too),
    ``__syncwarp()`` only when every race is confined to one warp."""
    cross = [r for r in races if not r.same_warp]
    shown = (cross or list(races))[0]
    return Diagnosis("race", f"the emulator's analysis found {shown.describe(fix=False)}; "
                     f"{shown.fix}.")


def _tiles(problem: Problem, launch: Launch) -> tuple[int, ...]:
    """The tile each shape dimension is cut into (the K tile is the x tile)."""
    gx, gy = launch.grid_dims
    return tuple(launch.tile[0] if d == gx else launch.tile[1] if d == gy else launch.tile[0]
                 for d in problem.dims)


def _index_hint(problem: Problem) -> str:
    hints: dict[str, Callable[[], str]] = {
        "matmul": lambda: "A[row * K + k], B[k * N + col], C[row * N + col]",
        "transpose": lambda: "in[row * cols + col], out[col * rows + row]",
    }
    return hints.get(problem.name, lambda: "row-major: element [i][j] at i * width + j")()
