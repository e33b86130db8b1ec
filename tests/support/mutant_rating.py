"""How the grader's feedback on one mutant (:mod:`support.mutants`) is rated.

A mutant is graded on the emulator as ``tilelab check --backend emu`` grades a file
(:func:`grade`: :func:`tilelab.grading.pipeline.evaluate` in this process, as
tests/test_mistakes.py does), and its verdict is rated (:func:`rate`):

- ``equivalent``: graded fully correct; discarded, as a mutant that computes the same thing.
  Except a mutant that is wrong by construction whatever its output (a barrier removed: every
  barrier of the course's kernels orders accesses of different threads; an atomic made a
  plain update; an accumulator never initialised, undefined in C): graded correct, it is
  ``wrong`` (the grader missed a real bug).
- ``compile``: refused before it ran (it does not compile, or the subset refuses it);
  :func:`rate` also says whether the refusal names the mutated line.
- ``right``: the messages name the mutated line (:attr:`Mutant.lines`; for a race, two
  accesses named on either side of a removed barrier count too) and give a cause that
  :data:`ACCEPTABLE` allows for the mutation's class, with no advice that cannot fix it.
- ``vague``: the verdict is right (wrong output, or a failed launch), but no line of
  :attr:`Mutant.lines` is named, or the cause is the catch-all (:data:`CATCH_ALL`), none,
  or one this table does not know.
- ``wrong``: advice that cannot fix it: ``__syncwarp()`` (every launch here has 8 or more
  warps a block); a barrier to add (``put __syncthreads()``, ``check both __syncthreads()``)
  for a mutation that is no missing or misplaced barrier; a cause from :data:`CAUSES`
  that :data:`ACCEPTABLE` does not allow for the class, asserted; an allowed cause whose
  diagnosis (``Likely cause: ...``) names one line, not the mutated one, nor one that reads
  a name the mutated line sets (a race's two accesses, a failed launch's line and a line
  using the wrong value are facts, not a wrong cause: vague); or a wrong mutant graded
  correct (above). A failed launch's own report (no "Likely cause") is a fact: with a cause
  the class does not allow, it is vague, not wrong.

The cause is the message's ``Likely cause: <cause>:``; a launch that failed with no such
sentence has the cause of its error (:data:`LAUNCH_ERRORS`: an access out of bounds, a
misaligned one, a divergent barrier, a timeout). The class -> acceptable causes mapping
(every cause one of :data:`tilelab.grading.diagnosis.CAUSES`, or a launch error's):

==========================  ===================================================================
class                       acceptable causes
==========================  ===================================================================
index swap                  swapped row/column, tile index, misplaced rows, out of bounds,
                            never written, boundary, stale shared data
off by one                  off-by-one, boundary, out of bounds, missing term, loop stops
                            early, partial tile dropped, never written, misplaced rows,
                            tile index, stale shared data, misaligned
wrong stride                swapped row/column, tile index, misplaced rows, out of bounds,
                            never written, stale shared data, loop stops early
guard changed               boundary, off-by-one, out of bounds, never written, partial tile
                            dropped, stale shared data, loop stops early, missing term
guard removed               boundary, out of bounds, never written, stale shared data,
                            off-by-one, partial tile dropped
barrier removed             race, stale shared data
barrier moved               race, stale shared data, divergent barrier
accumulator reset           accumulator reset, one term only, zeros stored
accumulator assigned        one term only, accumulator reset, zeros stored
accumulator not initialised never initialised, start value
tile loads swapped          tile index, swapped row/column, misplaced rows, out of bounds,
                            stale shared data
vector width                misaligned, out of bounds, boundary, off-by-one, missing term,
                            tile index, misplaced rows, never written, stale shared data
shared shrunk               out of bounds, stale shared data, boundary
atomic replaced             race
==========================  ===================================================================
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from support.mutants import CLASSES, Mutant
from tilelab.grading.diagnosis import CAUSES

#: the causes a launch's error gives when the message has no "Likely cause"
LAUNCH_ERRORS = {"OutOfBoundsAccess": "out of bounds", "BarrierDivergence": "divergent barrier",
                 "KernelTimeout": "timed out", "KernelCrash": "crash"}
#: the diagnosis's catch-all: a verdict that says only this is vague
CATCH_ALL = frozenset({"indexing"})
_INDEX = ("swapped row/column", "tile index", "misplaced rows", "out of bounds", "never written")
ACCEPTABLE: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "index swap": (*_INDEX, "boundary", "stale shared data"),
    "off by one": ("off-by-one", "boundary", "out of bounds", "missing term", "loop stops early",
                   "partial tile dropped", "never written", "misplaced rows", "tile index",
                   "stale shared data", "misaligned"),
    "wrong stride": (*_INDEX, "stale shared data", "loop stops early"),
    "guard changed": ("boundary", "off-by-one", "out of bounds", "never written",
                      "partial tile dropped", "stale shared data", "loop stops early",
                      "missing term"),
    "guard removed": ("boundary", "out of bounds", "never written", "stale shared data",
                      "off-by-one", "partial tile dropped"),
    "barrier removed": ("race", "stale shared data"),
    "barrier moved": ("race", "stale shared data", "divergent barrier"),
    "accumulator reset": ("accumulator reset", "one term only", "zeros stored"),
    "accumulator assigned": ("one term only", "accumulator reset", "zeros stored"),
    "accumulator not initialised": ("never initialised", "start value"),
    "tile loads swapped": ("tile index", "swapped row/column", "misplaced rows", "out of bounds",
                           "stale shared data"),
    "vector width": ("misaligned", "out of bounds", "boundary", "off-by-one", "missing term",
                     "tile index", "misplaced rows", "never written", "stale shared data"),
    "shared shrunk": ("out of bounds", "stale shared data", "boundary"),
    "atomic replaced": ("race",),
}.items()}
KNOWN = frozenset(CAUSES) | frozenset(LAUNCH_ERRORS.values()) | {"misaligned"}
#: classes wrong by construction: graded correct is a bug the grader missed
WRONG_IF_CORRECT = frozenset({"barrier removed", "atomic replaced",
                              "accumulator not initialised"})
BARRIER_CLASSES = frozenset({"barrier removed", "barrier moved"})
RATINGS = ("equivalent", "compile", "right", "vague", "wrong", "error")

_BARRIER_ADVICE = re.compile(r"(put|add|insert|place)( a| one)? __syncthreads\(\)|"
                             r"check both __syncthreads\(\)")
_LINES = re.compile(r"\blines? (\d+)((?:(?:,| and|, and) \d+)*)")
_RACE_PAIR = re.compile(r"on line (\d+) by thread [^;]*? on line (\d+) by thread")


@dataclass(frozen=True)
class Rating:
    rating: str  # one of RATINGS
    why: str
    cause: str | None
    named: tuple[int, ...]  # every line the messages name


def named_lines(text: str) -> list[int]:
    """Every line number ``text`` names ("line 12", "lines 3 and 5", "kernel.cu:7:")."""
    out = []
    for m in _LINES.finditer(text):
        out.append(int(m.group(1)))
        out += [int(x) for x in re.findall(r"\d+", m.group(2))]
    out += [int(x) for x in re.findall(r"kernel\.cu:(\d+):", text)]
    return out


def cause_of(text: str) -> tuple[str | None, str]:
    """The cause the messages give and the text that gives it (the sentence after
    "Likely cause:", or the failed launch's message)."""
    if m := re.search(r"Likely cause: ([^:]+):(.*)", text, re.S):
        return m.group(1).strip(), m.group(2)
    if m := re.search(r"the launch failed: (\w+):(.*)", text, re.S):
        if "isaligned" in m.group(2):
            return "misaligned", m.group(2)
        return LAUNCH_ERRORS.get(m.group(1), m.group(1)), m.group(2)
    return None, ""


def _names_it(m: Mutant, text: str, cause: str | None) -> bool:
    if set(named_lines(text)) & set(m.lines):
        return True
    if cause == "race" and m.klass in BARRIER_CLASSES:  # two accesses around the barrier
        return any(min(int(a), int(b)) < m.line < max(int(a), int(b))
                   for a, b in _RACE_PAIR.findall(text))
    return False


def rate(m: Mutant, v: dict[str, Any]) -> Rating:
    """The rating of verdict ``v`` (a :meth:`Verdict.to_dict`, or its ``compiled``,
    ``correct``, ``messages`` and ``error``) of mutant ``m``."""
    text = "\n".join(v.get("messages") or [])
    named = tuple(named_lines(text))
    if v.get("error"):
        return Rating("error", f"the grader failed: {v['error']}", None, named)
    if not v.get("compiled"):
        says = "names" if m.line in named else "does not name"
        return Rating("compile", f"refused before it ran; {says} line {m.line}", None, named)
    if v.get("correct"):
        if m.klass in WRONG_IF_CORRECT:
            return Rating("wrong", f"graded correct, yet a {m.klass} mutant is wrong", None,
                          named)
        return Rating("equivalent", "graded correct", None, named)
    cause, said = cause_of(text)
    if "__syncwarp()" in text:
        return Rating("wrong", "advises __syncwarp() (every block has several warps)", cause,
                      named)
    if m.klass not in BARRIER_CLASSES and _BARRIER_ADVICE.search(text):
        return Rating("wrong", f"advises a barrier for a {m.klass}", cause, named)
    if cause is None or cause in CATCH_ALL:
        return Rating("vague", f"cause {cause or 'none'}", cause, named)
    if cause not in KNOWN:
        return Rating("vague", f"cause {cause!r} unknown to the rating", cause, named)
    diagnosed = "Likely cause:" in text  # else a failed launch's own report: a fact
    if cause not in ACCEPTABLE[m.klass]:
        if not diagnosed:
            return Rating("vague", f"the launch's error ({cause}) alone", cause, named)
        return Rating("wrong", f"cause {cause!r} for a {m.klass}", cause, named)
    if _names_it(m, text, cause):
        return Rating("right", "", cause, named)
    own = set(named_lines(said))
    if len(own) == 1 and diagnosed and cause != "race":  # a race's lines are its accesses
        line = own.pop()
        if used := _uses(m, line):
            return Rating("vague", f"names line {line}, which uses {used} (set on line "
                          f"{m.line})", cause, named)
        return Rating("wrong", f"names line {line} as the cause, not line {m.line}", cause,
                      named)
    return Rating("vague", f"names none of lines {list(m.lines)}", cause, named)


_SETS = re.compile(r"\b(\w+)\s*(?:\[[^\]]*\]\s*)*[-+*/]?=(?!=)")


def _uses(m: Mutant, line: int) -> str | None:
    """A name the mutated line sets (before or after the edit) that line ``line`` of the
    mutant reads, or None: a diagnosis naming where a wrong value is used, not made."""
    lines = m.source.splitlines()
    if not 0 < line <= len(lines):
        return None
    code = re.sub(r"//.*", "", lines[line - 1])
    for name in sorted(set(_SETS.findall(m.before)) | set(_SETS.findall(m.after))):
        declared = re.search(rf"\b(int|float|bool)\s+{re.escape(name)}\b", code)
        if re.search(rf"(?<![\w.]){re.escape(name)}\b", code) and not declared:
            return name  # (a line declaring its own ``i`` reads another variable)
    return None


def grade(m: Mutant) -> dict[str, Any]:
    """The mutant graded on the emulator (as ``tilelab check --backend emu`` grades a file):
    the verdict's ``compiled``, ``correct``, ``messages`` and ``error``, and ``seconds``."""
    from tilelab.grading.pipeline import evaluate

    t0 = time.perf_counter()
    try:
        d = evaluate(m.exercise, m.source, "emu").to_dict()
    except Exception as exc:  # the grader itself failed: rated "error"
        d = {"error": f"{type(exc).__name__}: {exc}"}
    out = {k: d.get(k) for k in ("compiled", "correct", "messages", "error")}
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


assert set(ACCEPTABLE) == set(CLASSES)
