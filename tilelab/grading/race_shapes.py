"""What kind of race the emulator found, and the fix that kind needs.

The emulator's analysis (tilelab/emu/report.py, ``Race``) records, for each pair of
accesses to one word that nothing orders: the array and element, both lines and kinds,
both threads and blocks, and which access came first. A race's *shape* decides its fix:

- a lost update: many threads read-modify-write one word (``total += x``) at one line, so
  two of them both write it: no barrier fixes that; an atomic or a tree reduction does;
- two blocks on one word: no barrier orders blocks; a ``__device__`` scratch array is one
  copy for the whole launch (make it ``__shared__``), a shared result needs an atomic;
- an atomic beside a plain access of the word: a barrier between the plain access and the
  atomics, or the whole update one atomic;
- a write and a read with a barrier between them in the source: the race is across trips
  of the loop (the next trip's store overwrites what slower threads still read): the
  missing barrier goes at the end of the loop body;
- a write and a read with no barrier between them: a barrier between the two lines;
- one line storing one element from several threads (no read): several threads write one
  element, which a barrier does not make right;
- two lines storing one element, and nothing reading it racily: an index error (two
  stores meant for different elements), not an ordering one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tilelab.emu.report import Race, representative
from tilelab.grading.kernel_lines import Kernel

#: causes named by this module, besides "race"
OVERLAP = "overlapping stores"
CAUSES = (OVERLAP,)

_BARRIER = re.compile(r"\b__syncthreads\s*\(|\bthis_thread_block\(\)\s*\.sync\(|\bbarrier\.sync")


@dataclass(frozen=True)
class Loop:
    """A ``for``/``while``/``do`` loop: its header's line and the last line of its body
    (the closing brace's, where the body is a block)."""

    head: int
    end: int
    braced: bool


@dataclass(frozen=True)
class Shape:
    """A race, what kind it is, and what to tell the learner."""

    kind: str  # "blocks", "lost update", "atomic", "across trips", "missing barrier",
    # "same store", "two stores"
    race: Race
    cause: str  # "race", or OVERLAP for an index error that only looks like a race
    fix: str  # what to do, naming lines of the source

    def message(self) -> str:
        """The finding and its fix, as a diagnosis reads."""
        between = ("no barrier between the read of one trip of the loop and the store of "
                   "the next" if self.kind == "across trips" else None)
        return (f"the emulator's analysis found {self.race.describe(False, between)}; "
                f"{self.fix}")


# ---------------------------------------------------------------- the source's structure


def _strip(text: str) -> str:
    """``text`` with comments and string literals blanked (newlines kept)."""
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", blank, text,
                  flags=re.S)


def _match(code: str, i: int, open_: str, close: str) -> int:
    """The index of the bracket closing the one at ``i`` (or the end of ``code``)."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_:
            depth += 1
        elif code[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def _statement_end(code: str, i: int) -> int:
    """The index of the last character of the statement starting at or after ``i``."""
    while i < len(code) and code[i].isspace():
        i += 1
    if i >= len(code):
        return len(code) - 1
    if code[i] == "{":
        return _match(code, i, "{", "}")
    m = re.match(r"(for|while|if|switch)\s*\(", code[i:])
    if m:
        end = _statement_end(code, _match(code, i + m.end() - 1, "(", ")") + 1)
        if m.group(1) == "if":
            e = re.match(r"\s*else\b", code[end + 1:])
            if e:
                end = _statement_end(code, end + 1 + e.end())
        return end
    if re.match(r"do\b", code[i:]):
        end = _statement_end(code, i + 2)
        w = re.match(r"\s*while\s*\(", code[end + 1:])
        if w:
            end = _match(code, end + w.end(), "(", ")")
        return code.find(";", end) if ";" in code[end:] else end
    depth = 0
    for j in range(i, len(code)):
        if code[j] in "([{":
            depth += 1
        elif code[j] in ")]}":
            depth -= 1
            if depth < 0:
                return j - 1
        elif code[j] == ";" and depth == 0:
            return j
    return len(code) - 1


def loops(source: str) -> list[Loop]:
    """Every loop of ``source``, outermost first."""
    code = _strip(source)

    def line(i: int) -> int:
        return code.count("\n", 0, i) + 1

    found = []
    for m in re.finditer(r"\b(for|while)\s*\(|\bdo\b", code):
        prev = code[: m.start()].rstrip()
        if m.group(1) == "while" and prev.endswith("}") and re.search(
                r"\bdo\s*$", code[: _open_of(code, len(prev) - 1)]):
            continue  # the tail of a do { ... } while (...);
        body = m.end() if m.group(0) == "do" else _match(code, m.end() - 1, "(", ")") + 1
        end = _statement_end(code, body)
        braced = code[body:].lstrip().startswith("{")
        found.append(Loop(line(m.start()), line(end), braced))
    return found


def _open_of(code: str, close: int) -> int:
    """The index of the ``{`` the ``}`` at ``close`` closes."""
    depth = 0
    for j in range(close, -1, -1):
        if code[j] == "}":
            depth += 1
        elif code[j] == "{":
            depth -= 1
            if depth == 0:
                return j
    return 0


def enclosing_loop(source: str, *lines: int) -> Loop | None:
    """The innermost loop whose header and body span every one of ``lines``."""
    spans = [lp for lp in loops(source) if all(lp.head <= n <= lp.end for n in lines)]
    return min(spans, key=lambda lp: lp.end - lp.head, default=None)


def barriers(kern: Kernel, lo: int, hi: int) -> list[int]:
    """The lines strictly between ``lo`` and ``hi`` that call a block barrier."""
    return [n for n in range(lo + 1, hi) if n <= len(kern.lines)
            and _BARRIER.search(kern.lines[n - 1])]


# ---------------------------------------------------------------- the shapes


def _lost_update(race: Race, races: Sequence[Race], kern: Kernel) -> bool:
    """Two threads both wrote one word at one line that also reads it (``x += v``): the
    write-write pair at one line, with a read of the array there (a race, or the code)."""
    if race.kinds != ("write", "write") or race.lines[0] != race.lines[1]:
        return False
    line = race.lines[0]
    if any(r.array == race.array and "read" in r.kinds and line in r.lines for r in races):
        return True
    code = kern.lines[line - 1] if 0 < line <= len(kern.lines) else ""
    arr = re.escape(race.array)
    return bool(re.search(rf"\b{arr}\b[^;=]*([+\-*/|&^]=|\+\+|--)", code)
                or re.search(rf"\b{arr}\b[^;=]*=[^=][^;]*\b{arr}\b", code))


def _target(race: Race, kern: Kernel) -> str:
    """How the update of the raced word reads in the source (``total``, ``&sums[...]``)."""
    line = race.lines[0]
    code = kern.lines[line - 1] if 0 < line <= len(kern.lines) else ""
    m = re.search(rf"\b{re.escape(race.array)}\s*(\[[^\]]*\])*", code)
    return m.group(0).strip() if m else race.element


def _quote(kern: Kernel, line: int) -> str:
    return kern.at(line) or f" (line {line})"


def _lost_update_fix(race: Race, kern: Kernel) -> str:
    line, target = race.lines[0], _target(race, kern)
    blocks = race.other_block is not None
    who = "threads of different blocks" if blocks else "many threads of a block"
    tree = ("" if blocks else
            ", or a tree: each thread stores its value in its own element of a __shared__ "
            "array (buf[threadIdx.x]), then the active half adds the other half's values "
            "with a __syncthreads() after every step, and one thread stores buf[0]")
    return (f"{who} update one word at once{_quote(kern, line)}: each reads {race.element}, "
            "adds and writes it back, so two threads that read it before either writes lose "
            "one of the two updates. All these updates fall in one barrier interval, so no "
            "barrier can fix it; make the update one atomic, "
            f"atomicAdd(&{target}, value) on line {line}{tree}")


def _ordered_lines(race: Race) -> tuple[tuple[str, int], tuple[str, int]]:
    """(kind, line) of the write and of the other access: the write first."""
    (k1, k2), (l1, l2) = race.kinds, race.lines
    return ((k1, l1), (k2, l2)) if "write" in k1 else ((k2, l2), (k1, l1))


def _barrier_word(race: Race, races: Sequence[Race]) -> str:
    """``__syncwarp()`` where every race is between lanes of one warp, else the block's."""
    return "__syncwarp()" if all(r.same_warp for r in races) else "__syncthreads()"


def _end_of_body(loop: Loop | None, after: int, kern: Kernel | None = None,
                 source: str = "") -> str:
    """Where a barrier at the end of ``loop``'s body goes, after line ``after`` (and after
    the inner loop that holds it): on the first empty line there, if there is one."""
    if loop is None:
        return f"after line {after}"
    inner = [lp for lp in loops(source) if lp.head > loop.head and lp.end < loop.end
             and lp.head <= after <= lp.end] if source else []
    last = max([after, *(lp.end for lp in inner)])
    slot = next((n for n in range(last + 1, loop.end) if kern is not None
                 and n <= len(kern.lines) and not kern.lines[n - 1]), None)
    reads = f"after line {after}" if last == after else \
        f"after line {after} and the loop that holds it (which ends on line {last})"
    if not loop.braced:
        return (f"at the end of the body of the loop on line {loop.head} (put the body in "
                f"braces), {reads}")
    place = f" (on line {slot}, empty now)" if slot else ""
    return (f"as the last statement of the body of the loop on line {loop.head}{place}, "
            f"{reads}, before the loop's closing brace on line {loop.end}")


def _ordering_fix(race: Race, races: Sequence[Race], kern: Kernel, source: str
                  ) -> tuple[str, str]:
    """The kind ("across trips" or "missing barrier") and fix of a write against a read."""
    (_, w), (_, r) = _ordered_lines(race)
    sync = _barrier_word(race, races)
    where = ("where every thread of the block reaches it (never inside an if that only "
             "some threads enter)" if sync == "__syncthreads()" else
             "(since Volta the lanes of a warp need not run in step; volatile does not "
             "order them)")
    loop = enclosing_loop(source, w, r) if source else None
    lo, hi = min(w, r), max(w, r)
    between = barriers(kern, lo, hi)
    if w == r:  # one statement reads and writes (buf[tid] += buf[tid + s])
        if loop is not None:
            return "across trips", (
                f"line {w} reads an element that another thread writes on the same line in "
                f"another trip of the loop: put {sync} {_end_of_body(loop, w, kern, source)}, "
                f"{where}, so that every trip's writes are done before the next trip reads")
        if source:
            return "missing barrier", (
                f"line {w} reads an element that another thread writes on the same line: read "
                f"it into a register first, then {sync}, then write ({where})")
        return "missing barrier", (
            f"line {w} reads an element that another thread writes on the same line: put "
            f"{sync} after line {w}, so that each step's writes are done before the next "
            f"step reads, {where}")
    if between and loop is not None:
        b = between[0]
        if w < r:
            return "across trips", (
                f"the barrier on line {b} orders the store on line {w} before the read on "
                f"line {r} within one trip of the loop; the race is across trips: the read on "
                f"line {r} of one trip against the store on line {w} of the next, which "
                "overwrites what slower threads still read. The loop needs a second barrier: "
                f"put {sync} {_end_of_body(loop, r, kern, source)}, {where}")
        return "across trips", (
            f"the barrier on line {b} orders the read on line {r} before the store on line "
            f"{w} within one trip of the loop; the race is across trips: the store on line "
            f"{w} of one trip against the read on line {r} of the next. The loop needs a "
            f"second barrier: put {sync} {_end_of_body(loop, w, kern, source)}, {where}")
    fix = (f"put {sync} between line {lo} and line {hi} (after the "
           f"{'store' if w == lo else 'read'} on line {lo}, before the "
           f"{'read' if w == lo else 'store'} on line {hi}), {where}")
    if loop is not None and w < r and not barriers(kern, r, loop.end + 1):
        fix += (f"; the loop of line {loop.head} then comes back to the store on line {w}: "
                f"it needs another {sync} at the end of its body, after the reads on line "
                f"{r}")
    return "missing barrier", fix


def _blocks_fix(race: Race, kern: Kernel) -> str:
    device = race.array not in _params(kern) and re.search(
        rf"__device__[^;(]*\b{re.escape(race.array)}\s*[\[;=]", kern.text) is not None
    lines = f"lines {race.lines[0]} and {race.lines[1]}" if race.lines[0] != race.lines[1] \
        else f"line {race.lines[0]}"
    if device:
        return (f"{race.array} is a __device__ variable: one copy for the whole launch, "
                "which every block uses at the same time on a GPU (the blocks of a launch run "
                "together, in no order, and no barrier orders two blocks). Declare it "
                f"__shared__ inside the kernel, so that each block has its own ({lines})")
    return ("the blocks of a launch run at the same time on a GPU, in no order, and no "
            f"barrier orders two blocks ({lines}): give each block its own part of "
            f"{race.array} (index it with blockIdx), and make an update that several blocks "
            f"share one atomic (atomicAdd(&{_target(race, kern)}, value))")


def _params(kern: Kernel) -> set[str]:
    m = re.search(r"__global__[^(]*\(([^)]*)\)", kern.text, re.S)
    return set(re.findall(r"(\w+)\s*(?:,|$)", m.group(1))) if m else set()


def _atomic_fix(race: Race, kern: Kernel) -> str:
    (k1, k2), (l1, l2) = race.kinds, race.lines
    plain, atomic = ((k1, l1), l2) if k2 == "atomic write" else ((k2, l2), l1)
    if race.other_block is not None:
        return (f"the plain {plain[0]} of {race.element} on line {plain[1]} and the atomic on "
                f"line {atomic} are made by threads of two blocks, which run at the same time "
                "on a GPU in no order (no barrier orders two blocks): make the plain access "
                "an atomic too, or let the word be set before the launch (the host, or an "
                "earlier kernel) so that the kernel only adds to it")
    return (f"the atomic on line {atomic} makes only its own read-modify-write one step: the "
            f"plain {plain[0]} of {race.element} on line {plain[1]} by another thread races "
            f"with it. Put __syncthreads() between line {min(plain[1], atomic)} and line "
            f"{max(plain[1], atomic)}, where every thread of the block reaches it, or make "
            "that access an atomic too")


def _index_sources(kern: Kernel, line: int, array: str) -> list[int]:
    """The lines above ``line`` that set the variables ``array``'s index there is made of."""
    code = kern.lines[line - 1] if 0 < line <= len(kern.lines) else ""
    m = re.search(rf"\b{re.escape(array)}\s*((?:\[[^\]]*\]\s*)+)", code)
    names = set(re.findall(r"\b[a-z_]\w*\b", m.group(1))) if m else set()
    found = {kern.last_before(rf"\b{n}\s*=[^=]", line) for n in names}
    return sorted(n for n in found if n)


def _overlap_fix(race: Race, kern: Kernel, nan_read: bool) -> str:
    """One line storing one element from several threads, told as the index error it is:
    different values stored, or elements left unstored (the output's NaN)."""
    line = race.lines[0]
    t1, t2 = race.threads
    set_on = _index_sources(kern, line, race.array)
    made = (f" (its index is made of values set on line{'s' if len(set_on) > 1 else ''} "
            + " and ".join(str(n) for n in set_on) + ")") if set_on else ""
    what = "different values" if race.values == 2 else "values"
    said = (f"threads {t1} and {t2} store {what} to {race.element} on line {line}"
            f"{_quote(kern, line)}: the index there sends two threads to one element{made}")
    if nan_read:
        said += (f", while some elements of {race.array} are stored by no thread (the output "
                 "holds NaN where no input does: the emulator fills shared memory with NaN)")
    return (said + ". An index is wrong, not the order of the accesses (a barrier would "
            "only choose which store comes last): each thread must store its own elements, "
            "and every element that is read must be stored")


def _same_store_fix(race: Race, kern: Kernel) -> str:
    line = race.lines[0]
    lanes = "lanes of one warp" if race.same_warp else "threads"
    if race.values == 1:
        return (f"several {lanes} store the same value to {race.element} on line {line}, "
                "with no barrier after one another's store: harmless here, but a race all "
                "the same, and no barrier removes it; let one thread store it (e.g. "
                "if (threadIdx.x == 0), or if (lane == 0)) and __syncthreads() before "
                f"others read it{_quote(kern, line)}")
    return (f"several {lanes} store to {race.element} on line {line}, each with no barrier "
            "after the other's store: two stores to one element, which no barrier makes "
            "right (a barrier of the warp or of the block would only choose which store "
            "comes last). Where they store the same value, let one thread store it (e.g. "
            "if (threadIdx.x == 0), or if (lane == 0)) and __syncthreads() before others "
            f"read it; where the values differ, the index on line {line} sends several "
            f"threads to one element{_quote(kern, line)}: each must store its own")


def _two_stores_fix(race: Race, kern: Kernel, nan_read: bool) -> str:
    l1, l2 = race.lines
    t1, t2 = race.threads
    said = (f"{race.element} is stored on line {l1} by thread {t1} and on line {l2} by "
            f"thread {t2}: two different stores land on one element, so an index is wrong, "
            "not the order of the accesses (a barrier between them would only decide which "
            "store survives)")
    if nan_read:
        said += (", and the output holds NaN where no input does: an element of "
                 f"{race.array} that no thread stored is read (the emulator fills shared "
                 "memory with NaN)")
    return (said + f". Compare the indices of the two stores{_quote(kern, l1)} and"
            f"{_quote(kern, l2)}: each element must be stored by one of them, and every "
            "element that is read must be stored by one")


def shape_of(race: Race, races: Sequence[Race], source: str = "", nan_read: bool = False
             ) -> Shape:
    """The shape of ``race`` (one of ``races``, which tell its context) and its fix."""
    kern = Kernel(source)
    kinds = set(race.kinds)
    if _lost_update(race, races, kern):
        return Shape("lost update", race, "race", _lost_update_fix(race, kern))
    if "atomic write" in kinds:
        return Shape("atomic", race, "race", _atomic_fix(race, kern))
    if race.other_block is not None:
        return Shape("blocks", race, "race", _blocks_fix(race, kern))
    if kinds == {"write"}:
        if race.lines[0] == race.lines[1] and (race.values == 2 or nan_read):
            return Shape("same store", race, OVERLAP, _overlap_fix(race, kern, nan_read))
        if race.lines[0] == race.lines[1]:
            return Shape("same store", race, "race", _same_store_fix(race, kern))
        return Shape("two stores", race, OVERLAP, _two_stores_fix(race, kern, nan_read))
    kind, fix = _ordering_fix(race, races, kern, source)
    return Shape(kind, race, "race", fix)


#: the order in which shapes explain a set of races: the one whose fix is needed first
_RANK = ("blocks", "lost update", "atomic", "missing barrier", "across trips", "same store",
         "two stores")


def classify(races: Sequence[Race], source: str = "", nan_read: bool = False) -> Shape:
    """The race that tells the kernel's mistake, its shape and fix: a lost update or two
    blocks first (no barrier fixes them), then a read against a write (between warps
    before within one), then stores alone. ``nan_read``: the output holds NaN computed
    from a value nobody wrote."""
    if not races:
        raise ValueError("no race to classify")
    shapes = [shape_of(r, races, source, nan_read) for r in races]
    lead = representative(races)
    return min(shapes, key=lambda s: (_RANK.index(s.kind), s.race is not lead,
                                      s.race.same_warp))


def fix_text(races: Sequence[Race], source: str = "") -> str:
    """The fix of the race that tells the mistake (for an analysis summary's ``Fix:``)."""
    return classify(races, source).fix if races else ""
