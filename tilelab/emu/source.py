"""A kernel source as both compilers read it: one normal form, one set of limits.

The grader (for nvcc) and the emulator (for g++) call :func:`prepare` before any scan, and
compile the text it returns, so what the scanners read is exactly what the compiler reads:

- byte-order marks are dropped (the compilers skip one at the start; one elsewhere is an
  error for them, so dropping it refuses nothing they would accept);
- CRLF and a lone CR end a line, as they do for the compilers (a ``//`` comment ended by a
  lone CR no longer hides the next line's ``#include`` from the scan);
- form feed and vertical tab are blanks, as they are for the compilers (so
  ``\\f#include`` is read as the directive it is).

It also bounds how many kernels, shared declarations and brackets a source may hold, so
every scan of it takes time linear in its length (a source of thousands of ``__global__``
tokens is refused at once instead of being scanned for minutes).
"""

from __future__ import annotations

import re

BOM = "\ufeff"
#: The most of each token a kernel source of this course may hold (a few are used).
TOKEN_LIMITS = {"__global__": 64, "__shared__": 256, "{": 20000, "(": 50000}


class SourceTooComplex(ValueError):
    """The source holds more kernels, shared arrays or brackets than any kernel needs."""


class ReservedName(ValueError):
    """The source names (or tests) one of the emulator's own macros or symbols."""


# The emulator's own names: its build macros (TILELAB_ANALYSIS tells the analysed build
# from the checked one), its prelude's macros and namespace, its exported symbols.
_RESERVED = re.compile(r"\b(?:TILELAB_\w*|TL_\w+|tl_emu\w*|tl_reg_\w+|tilelab_\w+)\b")


def check_reserved(masked: str) -> None:
    """Raise :class:`ReservedName` for the first of the emulator's names in ``masked`` (the
    source with comments and literals blanked), read as the compiler reads it (line splices
    joined): a kernel may neither use nor test them, so the build the analysis reads and
    the build whose output is checked cannot differ."""
    m = _RESERVED.search(_SPLICE.sub("", masked))
    if m:
        line = masked.count("\n", 0, _source_offset(masked, m.start())) + 1
        raise ReservedName(
            f"line {line}: `{m.group(0)}` is a name of the CPU emulator's own; a kernel may "
            "not use or test it (the build analysed for races and bank conflicts must be the "
            "build whose output is checked). Rename it.")


def check_pasting(masked: str) -> None:
    """Raise :class:`ReservedName` for token pasting (``##`` or its digraph) in ``masked``:
    the one way a macro builds a name no scan of the source can see (the grader refuses it
    in a graded kernel; the emulator, running a learner's own code, accepts it)."""
    paste = _PASTE.search(masked)
    if paste:
        raise ReservedName(
            f"line {masked.count(chr(10), 0, paste.start()) + 1}: token pasting "
            f"(`{paste.group(0)}`) is not accepted in a graded kernel: a macro that pastes "
            "tokens can build names of the CPU emulator's own, which a kernel may not use. "
            "Write the names out in full.")


_PASTE = re.compile(r"##|%:%:")  # the operator, and its digraph
_SPLICE = re.compile(r"\\[ \t]*\n")  # g++ joins a backslash, blanks and a newline too


def _source_offset(masked: str, joined: int) -> int:
    """Where offset ``joined`` of ``masked`` with its line splices joined lies in ``masked``."""
    shift = 0
    for sp in _SPLICE.finditer(masked):
        if sp.start() - shift > joined:
            break
        shift += sp.end() - sp.start()
    return joined + shift


def normalize(src: str) -> str:
    """``src`` with its BOMs dropped, CRLF and CR made LF, form feed and vertical tab
    made spaces: the text a scan and the compiler then read alike."""
    src = src.replace(BOM, "")  # one at the start is skipped; elsewhere a compiler error
    return src.replace("\r\n", "\n").replace("\r", "\n").replace("\f", " ").replace("\v", " ")


_TOKENS = re.compile(r"\b__global__\b|\b__shared__\b|[{(]")


def check_counts(src: str) -> None:
    """Raise :class:`SourceTooComplex` when a token of ``TOKEN_LIMITS`` is over its limit."""
    counts: dict[str, int] = dict.fromkeys(TOKEN_LIMITS, 0)
    for m in _TOKENS.finditer(src):
        tok = m.group(0)
        counts[tok] += 1
        if counts[tok] > TOKEN_LIMITS[tok]:
            what = {"{": "braces", "(": "parentheses"}.get(tok, f"{tok} keywords")
            raise SourceTooComplex(
                f"the kernel source holds more than {TOKEN_LIMITS[tok]} {what}; a kernel for "
                "this course needs a handful. Submit only the kernel (and the functions it "
                "calls).")


def prepare(src: str) -> str:
    """The normal form of ``src`` (see :func:`normalize`), once its counts are in bounds."""
    text = normalize(src)
    check_counts(text)
    return text
