"""Turn a learner's CUDA C source into C++ for g++, keeping every line where it was.

The output is: ``#include "tilelab_emu.h"``, PyCUDA's ``extern "C" {`` (unless
``no_extern_c``), ``#line 1 "kernel.cu"``, the transformed source (same number of lines),
then the entry-point table (see ``kernels.entry_code``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .casts import rewrite_casts
from .checks import check_includes, check_unsupported
from .conditionals import has_conditionals, preprocess
from .device_globals import DeviceGlobal, find_globals
from .device_globals import entry_code as globals_code
from .errors import CompileError
from .kernels import KernelSource, entry_code, find_kernels
from .lexer import mask, scopes
from .shared import SharedDecl, rewrite_declarations, rewrite_uses
from .shifts import rewrite_shifts
from .source import ReservedName, SourceTooComplex, check_reserved, prepare


@dataclass(frozen=True)
class Translation:
    """The C++ to compile, with the kernels and shared declarations found."""

    code: str
    kernels: tuple[KernelSource, ...]
    shared: tuple[SharedDecl, ...]
    analysis: bool
    globals: tuple[DeviceGlobal, ...] = ()
    lockstep: bool = False  # volatile accesses: the lanes of a warp take them in step


def _apply(src: str, edits: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, text in sorted(edits):
        if start < last:
            continue  # overlapping edit (a use inside a declaration): keep the first
        out.append(src[last:start])
        out.append(text)
        last = end
    out.append(src[last:])
    return "".join(out)


def _outside(new: list[tuple[int, int, str]], edits: list[tuple[int, int, str]]
             ) -> list[tuple[int, int, str]]:
    """``new`` (edits in threes, one rewrite each) less each rewrite that reaches inside a
    span another edit replaces (a rewritten declaration, say)."""
    spans = [(s, e) for s, e, _ in edits if e > s]
    out = []
    for k in range(0, len(new), 3):
        three = new[k:k + 3]
        if not any(s < p < e or s < q < e for p, q, _ in three for s, e in spans):
            out += three
    return out


def translate(source: str, *, analysis: bool = False, no_extern_c: bool = False,
              defines: tuple[str, ...] = ()) -> Translation:
    """Check and transform ``source``; raises ``CompileError``/``UnsupportedConstruct``.

    ``defines`` (``-DNAME=VALUE``) decide which ``#if`` branches hold kernels and globals.
    """
    try:
        source = prepare(source)  # the text g++ reads, as the scans below read it
    except SourceTooComplex as exc:
        raise CompileError(str(exc)) from None
    masked = mask(source)
    try:
        check_reserved(masked)
    except ReservedName as exc:
        raise CompileError(str(exc)) from None
    blanks = check_includes(source, masked)
    check_unsupported(masked)
    for start, end in blanks:
        masked = masked[:start] + "".join(c if c == "\n" else " " for c in masked[start:end]) \
            + masked[end:]
    edits = [(s, e, "".join(c for c in masked[s:e] if c == "\n")) for s, e in blanks]
    all_scopes = scopes(masked)
    decl_edits, decls = rewrite_declarations(masked, all_scopes, analysis)
    edits += decl_edits
    edits += rewrite_uses(masked, decls)
    edits += rewrite_casts(masked)
    edits += _outside(rewrite_shifts(masked), edits)
    body = _apply(source, edits)
    if body.count("\n") != source.count("\n"):  # would misreport every line number
        raise CompileError("internal error: the emulator's source transform moved lines; "
                           "please report this kernel.")
    kernels = find_kernels(masked)
    found = find_globals(masked, all_scopes)
    if has_conditionals(masked):  # keep what the preprocessor keeps
        seen = mask(preprocess(masked, defines))
        alive = {k.name for k in find_kernels(seen)}
        kernels = [k for k in kernels if k.name in alive]
        live_globals = {g.name for g in find_globals(seen, scopes(seen))}
        found = [g for g in found if g.name in live_globals]
    head = ['#include "tilelab_emu.h"']
    if not no_extern_c:
        head.append('extern "C" {')
    head.append('#line 1 "kernel.cu"')
    tail = "\n" + ("}\n" if not no_extern_c else "") + entry_code(kernels) + globals_code(found)
    code = "\n".join(head) + "\n" + body + tail
    lockstep = re.search(r"\bvolatile\b", masked) is not None
    return Translation(code, tuple(kernels), tuple(decls), analysis, tuple(found), lockstep)
