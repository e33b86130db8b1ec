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

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.emu.report import Race
from tilelab.grading import race_shapes
from tilelab.grading.budget import emu_launch_seconds
from tilelab.grading.kernel_lines import Kernel

POISON_BITS = np.uint32(0x7FC0DEAD)  # the checker's marked NaN: no arithmetic produces it
RTOL = 1e-5  # per element, relative to sum_k |A_ik| |B_kj|; float32 sums land near 1e-7

CAUSES = ("never written", "never initialised", "swapped row/column", "partial tile dropped",
          "boundary", "out of bounds", "race", "stale shared data", "off-by-one", "missing term",
          "one term only", "accumulator reset", "start value", "int truncation", "zeros stored",
          "tile index", "misplaced rows", "loop stops early", "timed out", "wrong index",
          "indexing")
CAUSES += race_shapes.CAUSES


@dataclass
class Attempt:
    """One launch at one shape: its inputs, output and the reference."""

    shape: Shape
    inputs: dict[str, np.ndarray]
    got: np.ndarray
    expected: np.ndarray
    bad: np.ndarray = field(repr=False)
    _scale: np.ndarray | None = field(default=None, repr=False, compare=False)

    def scale(self, problem: Problem) -> np.ndarray:
        """Each element's error scale (:meth:`Problem.error_bound`), computed once."""
        if self._scale is None:
            self._scale = problem.error_bound(self.inputs) + np.finfo(np.float32).tiny
        return self._scale


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


def _matmul_models(a: Attempt, launch: Launch, tiled: bool,
                   kern: Kernel) -> Iterator[tuple[str, str, np.ndarray]]:
    """What each mistake computes, each computed only when the ones before did not match."""
    A, B = a.inputs["A"].astype(np.float64), a.inputs["B"].astype(np.float64)
    M, K = A.shape
    N = B.shape[1]
    E = a.expected
    tile = launch.tile[0]
    loop = kern.k_loop() or kern.loop_before(kern.product() or kern.read("A"))
    yield ("swapped row/column",
           "C is stored column-major (C[col * M + row]); C is M x N row-major: "
           "C[row * N + col]" + kern.at(kern.store("C")), E.T.reshape(M, N))
    yield ("swapped row/column",
           "the loads of A walk it column-major (A[k * M + row]); A is M x K row-major: "
           "A[row * K + k]", A.reshape(-1).reshape(K, M).T @ B)
    yield ("swapped row/column",
           "the loads of B walk it column-major (B[col * K + k]); B is K x N row-major: "
           "B[k * N + col]", A @ B.reshape(-1).reshape(N, K).T)
    yield ("off-by-one",
           "every sum misses its last term: the loop over k stops one short of K (k < K - 1, "
           "or a guard such as t + tx < K - 1)" + kern.at(loop), A[:, : K - 1] @ B[: K - 1])
    for t in sorted({tile, 8, 16, 32}, reverse=True):  # the K tile: the output's, or smaller
        if not tiled or not K % t:
            continue
        whole = K // t * t
        yield ("partial tile dropped",
               f"every sum misses its last {K % t} terms: the loop over tiles stops at "
               "the last whole tile (t + TILE <= K, or K / TILE phases); run "
               "(K + TILE - 1) / TILE phases and load 0 past the edge" + kern.at(kern.find(
                   r"\bfor\s*\(")), A[:, :whole] @ B[:whole])
        if whole >= t:  # the last phase reuses the previous phase's tile where not loaded
            prev, extra = whole - t, K - whole
            stale = A @ B + A[:, prev + extra: prev + t] @ B[prev + extra: prev + t]
            yield ("stale shared data",
                   "in the last, partial tile the threads outside the matrix skip their "
                   "load, so the product uses the previous tile's values still in shared "
                   "memory: store 0.0f there instead (a ? b : 0.0f), in every phase"
                   + kern.at(kern.load("A")), stale)
    yield ("missing term",
           "every sum misses its first term (k = 0): the loop over k starts at 1; start it at "
           "0" + kern.at(kern.find(r"\bfor\s*\(\s*(int\s+)?\w+\s*=\s*1\s*;") or loop),
           A[:, 1:] @ B[1:])
    yield ("one term only",
           "each element holds a single product, A[row][K-1] * B[K-1][col]: the product is "
           "assigned (acc = a * b) instead of added (acc += a * b)"
           + kern.at(kern.find(r"[^+\-*/=!<>]=[^=][^;]*\]\s*\*\s*\w+\s*\[") or kern.product()),
           np.outer(A[:, K - 1], B[K - 1]))
    k = np.arange(K)
    for t in sorted({tile, 8, 16, 32}):  # a loop over one tile's k that skips a term
        if t >= K:
            continue
        for skipped, how in ((k % t == t - 1, f"stops one short of the step ({t} - 1)"),
                             (k % t == 0, "starts at 1")):
            which = ", ".join(str(int(x)) for x in k[skipped][:2])
            yield ("missing term",
                   f"every sum misses one term in each step of {t} along k (k = {which}, "
                   f"...): the loop over the tile's k {how}; it must run over all "
                   f"{t}" + kern.at(loop), A[:, ~skipped] @ B[~skipped])
        if lo := (K - 1) // t * t:
            reset = kern.find(r"\b\w+\s*=\s*0(\.0*)?f?\s*;", kern.find(r"\bfor\s*\(") or 1)
            yield ("accumulator reset",
                   f"each element holds only the last step's sum (k = {lo}..{K - 1}): the "
                   "accumulator is set to 0 inside the loop over the tiles; set it once, "
                   "before the loop" + kern.at(reset), A[:, lo:] @ B[lo:])
    if tiled and tuple(launch.block[:2]) == tuple(launch.tile):
        yield from _tile_index_models(A, B, tile, kern)


def _tile_index_models(A: np.ndarray, B: np.ndarray, T: int,
                       kern: Kernel) -> list[tuple[str, str, np.ndarray]]:
    """What a square-tiled kernel (one thread per element of C, TILE = T) computes with one
    tile index wrong: a tile loaded without its offset along K, or read transposed."""
    M, K = A.shape
    N = B.shape[1]
    Mp, Kp, Np = (-(-x // T) * T for x in (M, K, N))
    Ap = np.zeros((Mp, Kp))
    Ap[:M, :K] = A
    Bp = np.zeros((Kp, Np))
    Bp[:K, :N] = B
    steps = range(0, Kp, T)
    first_a = sum((np.where(t + np.arange(T) < K, 1.0, 0.0) * Ap[:, :T]) @ Bp[t:t + T]
                  for t in steps)
    first_b = sum(Ap[:, t:t + T] @ (np.where(t + np.arange(T) < K, 1.0, 0.0)[:, None]
                                    * Bp[:T]) for t in steps)
    r, c, k = np.arange(Mp), np.arange(Np), np.arange(T)
    a_t = sum(Ap[(r // T * T)[:, None] + k[None, :], t + (r % T)[:, None]] @ Bp[t:t + T]
              for t in steps)
    b_t = sum(Ap[:, t:t + T] @ Bp[t + (c % T)[None, :], (c // T * T)[None, :] + k[:, None]]
              for t in steps)
    read_a, read_b = kern.read("A") or kern.product(), kern.read("B") or kern.product()
    return [
        ("tile index", "every phase loads the first tile of A: the load's column lacks the "
         "tile's offset along K (A[row * K + t + tx])" + kern.at(kern.load("A")),
         first_a[:M, :N]),
        ("tile index", "every phase loads the first tile of B: the load's row lacks the "
         "tile's offset along K (B[(t + ty) * N + col])" + kern.at(kern.load("B")),
         first_b[:M, :N]),
        ("tile index", "the product reads A's tile transposed: this thread's row of the tile "
         "is indexed by k, its column by the thread's row (read the element the load stored "
         "for row ty and column k of the tile)" + kern.at(read_a), a_t[:M, :N]),
        ("tile index", "the product reads B's tile transposed: this thread's column of the "
         "tile is indexed by k, its row by the thread's column (read the element the load "
         "stored for row k and column tx of the tile)" + kern.at(read_b), b_t[:M, :N]),
    ]


def _transpose_models(a: Attempt, kern: Kernel) -> list[tuple[str, str, np.ndarray]]:
    x = a.inputs["in"].astype(np.float64)
    rows, cols = x.shape
    Y, X = np.indices((cols, rows))  # out[Y][X] should be in[X][Y]
    store = kern.store("out")
    swap = kern.find(r"=\s*blockIdx\.", (kern.load("in") or 0) + 1)

    def gather(r: np.ndarray, c: np.ndarray) -> np.ndarray:
        ok = (r < rows) & (c < cols)
        return np.where(ok, x[np.minimum(r, rows - 1), np.minimum(c, cols - 1)], np.nan)

    return [
        ("swapped row/column",
         "out is written in the input's layout (out[row * cols + col]); out is cols x rows: "
         "out[col * rows + row]" + kern.at(store), x.reshape(-1).reshape(cols, rows)),
        ("swapped row/column",
         "the tile is read back untransposed (tile[threadIdx.y + j][threadIdx.x]); read "
         "tile[threadIdx.x][threadIdx.y + j] so each block's tile is transposed too"
         + kern.at(kern.read("in") or store),
         gather((X // 32) * 32 + Y % 32, (Y // 32) * 32 + X % 32)),
        ("swapped row/column",
         "the write does not swap the block indices: the tile read at block (bx, by) must be "
         "written at block (by, bx) (x = blockIdx.y * TILE + threadIdx.x, y = blockIdx.x * "
         "TILE + threadIdx.y)" + kern.at(swap),
         gather((Y // 32) * 32 + X % 32, (X // 32) * 32 + Y % 32)),
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
        close = np.abs(got - np.nan_to_num(pred)) <= 10 * RTOL * a.scale(problem)
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
             passed: Sequence[Shape] = (), failed: Sequence[Attempt] = (),
             source: str = "", quick: bool = False) -> Diagnosis:
    """The cause of ``a``'s wrong elements. ``races``: what the emulator's analysis found
    (None: not run); ``passed``: the shapes that pass; ``failed``: every failing attempt;
    ``source``: the kernel (to name the line of a cause; "" names none); ``quick``: skip
    what each mistake would compute (a first word on one shape, before the telling one's)."""
    unwritten = a.got.view(np.uint32) == POISON_BITS
    bad = a.bad
    edge = _edge(a.got.shape, launch)
    what = problem.output
    kern = Kernel(source)
    store = kern.store(what)
    if rerun_differs:
        return Diagnosis("race", "two runs on the same inputs gave different results: a "
                         "thread reads shared memory another thread has not finished writing "
                         "(or overwrites it too early); check both __syncthreads() calls.")
    if races:
        return race_diagnosis(races, source, bool((np.isnan(a.got) & ~unwritten).any()))
    if unwritten[bad].all():
        adds = kern.find(rf"\b{what}\s*\[[^;=]*\]\s*\+=")
        if adds:
            return Diagnosis("never initialised", f"{what} is added to (+=) but never set: "
                             f"before the launch {what} holds NaN (the grader fills it so), and "
                             "NaN plus anything stays NaN. Sum in a local variable that starts "
                             f"at 0.0f and store it once{kern.at(adds)}.")
        if unwritten.all():
            return Diagnosis("never written", f"no element of {what} was stored: is the "
                             "store missing, or behind a condition no thread meets?"
                             + kern.at(kern.guard_before(store) or store))
        if _last_lines(unwritten):
            return Diagnosis("off-by-one", f"only the last row or column of {what} was never "
                             "written: a guard stops one short (row < M - 1, or col + 1 < N); "
                             "guard with row < M && col < N" + kern.at(kern.guard_before(store))
                             + ".")
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
                             "col < N" + kern.at(kern.guard_before(store)) + ".")
        if stripe := _stripe(unwritten, launch):
            return Diagnosis("loop stops early", f"in each tile of {what} only {stripe} were "
                             "stored: the loop that stores the tile's rows stops early (it "
                             "must step over the whole tile, e.g. j = 0, 8, ..., 24 for a "
                             "32-row tile and 8 rows of threads)" + kern.at(kern.loop_before(store))
                             + ".")
        return Diagnosis("never written", f"{int(unwritten.sum())} elements of {what} kept "
                         "the poison value, inside the matrix too: check that every thread "
                         "computes and stores its own element (the store's index formula"
                         + kern.at(store) + ").")
    if quick:
        models: Iterable[tuple[str, str, np.ndarray]] = ()
    elif problem.name == "matmul":
        models = _matmul_models(a, launch, tiled, kern)
    elif problem.name == "transpose":
        models = _transpose_models(a, kern)
    else:
        models = ()
    for cause, advice, pred in models:
        if _matches(a, problem, pred):
            return Diagnosis(cause, advice)
    if (why := _value_fault(a, problem, kern)) is not None:
        return why
    computed_nan = np.isnan(a.got) & ~unwritten
    if computed_nan[bad].any():
        first = problem.arg_order[0]
        if tiled and (stripe := _stripe(computed_nan, launch)):
            return Diagnosis("loop stops early", f"in each tile of {what} only {stripe} hold "
                             "values; the others read shared memory no thread wrote (the "
                             "emulator fills it with NaN): the loop that loads the tile's rows "
                             "stops early (it must step over the whole tile)"
                             + kern.at(kern.loop_before(kern.load(first))) + ".")
        if tiled and races is not None:
            return Diagnosis("stale shared data", "a value read from shared memory was never "
                             "written in this block (the emulator fills shared memory with "
                             "NaN), and the analysis found no race: some threads skip storing "
                             "their tile element (outside the matrix?) instead of storing "
                             "0.0f, or the tile is read where no thread stores: compare the "
                             "index of the tile's load" + kern.at(kern.load(first))
                             + " with that of its read" + kern.at(kern.read(first)) + ".")
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
    if (moved := _misplaced(a)) is not None:
        first, second = problem.arg_order[:2]
        read = kern.read(first if moved == "rows" else second)
        return Diagnosis("misplaced rows", f"each {moved[:-1]} of {what} holds the right "
                         f"values of another {moved[:-1]}: the {moved} a thread computes and "
                         f"the {moved} it stores differ; compare the index of the tile's read"
                         + kern.at(read) + " with that of the store" + kern.at(store) + ".")
    share = 100.0 * bad.sum() / bad.size
    return Diagnosis("indexing", f"{share:.0f}% of {what} is wrong, inside the matrix too, and "
                     "no race was found: check the row and column formulas and each index "
                     f"expression ({_index_hint(problem, tiled)}).")


def _stripe(mask: np.ndarray, launch: Launch) -> str | None:
    """Which rows (or columns) of each whole tile ``mask`` leaves out, when it depends on
    the row's (or the column's) place in its tile alone, e.g. "rows 0-7 of 32"."""
    t = max(launch.tile)
    rows, cols = mask.shape
    inner = mask[: rows // t * t, : cols // t * t]
    if inner.size == 0:
        return None
    for axis, name in ((0, "rows"), (1, "columns")):
        lines = inner if axis == 0 else inner.T
        per = lines.reshape(-1, t, lines.shape[1]).transpose(1, 0, 2).reshape(t, -1)
        full, none = per.all(axis=1), ~per.any(axis=1)
        if (full | none).all() and full.any() and none.any():
            kept = np.flatnonzero(none)
            span = (f"{kept[0]}-{kept[-1]}" if len(kept) == kept[-1] - kept[0] + 1
                    else ", ".join(map(str, kept)))
            return f"{name} {span} of {t}"
    return None


def _value_fault(a: Attempt, problem: Problem, kern: Kernel) -> Diagnosis | None:
    """A fault in the values themselves: every wrong element 0 (stored before it was
    computed, or through an int), truncated to a whole number (an int on the way: the
    values equal the answer's truncation, or the kernel has such an int), or off by one
    constant (the sum started from it)."""
    bad = a.bad & np.isfinite(a.got)
    if not bad.any() or bad.sum() < a.bad.size // 2:  # it marks most of the output
        return None
    got, want = a.got[bad].astype(np.float64), a.expected[bad]
    what, held = problem.output, _int_holder(kern, problem.output)
    fractions = not np.array_equal(want, np.round(want))
    if np.mean(got == 0) >= 0.99:  # unwritten elements hold NaN: these 0s were stored
        if fractions and held:  # the inputs lie in [-1, 1): an int truncates each to 0
            return Diagnosis("int truncation", f"every wrong element of {what} is 0: a "
                             "variable or shared array the values pass through is an integer, "
                             "and each value put into it is smaller than 1 here (the inputs "
                             "lie between -1 and 1), so it truncates to 0; declare it float"
                             + kern.at(held) + ".")
        loop = kern.k_loop() or kern.loop_before(kern.product()
                                                 or kern.find(r"^(?!for\b).*\+="))
        return Diagnosis("zeros stored", f"every wrong element of {what} is exactly 0 (one "
                         "never written would hold NaN), so the kernel stored 0 there: the "
                         "value was stored before it was computed (a sum before the loop that "
                         "accumulates it), or that loop never ran or never added to it; "
                         "check where the store is"
                         + kern.at(kern.store(what)) + " and the loop's bound" + kern.at(loop)
                         + ("" if kern.lines else " (or, failing those, a variable the values "
                            "pass through is an int, which truncates each to 0)") + ".")
    if fractions and np.array_equal(got, np.trunc(got)) and (
            held or np.mean(got == np.trunc(want)) >= 0.9):
        line = held or kern.find(r"^\s*(unsigned\s+)?(int|long|short)\s+\w+\s*(=\s*0\s*)?;")
        return Diagnosis("int truncation", f"the values of {what} lost their "
                         "fractions (whole numbers where the answer has decimals): a variable "
                         "or shared array they pass through is an integer; declare it float"
                         + kern.at(line) + ".")
    diff = got - want
    c = float(np.median(diff))
    scale = a.scale(problem)[bad]
    if c and np.all(np.abs(diff - c) <= 10 * RTOL * scale + 1e-6 * abs(c)):
        lit = re.compile(rf"=\s*{re.escape(f'{c:g}')}(\.0*)?f?\s*;")
        return Diagnosis("start value", f"every wrong element is off by {c:g}: the sum starts "
                         f"at {c:g}; start it at 0.0f" + kern.at(kern.find(lit)) + ".")
    return None


_INT = r"(?:unsigned\s+)?(?:int|long|short|char)"


def _int_holder(kern: Kernel, output: str) -> int | None:
    """The line of an integer the values pass through: a shared array of ints, a cast to
    one in an assignment, or a local int set from an array element (``sum += A[..] * ..``,
    ``int v = in[..]``) or stored to ``output``; None where the kernel has none."""
    line = kern.find(rf"__shared__\s+(?:const\s+)?{_INT}\b") or kern.find(
        rf"^(?=.*\w\s*\[).*[^=!<>]=[^=].*\(\s*{_INT}\s*\)")  # x = (int)..., with an array
    if line:
        return line
    store = kern.store(output)
    value = re.split(r"\]\s*[+-]?=", kern.lines[store - 1], maxsplit=1)[-1] if store else ""
    for n, code in enumerate(kern.lines, 1):
        m = re.match(rf"(?:const\s+)?{_INT}\s+(\w+)\s*(?:=([^;]*))?;", code)
        if m and ("[" in (m.group(2) or "") or re.search(rf"\b{m.group(1)}\b", value)
                  or kern.find(rf"\b{m.group(1)}\s*[+\-*]?=[^=][^;]*\w\s*\[", n + 1)):
            return n
    return None


def _misplaced(a: Attempt) -> str | None:
    """"rows" when each row of the output holds the right values of another row (a row
    computed by one thread, stored by another); "columns" likewise; else None."""
    got, want = a.got.astype(np.float64), a.expected
    if not np.isfinite(got).all() or min(got.shape) < 2:
        return None
    for name, g, w in (("rows", got, want), ("columns", got.T, want.T)):
        rng = np.random.default_rng(0)
        v = rng.standard_normal(g.shape[1])
        key_w = w @ v
        order = np.argsort(key_w)
        pos = np.clip(np.searchsorted(key_w[order], g @ v), 0, len(order) - 1)
        near = order[pos]
        near_lo = order[np.maximum(pos - 1, 0)]
        scale = np.abs(w).max() * 1e-4 + 1e-12
        ok = (np.abs(g - w[near]).max(axis=1) <= scale) | (
            np.abs(g - w[near_lo]).max(axis=1) <= scale)
        moved = (near != np.arange(len(g))) & (near_lo != np.arange(len(g)))
        if ok.mean() >= 0.9 and moved.any():
            return name
    return None


def launch_failure(problem: Problem, launch: Launch, shape: Shape, exc: BaseException,
                   source: str = "") -> Diagnosis | None:
    """Why a launch failed, where the error itself does not say it all: an access out of
    bounds (:func:`out_of_bounds`), or a kernel stopped at the emulator's time limit."""
    if type(exc).__name__ == "KernelTimeout":
        kern, limit = Kernel(source), emu_launch_seconds(problem, shape)
        allowed = f"{limit:g} s" if limit else "the time limit"
        return Diagnosis("timed out", f"at this shape the grader allows {allowed}, many times "
                         "what the course's kernels need there: a loop never ends (its counter "
                         "does not advance, or its condition never becomes false), or a thread "
                         "waits for a value another thread never sets"
                         + kern.at(kern.stuck_loop()) + ".")
    return out_of_bounds(problem, launch, shape, exc, source)


def out_of_bounds(problem: Problem, launch: Launch, shape: Shape, exc: BaseException,
                  source: str = "") -> Diagnosis | None:
    """Why a launch read or wrote past the end of a global buffer, told from the thread
    that did it: outside the output (its guard let it through), or inside (an index, or a
    loop over k, is wrong). None when the error is of another kind or the launch does not
    give each thread a place in the output."""
    buf, idx, line = (getattr(exc, k, None) for k in ("buffer", "index", "line"))
    block, thread = getattr(exc, "block", None), getattr(exc, "thread", None)
    if buf not in problem.arg_order or idx is None or not block or not thread:
        return None
    kern, out = Kernel(source), problem.output
    rows, cols = problem.output_shape(shape)
    sizes = problem.sizes(shape)
    (bx, by), (tx, ty) = block[:2], thread[:2]
    if tuple(launch.block[:2]) == tuple(launch.tile):  # one thread per element of out
        row, col = by * launch.tile[1] + ty, bx * launch.tile[0] + tx
    elif problem.name == "transpose":  # a column of a 32 x 32 tile per thread
        if buf == out:
            row, col = bx * 32 + ty, by * 32 + tx
        else:
            row, col, rows, cols = by * 32 + ty, bx * 32 + tx, sizes["rows"], sizes["cols"]
    else:
        return None
    who = f"thread {tuple(thread)} of block {tuple(block)}"
    place = f"{buf if problem.name == 'transpose' else out}[{row}][{col}]"
    if problem.name == "matmul" and buf in ("A", "B"):  # every thread of a tiled kernel loads
        K, N = sizes["K"], sizes["N"]
        k = idx - row * K if buf == "A" else (idx - col) // N if (idx - col) % N == 0 else -1
        if k >= K and kern.shared:
            return Diagnosis("out of bounds", f"{who} loads {buf}[{idx}]: k = {k} along K, "
                             f"past K - 1 = {K - 1}. A tile's load must stay below K, and its "
                             "guard must test the very index it loads (t + tx < K for "
                             "A[row * K + t + tx], t + ty < K for B[(t + ty) * N + col])"
                             + kern.at(kern.guard_before(line)) + ".")
        if k >= K:
            return Diagnosis("out of bounds", f"{who} stands for {place}, inside {out}, and "
                             f"reached {buf}[{idx}] with k = {k}: the loop over k runs past "
                             "K - 1 (k < K)" + kern.at(kern.loop_before(line)) + ".")
    if row >= rows or col >= cols:
        guard = kern.guard_before(line)
        return Diagnosis("out of bounds", f"{who} stands for {place}, outside the matrix "
                         f"({rows} x {cols} at this shape), and its access on line {line} ran "
                         "past the end of " + buf + ": "
                         + (f"the guard{kern.at(guard)} lets it through; a guard must hold "
                            "only inside the matrix (every bound tested, joined with &&)"
                            if guard else "no guard stops it: put the access under a test "
                            "that holds only inside the matrix") + ".")
    layout = {"A": "A[row * K + k]", "B": "B[k * N + col]", "C": "C[row * N + col]",
              "in": "in[row * cols + col]", "out": "out[col * rows + row]"}
    return Diagnosis("out of bounds", f"{who} stands for an element inside the matrix "
                     f"({place} at this shape), so its guard rightly let it "
                     f"through, yet line {line} reaches {buf}[{idx}], past the end: the index "
                     f"expression is wrong ({buf} is row-major: {layout.get(buf, buf)})"
                     + kern.at(line) + ".")


def race_diagnosis(races: Sequence[Race], source: str = "", nan_read: bool = False
                   ) -> Diagnosis:
    """The race that tells the mistake and the fix its shape needs (:mod:`race_shapes`):
    ``nan_read``, the output holds NaN computed from a value nobody wrote."""
    shape = race_shapes.classify(races, source, nan_read)
    return Diagnosis(shape.cause, shape.message() + ".")


def _tiles(problem: Problem, launch: Launch) -> tuple[int, ...]:
    """The tile each shape dimension is cut into (the K tile is the x tile)."""
    gx, gy = launch.grid_dims
    return tuple(launch.tile[0] if d == gx else launch.tile[1] if d == gy else launch.tile[0]
                 for d in problem.dims)


def _index_hint(problem: Problem, tiled: bool = False) -> str:
    if problem.name == "matmul" and tiled:
        return ("a tile's load takes A[row * K + t + tx] and B[(t + ty) * N + col], its read "
                "in the product takes row ty of A's tile and column tx of B's, and the store "
                "C[row * N + col]")
    hints: dict[str, Callable[[], str]] = {
        "matmul": lambda: "A[row * K + k], B[k * N + col], C[row * N + col]",
        "transpose": lambda: "in[row * cols + col], out[col * rows + row]",
    }
    return hints.get(problem.name, lambda: "row-major: element [i][j] at i * width + j")()
