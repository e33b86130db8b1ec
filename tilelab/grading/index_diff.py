"""A wrong kernel set against the reference, thread by thread, from what each one touched.

The learner's kernel and the exercise's reference run on the emulator's analysis build at
one failing shape, on the same inputs, with every global access of one block logged (which
thread, which line, which buffer and element, read or write: ``trace_block``, see
``prelude/tilelab_emu_touch.h``). The block is the one that owns the first wrong element.
The first difference that matters is explained in the terms of the matrices:

- an element the reference's thread stores and the learner's does not (the condition or
  loop of the learner's store line kept it out), or stores elsewhere (the store's index,
  decoded into rows, columns and strides);
- a load whose element differs from the reference's, decoded into row stride, layout and
  offset (B indexed with stride K where its rows are N apart is a stride, not a range);
- elements of an input the block should load and does not (the load's guard kept them out).

Where loads and stores agree and only the values differ, the values' own path is at fault
(:mod:`tilelab.grading.value_path`). Nothing here names a cause the log does not show.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tilelab.catalog.exercises import Exercise
from tilelab.device.backend import Backend
from tilelab.device.runtime import get_runtime
from tilelab.grading.diagnosis import Attempt, Diagnosis
from tilelab.grading.kernel_lines import Kernel
from tilelab.grading.value_path import accumulator_fault, condition_values, variable_fault

READ, WRITE = 1, 2


@dataclass(frozen=True)
class Access:
    """One global access of a traced thread: its linear index in the block, the line, the
    parameter (its index in the kernel's signature), read or write, and the element."""

    thread: int
    line: int
    param: int
    kind: int
    elem: int
    block: int = 0  # linear; an access outside its buffer may come from any block


@dataclass
class Trace:
    """What one block's threads touched at one shape, and the output it left."""

    accesses: list[Access]
    dropped: int
    block: int
    failed: bool = False  # the launch stopped at a fault: the log ends there

    def by_thread(self, param: int, kind: int) -> dict[int, list[Access]]:
        """The traced block's accesses of ``param`` of this kind, per thread, in order."""
        out: dict[int, list[Access]] = defaultdict(list)
        for a in self.accesses:
            if a.param == param and a.kind & kind and a.block == self.block:
                out[a.thread].append(a)
        return out


def owner_block(ex: Exercise, shape: Sequence[int], row: int, col: int) -> int:
    """The linear index of the block that stores output element (row, col) in the course's
    launch: the block over its tile (a transpose's block is over the input's tile)."""
    launch, problem = ex.launch, ex.problem
    gx, _ = launch.grid(problem.sizes(tuple(shape)))
    tx, ty = launch.tile
    if problem.name == "transpose":
        bx, by = row // tx, col // ty
    elif problem.output_shape(tuple(shape))[1] == gx and launch.block[1] == 1:
        bx, by = col, 0  # one output per block (a reduction)
    else:
        bx, by = col // tx, row // ty
    return bx + gx * by


def run_traced(ex: Exercise, source: str, shape: Sequence[int],
               inputs: dict[str, np.ndarray], block: int) -> Trace | None:
    """``source``'s analysis build launched at ``shape`` on ``inputs`` (output poisoned
    with NaN), block ``block`` logged; a launch that fails keeps its log up to the
    failure (``failed``). None where it does not build or left no log."""
    try:
        rt = get_runtime(Backend.EMU)
        fn = rt.SourceModule(source, analysis=True).get_function(ex.kernel)
    except Exception:  # no emulator here, no build, no such kernel: the explanation goes
        return None  # without (never the grade)
    problem = ex.problem
    shape = tuple(shape)
    bufs = {n: rt.to_device(np.ascontiguousarray(a)) for n, a in inputs.items()}
    bufs[problem.output] = rt.to_device(np.full(problem.output_shape(shape), np.nan,
                                                np.float32))
    failed = False
    fn.last_report = None
    try:
        fn(*problem.arguments(bufs, shape), block=ex.launch.block,
                 grid=ex.launch.grid(problem.sizes(shape)), trace_block=block)
    except rt.launch_errors:
        failed = True
    report = fn.last_report
    touch = report.analysis.touch if report is not None and report.analysis else {}
    if "trace" not in touch:
        return None
    return Trace([Access(*r) for r in touch["trace"]], int(touch.get("trace_dropped", 0)),
                 block, failed)


# ------------------------------------------------------------------ decoding an index


@dataclass(frozen=True)
class Layout:
    """A buffer seen as a row-major matrix: its name, rows and columns."""

    name: str
    rows: int
    cols: int

    def at(self, elem: int) -> str:
        r, c = divmod(elem, self.cols) if self.cols else (0, elem)
        return f"{self.name}[{r}][{c}]" if self.rows > 1 else f"{self.name}[{elem}]"


def _size_names(ex: Exercise, shape: Sequence[int]) -> dict[int, str]:
    """Each size of the shape by value (for "K = 29"): a value two sizes share is left out."""
    sizes = ex.problem.sizes(tuple(shape))
    count = Counter(sizes.values())
    return {v: f"{k} = {v}" for k, v in sizes.items() if count[v] == 1}


def decode(pairs: list[tuple[int, int]], lay: Layout, names: dict[int, str]) -> str | None:
    """What the learner's elements are in terms of the reference's (row r, column c of
    ``lay``): a row stride, a column-major walk, an offset; None where no simple form fits."""
    if len(pairs) < 3 or lay.rows < 2:
        return None
    ref = np.array([p[0] for p in pairs])
    got = np.array([p[1] for p in pairs])
    r, c = np.divmod(ref, lay.cols)
    X = np.stack([r, c, np.ones_like(r)], axis=1).astype(float)
    if np.linalg.matrix_rank(X) == 3:
        coef, *_ = np.linalg.lstsq(X, got.astype(float), rcond=None)
        a, b, d = (round(float(x)) for x in coef)
    elif len(set(r.tolist())) > 1:  # one column only (one thread's walk): the column kept
        coef, *_ = np.linalg.lstsq(X[:, [0, 2]], (got - c).astype(float), rcond=None)
        a, b, d = round(float(coef[0])), 1, round(float(coef[1]))
    else:
        return None
    if not np.array_equal(X.astype(np.int64) @ np.array([a, b, d]), got):
        return None
    n = lay.name
    W = lay.cols

    def size(v: int) -> str:
        return names.get(v, str(v))

    if b == 1 and d == 0 and a != W:
        return (f"the index of {n} steps {size(a)} per row, but {n}'s rows are "
                f"{size(W)} apart: the index expression is wrong ({n} is row-major: "
                f"{n}[row * {names.get(W, str(W)).split(' =')[0]} + col], {lay.rows} x {W} "
                "here)")
    if a == 1 and b == lay.rows and d == 0:
        return (f"{n} is read column-major ({n}[col * {size(lay.rows).split(' =')[0]} + row]); "
                f"it is {lay.rows} x {W} row-major: {n}[row * "
                f"{names.get(W, str(W)).split(' =')[0]} + col]")
    if a == W and b == 1 and d:
        dr, dc = divmod(d, W) if d > 0 else (-((-d) // W), -((-d) % W))
        return (f"every element of {n} is {abs(d)} place(s) {'past' if d > 0 else 'before'} "
                f"the one needed ({dr} row(s), {dc} column(s) off): the index adds {d:+d}")
    return None


def _first_pairs(ref: dict[int, list[Access]], got: dict[int, list[Access]]
                 ) -> list[tuple[int, Access, Access]]:
    """(thread, reference's access, learner's access), aligned by their order in each
    thread, for the threads that made as many accesses in both."""
    out = []
    for t in sorted(ref):
        r, g = ref[t], got.get(t, [])
        if len(r) == len(g):
            out += [(t, x, y) for x, y in zip(r, g, strict=True)]
    return out


# ------------------------------------------------------------------ the comparison


def _xyz(t: int, block: Sequence[int]) -> tuple[int, int, int]:
    return (t % block[0], t // block[0] % block[1], t // (block[0] * block[1]))


def _block_xyz(b: int, grid: Sequence[int]) -> tuple[int, int, int]:
    return (b % grid[0], b // grid[0], 0)


def compare(ex: Exercise, source: str, a: Attempt) -> Diagnosis | None:
    """The first difference that matters between ``source`` and the reference at ``a``'s
    shape and inputs, in one block's threads; None where the log shows none (the values'
    path is then at fault) or where a launch cannot be traced."""
    problem, launch = ex.problem, ex.launch
    bad = np.argwhere(a.bad)
    if not len(bad):
        return None
    row, col = (int(x) for x in bad[0])
    shape = tuple(a.shape)
    block = owner_block(ex, shape, row, col)
    ref = run_traced(ex, ex.reference.source(), shape, a.inputs, block)
    got = run_traced(ex, source, shape, a.inputs, block)
    if ref is None or got is None or ref.dropped or got.dropped or ref.failed or got.failed:
        return None
    kern = Kernel(source)
    params = list(problem.arg_order)
    out_p = params.index(problem.output)
    rows, cols = problem.output_shape(shape)
    out_lay = Layout(problem.output, rows, cols)
    names = _size_names(ex, shape)
    grid = launch.grid(problem.sizes(shape))
    at = ", ".join(f"{d}={v}" for d, v in zip(problem.dims, shape, strict=True))
    where = f"block {_block_xyz(block, grid)} (at {at})"
    e = row * cols + col
    ref_w, got_w = ref.by_thread(out_p, WRITE), got.by_thread(out_p, WRITE)
    owner = next((t for t, xs in ref_w.items() if any(x.elem == e for x in xs)), None)
    if owner is None:
        return None
    who = f"thread {_xyz(owner, launch.block)} of {where}"
    unwritten = np.isnan(a.got[row, col]) and not np.isnan(a.expected[row, col])
    mine = got_w.get(owner, [])
    if unwritten and not any(x.elem == e for x in mine):
        stores = [x for xs in got_w.values() for x in xs]
        line = stores[0].line if stores else kern.store(problem.output)
        if mine and not {x.elem for x in mine} <= {x.elem for x in ref_w[owner]}:
            pairs = [(x.elem, y.elem) for _, x, y in _first_pairs(ref_w, got_w)]
            how = _variable_note(kern, ex, shape, owner, block) or decode(pairs, out_lay, names)
            y = mine[0]
            return Diagnosis("wrong index", f"{who} should store {out_lay.at(e)} and stores "
                             f"{out_lay.at(y.elem)} instead" + (f": {how}" if how else "")
                             + kern.at(y.line) + ".")
        done = (f"stored {len(mine)} of the {len(ref_w[owner])} elements it owns, not "
                if mine else "stored nothing, not ")
        if var := _variable_note(kern, ex, shape, owner, block):  # the guard tested it
            return Diagnosis("wrong index", f"{who} {done}{out_lay.at(e)}: {var}.")
        guard = kern.guard_before(line)
        if guard:
            return Diagnosis("boundary", f"{who} {done}{out_lay.at(e)}, which lies inside "
                             f"the {rows} x {cols} output: the condition{kern.at(guard)} kept "
                             "it out; it must hold for every element inside the output (and "
                             "only there)" + (f": {cond}" if (cond := _guard_note(
                                 kern, guard, ex, shape, owner, block)) else "") + ".")
        loop = kern.loop_before(line)
        if mine and loop:
            return Diagnosis("loop stops early", f"{who} {done}{out_lay.at(e)}: the loop"
                             f"{kern.at(loop)} ends before it reaches every element the "
                             "thread owns.")
        return None
    for x in got.accesses:  # outside a buffer: what a GPU reads there is anyone's
        name = params[x.param] if x.param < len(params) else ""
        size = a.inputs[name].size if name in a.inputs else rows * cols if x.param == out_p \
            else None
        if size is None or 0 <= x.elem < size or x.block != block:
            continue
        side = (f"{-x.elem} element(s) before the start" if x.elem < 0
                else f"{x.elem - size + 1} element(s) past the end")
        guard = kern.guard_before(x.line)
        values = _guard_note(kern, guard, ex, shape, x.thread, block, True) if guard else ""
        return Diagnosis("out of bounds", f"thread {_xyz(x.thread, launch.block)} of {where} "
                         f"{'writes' if x.kind & WRITE else 'reads'} {name}[{x.elem}], {side} "
                         f"of {name}, on line {x.line} (a GPU reads or overwrites whatever lies "
                         "there): " + (f"the condition{kern.at(guard)} lets it through; it "
                                       "must test the very index the access uses"
                                       + (f" ({values})" if values else "")
                                       if guard else "no condition stops it")
                         + kern.at(x.line) + ".")
    for p, name in enumerate(params):
        if p == out_p or name not in a.inputs:
            continue
        arr = a.inputs[name]
        lay = Layout(name, arr.shape[0] if arr.ndim == 2 else 1,
                     arr.shape[1] if arr.ndim == 2 else arr.size)
        r_reads, g_reads = ref.by_thread(p, READ), got.by_thread(p, READ)
        r_all = Counter(x.elem for xs in r_reads.values() for x in xs)
        g_all = Counter(x.elem for xs in g_reads.values() for x in xs)
        if set(r_all) == set(g_all):
            continue
        pairs = [(t, x, y) for t, x, y in _first_pairs(r_reads, g_reads) if x.elem != y.elem]
        if pairs:
            t, x, y = pairs[0]
            var = _variable_note(kern, ex, shape, t, block)
            if var:
                return Diagnosis("wrong index", f"thread {_xyz(t, launch.block)} of {where} "
                                 f"loads {lay.at(y.elem)} where the reference's same load "
                                 f"takes {lay.at(x.elem)}" + kern.at(y.line) + f": {var}.")
            how = decode([(x.elem, y.elem) for _, x, y in _first_pairs(r_reads, g_reads)],
                         lay, names)
            return Diagnosis("wrong index", f"thread {_xyz(t, launch.block)} of {where} loads "
                             f"{lay.at(y.elem)} where the reference's same load takes "
                             f"{lay.at(x.elem)}" + (f": {how}" if how else "")
                             + kern.at(y.line) + ".")
        missing = sorted(set(r_all) - set(g_all))
        if missing and g_all and set(g_all) <= set(r_all):
            m = missing[0]
            t = next(t for t, xs in r_reads.items() if any(x.elem == m for x in xs))
            lines = [x.line for xs in g_reads.values() for x in xs]
            line = lines[0] if lines else kern.load(name)
            guard = kern.guard_before(line)
            if not guard:  # loads told apart only by a guard (a wide load logs its first word)
                continue
            values = _guard_note(kern, guard, ex, shape, t, block)
            return Diagnosis("boundary", f"{where} never loads {lay.at(m)}, which the sums "
                             f"of its outputs need (the reference's thread "
                             f"{_xyz(t, launch.block)} loads it): "
                             + f"the condition{kern.at(guard)} keeps the load out; it must "
                             "hold for every element inside the matrix"
                             + (f" (for that thread {values})" if values else "") + ".")
    return None


def _variable_note(kern: Kernel, ex: Exercise, shape: Sequence[int], thread: int,
                   block: int) -> str | None:
    """A variable of the kernel whose value for this thread differs from the reference's
    same variable (:func:`tilelab.grading.value_path.variable_fault`)."""

    sizes = ex.problem.sizes(tuple(shape))
    grid = ex.launch.grid(sizes)
    return variable_fault(kern, Kernel(ex.reference.source()), sizes,
                          _xyz(thread, ex.launch.block), _block_xyz(block, grid),
                          ex.launch.block)


def _guard_note(kern: Kernel, guard: int, ex: Exercise, shape: Sequence[int], thread: int,
                block: int, holds: bool = False) -> str:
    """The guard's condition with this thread's values (:mod:`tilelab.grading.value_path`),
    or "" where they cannot be worked out from the source alone."""

    sizes = ex.problem.sizes(tuple(shape))
    grid = ex.launch.grid(sizes)
    return condition_values(kern, guard, sizes, _xyz(thread, ex.launch.block),
                            _block_xyz(block, grid), ex.launch.block, holds)


#: what the output-model diagnosis says when it has no model of the mistake: the
#: differential is asked instead
_VAGUE = re.compile(r"check the row and column formulas|the index expression is wrong|"
                    r"kept the poison value|NaN computed: a value was read|"
                    r"was never written in this block")


_DECODED = re.compile(r"steps .* per row, but|is read column-major|place\(s\) (past|before) "
                      r"the one needed|where it should be")


#: the output model's causes that say only that something is wrong somewhere
_CATCH_ALL = ("indexing", "never written")


def decoded(why: Diagnosis) -> bool:
    """Whether ``why`` decodes an index (a stride, a layout, an offset, a variable)."""
    return bool(_DECODED.search(why.advice))


def vague(why: Diagnosis | None) -> bool:
    """Whether ``why`` names no line or is one of the catch-alls."""
    return why is None or not re.search(r"\bline \d+", why.advice) or bool(
        _VAGUE.search(why.advice))


def smallest(attempts: Sequence[Attempt]) -> Attempt | None:
    """The failing attempt to trace: the smallest with a partial tile, else the smallest
    (a traced launch logs every access of one block; a small shape keeps it fast)."""
    failing = [a for a in attempts if a.bad.any() and min(a.shape) > 1]
    return min(failing, key=lambda a: float(np.prod(a.shape)), default=None)


def refine(ex: Exercise, source: str, why: Diagnosis | None,
           attempts: Sequence[Attempt]) -> Diagnosis | None:
    """``why``, or where it is vague, what the threads' accesses against the reference's
    show (:func:`compare`), or the accumulator's path in the source; ``why`` where neither
    shows more."""

    if why is not None and why.cause in (
            "one term only", "accumulator reset", "start value", "zeros stored",
            "stale shared data", "boundary") and (
            found := accumulator_fault(Kernel(source))) is not None:
        return found  # the values' path first: a sum reset, assigned or never set
    if why is not None and why.cause == "tile index":
        return tile_side(ex, source) or why
    if why is not None and why.cause == "zeros stored" and (a := smallest(attempts)):
        # zeros where a load was skipped: the threads show which load and its guard
        found = compare(ex, source, a)
        return found if found is not None and (
            "the condition" in found.advice or decoded(found)) else why
    if not vague(why):
        return why
    a = smallest(attempts)
    found = compare(ex, source, a) if a is not None else None
    if why is not None and why.cause not in _CATCH_ALL and not _VAGUE.search(why.advice):
        # a cause the output's model names, without a line: the threads place it, where
        # they show an index (a variable, a stride, a layout); else it stands as it is
        return Diagnosis(why.cause, found.advice) if found is not None and decoded(
            found) else why
    if found is None and why is not None and why.cause == "indexing":
        found = accumulator_fault(Kernel(source))
    if found is not None and why is not None and why.cause == "out of bounds":
        return Diagnosis("out of bounds", found.advice)  # the launch failed: it reached past
    return found or why


def _extent(ex: Exercise, shape: Sequence[int], name: str) -> int:
    """How many elements the buffer ``name`` holds at ``shape``."""
    if name == ex.problem.output:
        return int(np.prod(ex.problem.output_shape(tuple(shape))))
    inputs = ex.problem.make_inputs(tuple(shape), np.random.default_rng(0))
    return int(inputs[name].size) if name in inputs else 0


def fault(ex: Exercise, source: str, shape: Sequence[int], exc: BaseException
          ) -> tuple[Diagnosis | None, Access | None]:
    """Why a launch reached outside a buffer, from the thread's own accesses against the
    reference's at the failing shape: one access more than the reference's thread makes
    (its guard lets it through), or one at another element (its index: decoded). Also the
    access itself, found in the log where the launch could not say which thread made it
    (a write caught after the kernel ended); (None, None) where the log does not show it."""
    problem, launch = ex.problem, ex.launch
    shape = tuple(shape)
    grid = launch.grid(problem.sizes(shape))
    blk = getattr(exc, "block", None)
    block = int(blk[0]) + grid[0] * int(blk[1]) if blk else 0
    inputs = problem.make_inputs(shape, np.random.default_rng(0))
    got = run_traced(ex, source, shape, inputs, block)
    if got is None:
        return None, None
    params = list(problem.arg_order)
    extents = {p: _extent(ex, shape, n) for p, n in enumerate(params)
               if n in inputs or n == problem.output}
    oob = next((x for x in got.accesses if x.param in extents
                and not 0 <= x.elem < extents[x.param]), None)
    if oob is None or oob.block != block:
        return None, oob
    ref = run_traced(ex, ex.reference.source(), shape, inputs, block)
    if ref is None or ref.failed or ref.dropped:
        return None, oob
    kern, name = Kernel(source), params[oob.param]
    kind = WRITE if oob.kind & WRITE else READ
    mine = [x for x in got.by_thread(oob.param, kind)[oob.thread]]
    n = next(i for i, x in enumerate(mine) if x is oob or x == oob)
    before, theirs = mine[:n], ref.by_thread(oob.param, kind).get(oob.thread, [])
    arr = inputs.get(name)
    rows, cols = (arr.shape if arr is not None and arr.ndim == 2
                  else problem.output_shape(shape) if name == problem.output else (1, 0))
    lay = Layout(name, rows, cols)
    at = ", ".join(f"{d}={v}" for d, v in zip(problem.dims, shape, strict=True))
    who = (f"thread {_xyz(oob.thread, launch.block)} of block {_block_xyz(block, grid)} "
           f"(at {at})")
    verb = "write" if kind == WRITE else "load"
    same = [x.elem for x in before] == [x.elem for x in theirs[:n]]
    if same and n >= len(theirs):
        guard = kern.guard_before(oob.line)
        values = _guard_note(kern, guard, ex, shape, oob.thread, block, True) if guard else ""
        return Diagnosis("out of bounds", f"{who} makes {verb} number {n + 1} of {name} on "
                         f"line {oob.line}, where the reference's same thread makes "
                         f"{len(theirs)}" + (" (the same elements up to there)" if n else "")
                         + "; that one "
                         f"reaches {name}[{oob.elem}], outside the {extents[oob.param]} "
                         "elements: "
                         + (f"the condition{kern.at(guard)} lets it through; it must test "
                            "the very index this access uses (for a thread that moves "
                            "several elements, the loop's offset too)"
                            + (f" ({values})" if values else "")
                            if guard else "no condition stops it: put the access under a "
                            "test of the index it uses") + kern.at(oob.line) + "."), oob
    block_pairs = [(x.elem, y.elem) for t, xs in ref.by_thread(oob.param, kind).items()
                   for x, y in zip(xs, got.by_thread(oob.param, kind).get(t, []), strict=False)
                   if 0 <= y.elem < extents[oob.param]]  # the log ends at the fault
    var = None if same and n >= len(theirs) else _variable_note(kern, ex, shape, oob.thread,
                                                                block)
    if var:
        return Diagnosis("out of bounds", f"{who}'s {verb} number {n + 1} of {name} reaches "
                         f"{name}[{oob.elem}], outside the {extents[oob.param]} elements"
                         + kern.at(oob.line) + f": {var}."), oob
    if same and n < len(theirs):
        want = theirs[n].elem
        how = decode([*block_pairs, (want, oob.elem)], lay, _size_names(ex, shape))
        return Diagnosis("out of bounds", f"{who}'s {verb} number {n + 1} of {name} reaches "
                         f"{name}[{oob.elem}], outside the {extents[oob.param]} elements, "
                         f"where the reference's same {verb} takes {lay.at(want)}"
                         + (f": {how}" if how else ": the index expression is wrong")
                         + kern.at(oob.line) + "."), oob
    how = decode(block_pairs, lay, _size_names(ex, shape))
    if how:
        return Diagnosis("out of bounds", f"{who}'s {verb}s of {name} differ from the "
                         f"reference's before the one that reaches {name}[{oob.elem}]: "
                         f"{how}" + kern.at(oob.line) + "."), oob
    return None, oob


def _subscript(code: str, name: str) -> str:
    m = re.search(rf"\b{name}\s*((?:\[[^\]]*\]\s*)+)", code)
    return re.sub(r"\s+", "", m.group(1)) if m else ""


def tile_side(ex: Exercise, source: str) -> Diagnosis | None:
    """Which side of a shared tile's layout differs from the reference's, where one side
    (the store that loads the tile, or the read in the product) is the reference's own:
    the other side is the one to change (a step whose tile is stored transposed keeps its
    transposed read). None where both sides, or neither, differ."""
    kern, ref = Kernel(source), Kernel(ex.reference.source())
    for arr in ex.problem.arg_order:
        mine, theirs = kern.tile_of(arr), ref.tile_of(arr)
        if not mine or not theirs:
            continue
        load, read = kern.load(arr), kern.read(arr)
        rload, rread = ref.load(arr), ref.read(arr)
        if not (load and read and rload and rread):
            continue
        m_st, r_st = _subscript(kern.lines[load - 1], mine[0]), _subscript(
            ref.lines[rload - 1], theirs[0])
        m_rd, r_rd = _subscript(kern.lines[read - 1], mine[0]), _subscript(
            ref.lines[rread - 1], theirs[0])
        def names(x: str) -> set[str]:
            return set(re.findall(r"[A-Za-z_]\w*", x))

        if m_st != r_st and m_rd == r_rd and names(m_st) == names(r_st):
            return Diagnosis("tile index", f"the load stores {arr}'s tile transposed to "
                             f"the layout the product reads: the product reads {mine[0]}"
                             f"{m_rd}, the layout this step asks for, but the load stores it "
                             f"at {mine[0]}{m_st}: store it at {mine[0]}{r_st} so each element "
                             "lands where the read looks for it (keep the read)"
                             + kern.at(load) + ".")
        if m_rd != r_rd and m_st == r_st and names(m_rd) == names(r_rd):
            return Diagnosis("tile index", f"the product reads {arr}'s tile transposed: "
                             f"the load stores it at {mine[0]}{m_st}, the layout this step "
                             f"asks for, but the product reads {mine[0]}{m_rd}: read "
                             f"{mine[0]}{r_rd} (keep the load)" + kern.at(read) + ".")
    return None
