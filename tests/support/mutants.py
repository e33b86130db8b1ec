"""Mutants of the course's reference kernels: each one edit away from a learner's solution.

The source of each of the 15 exercises is the one a learner submits: the string of the
solution notebook's kernel cell (``solutions/<assignment>/*.ipynb``, cell
``kernel_<exercise>``), its ``BEGIN SOLUTION`` / ``END SOLUTION`` marker lines dropped and
its leading newline stripped (as a ``.cu`` file given to ``tilelab check``, and as the
kernels of ``tests/data/mistakes``). Only the lines a learner writes (those between the
markers) are mutated, and each mutant is one edit of one of them (a moved barrier: two
neighbouring lines exchanged), so every line keeps its number: :attr:`Mutant.line` is the
1-based line of the submitted source.

Mutation classes (:data:`CLASSES`): an index's terms swapped (row/col, tx/ty,
threadIdx.x/y, blockIdx.x/y, a 2-D subscript's two indices); off by one (+1/-1 on a
subscript, a loop's bound or start); a wrong stride (K vs N vs M, rows vs cols, BK vs BN
vs BM as a multiplier); a guard changed (< to <=, > to >=, && to ||, the bound or the
tested variable replaced by its sibling) or removed (the whole if or ternary, or one
conjunct); a barrier removed or moved (exchanged with the line before or after it); the
accumulator reset inside the loop, assigned instead of added, or never initialised; the
tile loads swapped (As for Bs, A for B); the vector width or alignment broken (float4
steps, masks, ``__align__``, a float4 address one float off); a shared array shrunk; an
atomic replaced by a plain update (no reference kernel has an atomic today, so this class
yields none).

:func:`all_mutants` is deterministic; :func:`sample` draws from it with a seed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tilelab.catalog import exercises

REPO = Path(__file__).resolve().parents[2]
MARKERS = ("BEGIN SOLUTION", "END SOLUTION")

CLASSES = (
    "index swap", "off by one", "wrong stride", "guard changed", "guard removed",
    "barrier removed", "barrier moved", "accumulator reset", "accumulator assigned",
    "accumulator not initialised", "tile loads swapped", "vector width", "shared shrunk",
    "atomic replaced",
)


@dataclass(frozen=True)
class Mutant:
    """One edit of one exercise's learner source."""

    exercise: str
    klass: str  # one of CLASSES
    line: int  # 1-based, in the submitted source
    before: str  # the line as the reference has it
    after: str  # the line as the mutant has it
    source: str  # the whole mutated source
    #: the lines a diagnosis may name for it: the mutated one first, then for a moved
    #: barrier the line it was exchanged with, for a removed guard the statement it guarded
    lines: tuple[int, ...] = field(default=())

    @property
    def id(self) -> str:
        digest = hashlib.sha1(self.source.encode()).hexdigest()[:8]
        return f"{self.exercise}:{self.klass.replace(' ', '_')}:L{self.line}:{digest}"

    @property
    def edit(self) -> str:
        return f"line {self.line}: {self.before.strip()!r} -> {self.after.strip()!r}"

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "exercise": self.exercise, "class": self.klass,
                "line": self.line, "lines": list(self.lines), "before": self.before,
                "after": self.after}


# ---------------------------------------------------------------- the learner's source


@cache
def learner_source(exercise_id: str) -> tuple[str, frozenset[int]]:
    """The source a learner submits for the exercise (the solution notebook's kernel
    string, markers dropped) and the 1-based numbers of the lines the learner writes."""
    ex = exercises.get(exercise_id)
    nb = next((REPO / "solutions" / ex.assignment).glob("*.ipynb"))
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    cell = next(c for c in cells
                if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{exercise_id}")
    text = "".join(cell["source"])
    literal = next(node.value for node in ast.walk(ast.parse(text))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str))
    out: list[str] = []
    mine: set[int] = set()
    inside = False
    for line in literal.lstrip("\n").splitlines():
        if MARKERS[0] in line:
            inside = True
        elif MARKERS[1] in line:
            inside = False
        else:
            out.append(line)
            if inside:
                mine.add(len(out))
    return "\n".join(out) + "\n", frozenset(mine)


# ---------------------------------------------------------------- reading a line

_COMMENT = re.compile(r"//.*$")
_SUBSCRIPT = re.compile(r"\[([^\[\]]+)\]")
_DECL = re.compile(r"^\s*(__shared__|(const\s+)?(float|int|float4|bool)\s+\w+\s*\[)")
_REL = re.compile(r"(?<![<>=!])(<=|>=|<|>)(?![<>=])")
_FOR = re.compile(r"\bfor\s*\(([^;]*);([^;]*);([^)]*)\)")
_SIBLINGS = ({"M", "N", "K"}, {"rows", "cols"}, {"BM", "BN", "BK"}, {"TILE_DIM", "BLOCK_ROWS"})
_PAIRS = (("threadIdx.x", "threadIdx.y"), ("blockIdx.x", "blockIdx.y"), ("tx", "ty"),
          ("row", "col"), ("x", "y"), ("r", "c"), ("tRow", "tCol"), ("ar", "ac"),
          ("br", "bc"), ("row0", "col0"), ("i", "j"))

#: the names an index is made of, in the course's kernels
_INDEX_NAMES = frozenset({"tx", "ty", "k", "row", "col", "i", "j", "tid", "s", "r", "c", "x",
                          "y", "t", "d", "ar", "ac", "br", "bc", "tRow", "tCol"})


def _code(line: str) -> str:
    """The line without its // comment."""
    return _COMMENT.sub("", line)


def _token(word: str) -> re.Pattern[str]:
    """``word`` as a whole token (not a member such as v.x, not part of a longer name)."""
    return re.compile(rf"(?<![\w.]){re.escape(word)}(?![\w])")


def _balanced(text: str, start: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``start``; -1 if none on the line."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _conditions(code: str) -> list[tuple[int, int, str]]:
    """The guards of a line: an ``if (...)``'s condition and a ternary's ``(...) ?``, as
    (start, end, kind) spans of ``code`` (kind "if" or "?")."""
    spans = []
    for m in re.finditer(r"\bif\s*\(", code):
        end = _balanced(code, m.end() - 1)
        if end > 0:
            spans.append((m.end(), end, "if"))
    for m in re.finditer(r"\)\s*\?", code):
        depth, i = 0, m.start()
        while i >= 0:
            depth += {")": 1, "(": -1}.get(code[i], 0)
            if depth == 0:
                break
            i -= 1
        if i >= 0:
            spans.append((i + 1, m.start(), "?"))
    return spans


def _in(spans: list[tuple[int, int, str]], pos: int) -> bool:
    return any(a <= pos < b for a, b, _ in spans)


def _replace(code: str, start: int, end: int, new: str) -> str:
    return code[:start] + new + code[end:]


# ---------------------------------------------------------------- the operators
# Each yields (class, new code of the line) for one line's code; the comment is put back.

Edit = tuple[str, str]


def _index_swaps(code: str) -> Iterator[Edit]:
    """One token swapped with its partner (row for col, tx for ty, ...): a guard changed
    where the token is in a condition, an index swap elsewhere; and a 2-D subscript's
    two indices exchanged."""
    if _DECL.match(code) or code.lstrip().startswith("#"):
        return
    conds = _conditions(code)
    loops = [(m.start(), m.end(), "for") for m in _FOR.finditer(code)]
    for a, b in _PAIRS:
        for this, other in ((a, b), (b, a)):
            for m in _token(this).finditer(code):
                if re.match(r"\s*\(", code[m.end():]) or re.search(r"\b(int|float|bool)\s+$",
                                                                   code[:m.start()]):
                    continue  # a call, or a declaration's name
                if re.match(r"\s*=(?!=)", code[m.end():]) and re.match(
                        r"\s*(const\s+)?(int|float|bool)\b", code):
                    continue  # a declarator's name (int tx = ..., ty = ...)
                if _in(loops, m.start()):
                    continue  # a loop's own counter: the loop's bound is off by one's
                klass = "guard changed" if _in(conds, m.start()) else "index swap"
                yield klass, _replace(code, m.start(), m.end(), other)
    here = {w for w in _INDEX_NAMES if _token(w).search(code)}
    for sub in _SUBSCRIPT.finditer(code):  # another index of the same line in a subscript
        for w in sorted(here):
            for m in _token(w).finditer(sub.group(1)):
                for other in sorted(here - {w}):
                    p = sub.start(1) + m.start()
                    yield "index swap", _replace(code, p, p + len(w), other)
    for m in re.finditer(r"(\w+)\[([^\[\]]+)\]\[([^\[\]]+)\]", code):
        if m.group(2).strip() != m.group(3).strip():
            yield "index swap", _replace(code, m.start(), m.end(),
                                         f"{m.group(1)}[{m.group(3)}][{m.group(2)}]")


def _off_by_one(code: str) -> Iterator[Edit]:
    """+1 / -1 on a subscript (a float4 address one float off is a vector mistake), on a
    loop's bound, or a loop started at 1."""
    if not _DECL.match(code) and not code.lstrip().startswith("#"):
        for m in _SUBSCRIPT.finditer(code):
            inner = m.group(1)
            klass = "vector width" if "reinterpret_cast" in code else "off by one"
            for d in (" + 1", " - 1"):
                yield klass, _replace(code, m.start(1), m.end(1), inner + d)
    for m in _FOR.finditer(code):
        init, cond = m.group(1), m.group(2)
        if rel := _REL.search(cond):
            bound = cond[rel.end():].strip()
            for d in (" + 1", " - 1"):
                new = cond[:rel.end()] + " " + bound + d
                yield "off by one", _replace(code, m.start(2), m.end(2), new)
        if z := re.search(r"=\s*0\s*$", init):
            yield "off by one", _replace(code, m.start(1) + z.start(), m.end(1), "= 1")
        if rel and rel.group(1) in ("<", ">"):
            p = m.start(2) + rel.start()
            yield "off by one", _replace(code, p, p + 1, rel.group(1) + "=")
    if not _FOR.search(code) and not _DECL.match(code):  # an index defined one off
        for m in re.finditer(r"(?:\bint\s+|,\s*|^\s*)(\w+)\s*=\s*([^,;=]+?)\s*(?=[,;])", code):
            if re.search(r"\b(blockIdx|threadIdx|tid|row|col|tx|ty)\b", m.group(2)) and not (
                    re.search(r"[\]?]", code)):
                for d in (" + 1", " - 1"):
                    yield "off by one", _replace(code, m.start(2), m.end(2), m.group(2) + d)


def _strides(code: str) -> Iterator[Edit]:
    """A multiplier (K, N, M; rows, cols; BK, BN, BM) replaced by a sibling, outside
    guards and declarations."""
    if _DECL.match(code) or code.lstrip().startswith("#"):
        return
    conds = _conditions(code)
    for family in _SIBLINGS:
        for word in sorted(family):
            for m in re.finditer(rf"(?<=\*\s){word}\b|\b{word}(?=\s\*)|(?<=\+=\s){word}\b",
                                 code):
                if _in(conds, m.start()):
                    continue
                for other in sorted(family - {word}):
                    yield "wrong stride", _replace(code, m.start(), m.end(), other)


def _guards(code: str) -> Iterator[Edit]:
    """A guard's comparison, bound or joint changed; the guard removed, or one of its
    conjuncts."""
    for start, end, kind in _conditions(code):
        cond = code[start:end]
        for m in _REL.finditer(cond):
            if "reinterpret_cast" in cond[:m.start()] or "static_cast" in cond[:m.start()]:
                continue
            flip = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}[m.group(1)]
            yield "guard changed", _replace(code, start + m.start(), start + m.end(), flip)
            rhs = re.match(r"\s*(\w+)", cond[m.end():])
            for family in _SIBLINGS:
                if rhs and rhs.group(1) in family:
                    for other in sorted(family - {rhs.group(1)}):
                        p = start + m.end() + rhs.start(1)
                        yield "guard changed", _replace(code, p, p + len(rhs.group(1)), other)
        for m in re.finditer(r"==\s*0\b", cond):
            yield "guard changed", _replace(code, start + m.start(), start + m.end(), "== 1")
        for m in re.finditer(r"&&", cond):
            yield "guard changed", _replace(code, start + m.start(), start + m.end(), "||")
        parts = [p.strip() for p in cond.split("&&")]
        if len(parts) > 1:
            for i in range(len(parts)):
                rest = " && ".join(parts[:i] + parts[i + 1:])
                yield "guard removed", _replace(code, start, end, rest)
        if kind == "if":  # the if dropped: what it guarded runs always
            head = code.rfind("if", 0, start)
            yield "guard removed", code[:head] + code[end + 1:].lstrip()
        else:  # (cond) ? a : b  ->  a
            colon = code.find(":", end)
            question = code.find("?", end)
            stop = code.rfind(";")
            yield "guard removed", (code[:start - 1] + code[question + 1:colon].strip()
                                    + code[stop:])


def _barriers(code: str) -> Iterator[Edit]:
    if "__syncthreads();" in code:
        yield "barrier removed", code.replace("__syncthreads();", "", 1).rstrip()


def _accumulators(code: str) -> Iterator[Edit]:
    if re.search(r"[\w\]]\s*\+=", code) and not _FOR.search(code):
        yield "accumulator assigned", re.sub(r"\+=", "=", code, count=1)
    m = re.match(r"^(\s*float\s+\w+)\s*=\s*0(\.0*)?f?\s*;\s*$", code)
    if m:
        yield "accumulator not initialised", m.group(1) + ";"
    elif re.search(r"\b\w+(\[\w+\])+\s*=\s*0(\.0*)?f?\s*;", code) and "__shared__" not in code:
        yield "accumulator not initialised", re.sub(
            r"\b\w+(\[\w+\])+\s*=\s*0(\.0*)?f?\s*;", ";", code, count=1)


def _tile_swaps(code: str) -> Iterator[Edit]:
    """As for Bs (or A for B) at one place of a line that touches both kinds of tile."""
    if _DECL.match(code):
        return
    for this, other in (("As", "Bs"), ("Bs", "As")):
        for m in _token(this).finditer(code):
            yield "tile loads swapped", _replace(code, m.start(), m.end(), other)
    for m in re.finditer(r"(?<![\w.])(A|B)(?=\s*\[|\s*,\s*(row0|t)\b)", code):
        other = "B" if m.group(1) == "A" else "A"
        yield "tile loads swapped", _replace(code, m.start(), m.end(), other)


def _vectors(code: str) -> Iterator[Edit]:
    """The float4 path's width, alignment or mask broken."""
    subs = ((r"__align__\(16\)\s*", ""), (r"&\s*15\b", "& 7"), (r"&\s*3\)", "& 1)"),
            (r"\)\s*\*\s*4\b", ") * 2"), (r"/\s*4\)", "/ 2)"), (r"(\b[ij]\s*\+=\s*)4\b", r"\g<1>2"),
            (r"\+\s*3\s*<", "+ 2 <"))
    for pattern, new in subs:
        for m in re.finditer(pattern, code):
            yield "vector width", _replace(code, m.start(), m.end(), m.expand(new))


def _shared_shrinks(code: str) -> Iterator[Edit]:
    if "__shared__" not in code:
        return
    for m in _SUBSCRIPT.finditer(code):
        dim = m.group(1).strip()
        news = [f"{dim} - 1"]
        if p := re.fullmatch(r"(\w+)\s*\+\s*1", dim):
            news = [p.group(1)]
        elif p := re.fullmatch(r"(\w+)\s*\+\s*(.+)", dim):
            news = [p.group(1), f"{dim} - 1"]
        for new in news:
            yield "shared shrunk", _replace(code, m.start(1), m.end(1), new)


def _atomics(code: str) -> Iterator[Edit]:
    for m in re.finditer(r"atomicAdd\(\s*&\s*([^,]+),\s*([^;]+)\)\s*;", code):
        yield "atomic replaced", _replace(code, m.start(), m.end(),
                                          f"{m.group(1).strip()} += {m.group(2).strip()};")


OPERATORS = (_index_swaps, _off_by_one, _strides, _guards, _barriers, _accumulators,
             _tile_swaps, _vectors, _shared_shrinks, _atomics)


# ---------------------------------------------------------------- multi-line edits


def _guarded(lines: list[str], n: int) -> list[int]:
    """The lines the if on line ``n`` (1-based) guards: its block, or its one statement."""
    if _code(lines[n - 1]).rstrip().endswith("{"):
        depth, out = 0, []
        for k in range(n, len(lines) + 1):
            depth += _code(lines[k - 1]).count("{") - _code(lines[k - 1]).count("}")
            if k > n:
                if depth <= 0:
                    break
                out.append(k)
        return out
    for k in range(n + 1, len(lines) + 1):
        if _code(lines[k - 1]).strip() not in ("", "{"):
            return [k]
    return []


def _moved_barriers(lines: list[str], mine: frozenset[int]) -> Iterator[tuple[int, int]]:
    """(barrier line, neighbour) pairs: the barrier exchanged with the code line before or
    after it (a pragma, a blank or a comment line is not a neighbour)."""
    for n in sorted(mine):
        if "__syncthreads();" not in lines[n - 1]:
            continue
        for step in (-1, 1):
            k = n + step
            while k in mine and (not _code(lines[k - 1]).strip()
                                 or lines[k - 1].lstrip().startswith("#")):
                k += step
            if k in mine:
                yield n, k


def _resets(lines: list[str], mine: frozenset[int]) -> Iterator[tuple[int, str]]:
    """(loop header line, the header with the accumulator's reset after its brace): for
    each loop that opens a block, between the accumulator's initialisation and a ``+=``
    to it, inside that block."""
    for n in sorted(mine):
        code = _code(lines[n - 1])
        scalar = re.match(r"^\s*float\s+(\w+)\s*=\s*0(\.0*)?f?\s*;", code)
        array = re.search(r"\b(\w+)((\[\w+\])+)\s*=\s*0(\.0*)?f?\s*;", code)
        if not (scalar or array) or "__shared__" in code:
            continue
        name = (scalar or array).group(1)  # type: ignore[union-attr]
        if scalar:
            reset = f" {name} = 0.0f;"
        else:  # the initialisation loop's lines, joined
            first = n
            k = first - 1
            while k in mine and (lines[k - 1].lstrip().startswith("#") or (
                    _FOR.search(_code(lines[k - 1]))
                    and not _code(lines[k - 1]).rstrip().endswith("{"))):
                if not lines[k - 1].lstrip().startswith("#"):
                    first = k
                k -= 1
            reset = " " + " ".join(_code(lines[k - 1]).strip() for k in range(first, n + 1)
                                   if not lines[k - 1].lstrip().startswith("#"))
        adds = [k for k in sorted(mine) if k > n
                and re.search(rf"\b{name}\b(\[[^\]]*\])*\s*\+=", _code(lines[k - 1]))]
        for h in sorted(mine):
            hc = _code(lines[h - 1]).rstrip()
            if not (n < h and _FOR.search(hc) and hc.endswith("{")):
                continue
            depth, k, inside = 0, h, False
            for k in range(h, len(lines) + 1):
                depth += _code(lines[k - 1]).count("{") - _code(lines[k - 1]).count("}")
                if k > h and depth <= 0:
                    break
                inside = inside or k in adds
            if inside:
                yield h, lines[h - 1].replace(hc, hc + reset, 1)


# ---------------------------------------------------------------- the mutants


def mutants(exercise_id: str) -> list[Mutant]:
    """Every one-edit mutant of the exercise's learner source, in a fixed order, without
    two of the same source (nor one equal to the reference)."""
    source, mine = learner_source(exercise_id)
    lines = source.splitlines()
    seen = {source}
    out: list[Mutant] = []

    names = set(re.findall(r"[A-Za-z_]\w*", source))

    def add(klass: str, edits: dict[int, str], named: tuple[int, ...]) -> None:
        if any(set(re.findall(r"[A-Za-z_]\w*", text)) - names for text in edits.values()):
            return  # a name the kernel never declares: it could not compile
        new = list(lines)
        for n, text in edits.items():
            new[n - 1] = text
        text = "\n".join(new) + "\n"
        if text in seen:
            return
        seen.add(text)
        line = named[0]
        out.append(Mutant(exercise_id, klass, line, lines[line - 1], new[line - 1], text,
                          named))

    for n in sorted(mine):
        line = lines[n - 1]
        if not _code(line).strip() or line.lstrip().startswith("#"):
            continue
        code = _code(line)
        comment = line[len(code):]
        for op in OPERATORS:
            if (op is _tile_swaps and "Bs" not in source) or (
                    op is _vectors and "float4" not in source):
                continue
            for klass, new in op(code):
                if new == code:
                    continue
                named = (n,)
                if klass.startswith("guard") and re.search(r"\bif\s*\(.*\)\s*\{?\s*$", code):
                    named = (n, *_guarded(lines, n))  # and the statements it guards
                new = new.rstrip()
                add(klass, {n: f"{new}  {comment}" if comment and new.strip() else new or comment},
                    named)
    for n, k in _moved_barriers(lines, mine):
        add("barrier moved", {n: lines[k - 1], k: lines[n - 1]}, (n, k))
    for h, new in _resets(lines, mine):
        add("accumulator reset", {h: new}, (h,))
    return out


def all_mutants(exercise_ids: list[str] | None = None) -> list[Mutant]:
    """Every exercise's mutants (``exercise_ids``: only those), in a fixed order."""
    ids = exercise_ids or list(exercises.EXERCISES)
    return [m for e in ids for m in mutants(e)]


def sample(pool: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """``n`` mutants of ``pool`` (all of them when ``n`` is None or larger), drawn with
    ``seed``: each class shuffled, then the classes taken in turn, so that a small sample
    holds every class (a rare class is taken whole)."""
    if n is None or n >= len(pool):
        return list(pool)
    rng = random.Random(seed)
    by_class: dict[str, list[Mutant]] = {}
    for m in pool:
        by_class.setdefault(m.klass, []).append(m)
    queues = [rng.sample(ms, len(ms)) for _, ms in sorted(by_class.items())]
    out: list[Mutant] = []
    while len(out) < n:
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out
