"""Casts to integer types, rewritten to convert as a GPU does (on the same line).

On a GPU a floating value converted to an integer type saturates at the ends of the range
and NaN gives 0 (to ``char`` and ``short``, nvcc converts to 32 bits and keeps the low
bytes); g++ on x86-64 gives INT_MIN (or wraps, for unsigned types). So each explicit
conversion to an integer type (C cast ``(int)x``, ``static_cast<int>(x)``, functional
``int(x)``) becomes ``tl_emu::Cvt<int>::from(x)``, which converts floating values with CUDA's
rule and anything else exactly as the cast did.
"""

from __future__ import annotations

import re

from .lexer import bracket_pairs, directives

Edit = tuple[int, int, str]

_TYPE = (r"(?:(?:unsigned|signed)\s+)?(?:long\s+long(?:\s+int)?|long(?:\s+int)?|short(?:\s+int)?"
         r"|int|char)|unsigned|signed|size_t|ptrdiff_t|u?int(?:8|16|32|64)_t|intptr_t|uintptr_t")
_C_CAST = re.compile(rf"\(\s*(?:const\s+)?({_TYPE})\s*(?:const\s*)?\)")
# Any cast to a type the prefix of an operand may hold: `(float)`, `(const T*)`, ...
_ANY_CAST = re.compile(
    r"\(\s*(?:(?:const|volatile|unsigned|signed|struct)\s+)*(?:(?:float|double|int|long|"
    r"short|char|bool|size_t|u?int\d+_t|[A-Za-z_]\w*\s*\*+)\b[\s*&]*(?:const\s*)?)+\)")
_STATIC = re.compile(rf"\bstatic_cast\s*<\s*(?:const\s+)?({_TYPE})\s*>\s*(?=\()")
_FUNCTIONAL = re.compile(rf"(?<![\w.>:])({_TYPE})\s*(?=\()")
_NOT_OPERAND = frozenset((
    "const", "volatile", "override", "final", "noexcept", "throw", "__attribute__",
    "__restrict__", "__restrict", "restrict", "mutable", "try", "requires", "if", "else",
    "for", "while", "do", "return", "case", "default", "switch", "break", "continue",
    "goto", "struct", "class", "union", "enum", "typedef", "using", "namespace", "template",
    "typename", "public", "private", "protected", "static", "extern", "inline", "virtual",
))
_IDENT = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")
_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F']+|[0-9][0-9']*\.?[0-9']*(?:[eE][+-]?[0-9]+)?|"
                     r"\.[0-9]+(?:[eE][+-]?[0-9]+)?)[uUlLfF]*")
# What may stand before a functional cast `int(...)` used as a value.
_VALUE_BEFORE = re.compile(r"(?:[=(,\[?:+\-*/%&|^!~]|<<|>>|\breturn)\s*$")


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n\\":
        i += 1
    return i


def operand_end(masked: str, i: int, pairs: dict[int, int]) -> int:
    """End of the cast-expression starting at ``i`` (prefix operators, a primary, postfix
    operators), or -1 when none starts there."""
    n = len(masked)
    i = _skip_ws(masked, i)
    while i < n:  # prefix operators and nested casts
        if masked.startswith(("++", "--"), i):
            i = _skip_ws(masked, i + 2)
        elif masked[i] in "-+!~*&" and not masked.startswith(("&&", "->"), i):
            i = _skip_ws(masked, i + 1)
        elif masked[i] == "(" and (c := _C_CAST.match(masked, i) or _ANY_CAST.match(masked, i)):
            i = _skip_ws(masked, c.end())
        elif re.match(r"sizeof\b", masked[i:i + 7]):
            i = _skip_ws(masked, i + 6)
            if i < n and masked[i] == "(":
                return pairs[i] + 1 if i in pairs else -1
        else:
            break
    if i >= n:
        return -1
    if masked[i] == "(":
        if i not in pairs:
            return -1
        i = pairs[i] + 1
    elif masked[i] in "\"'":
        close = masked.find(masked[i], i + 1)
        if close < 0:
            return -1
        i = close + 1
    elif m := _IDENT.match(masked, i):
        if m.group(0) in _NOT_OPERAND:
            return -1
        i = m.end()
    elif m := _NUMBER.match(masked, i):
        if not m.group(0):
            return -1
        i = m.end()
    else:
        return -1
    while True:  # postfix operators
        j = _skip_ws(masked, i)
        if j < n and masked[j] in "[(" and j in pairs:
            i = pairs[j] + 1
        elif masked.startswith("->", j) or (j < n and masked[j] == "."):
            k = _skip_ws(masked, j + (2 if masked[j] == "-" else 1))
            m = _IDENT.match(masked, k)
            if not m:
                return i
            i = m.end()
        elif masked.startswith(("++", "--"), j):
            i = j + 2
        else:
            return i


def _skipped(masked: str) -> list[tuple[int, int]]:
    """Spans of directives other than #define (an #if cannot call a function)."""
    return [(d.start, d.end) for d in directives(masked) if d.name != "define"]


def rewrite_casts(masked: str) -> list[Edit]:
    """Edits sending every cast to an integer type through ``tl_emu::Cvt``."""
    pairs = bracket_pairs(masked)
    skip = _skipped(masked)
    edits: list[Edit] = []

    def outside(pos: int) -> bool:
        return not any(a <= pos < b for a, b in skip)

    for m in _C_CAST.finditer(masked):
        before = masked[max(0, m.start() - 40):m.start()]
        if re.search(r"(?:\bsizeof|\balignof|\b_Alignof|\bdecltype|\boperator)\s*$", before) \
                or not outside(m.start()):
            continue
        end = operand_end(masked, m.end(), pairs)
        if end < 0:
            continue
        edits.append((m.start(), m.end(), f"tl_emu::Cvt<{m.group(1)}>::from("))
        edits.append((end, end, ")"))
    for m in _STATIC.finditer(masked):
        if outside(m.start()):
            edits.append((m.start(), m.end(), f"tl_emu::Cvt<{m.group(1)}>::from"))
    for m in _FUNCTIONAL.finditer(masked):
        if not outside(m.start()) or not _VALUE_BEFORE.search(masked[max(0, m.start() - 40):
                                                                      m.start()]):
            continue
        if masked[max(0, m.start() - 12):m.start()].rstrip().endswith(("unsigned", "signed",
                                                                      "long")):
            continue  # the tail of a longer type name, matched on its own
        edits.append((m.start(), m.end(), f"tl_emu::Cvt<{m.group(1)}>::from"))
    return edits


# Implicit conversions (`int b = x * 10;`, `out[i] = x;`, an int argument or return value)
# are found by g++ itself: -Wfloat-conversion names each, and a diagnostics-only pass in
# JSON gives each one's source range, which is then wrapped in tl_emu::Cvt too.
_IMPLICIT = re.compile(
    r"^kernel\.cu:\d+:\d+: warning: conversion from '[^']+' to '([^']+)'(?: \{aka '([^']+)'\})?"
    r" may change value \[-Wfloat-conversion\]", re.M)
# The integer types a cast is rewritten for, as g++ spells them.
_INT_DEST = frozenset(("int", "unsigned int", "long int", "long unsigned int", "long long int",
                       "long long unsigned int", "char", "signed char", "unsigned char",
                       "short int", "short unsigned int"))
_MESSAGE = re.compile(r"conversion from .(?:float|double|long double). to .([^'\u2019]+).(?: "
                      r"\{aka .([^'\u2019]+).\})? may change value")


_COMPOUND = re.compile(r"\s*[-+*/]=(?!=)")  # the operator of `lhs op= rhs`


def _int_dest(named: str, aka: str | None) -> str | None:
    """The integer type a conversion goes to, as the source may write it, or None."""
    return named if (aka or named) in _INT_DEST else None


def has_implicit_int_conversions(stderr: str) -> bool:
    """Whether g++ (with -Wfloat-conversion) saw a floating value converted implicitly to an
    integer type in kernel.cu."""
    return any(_int_dest(m.group(1), m.group(2)) for m in _IMPLICIT.finditer(stderr))


def _token_end(line: str, col: int) -> int:
    """End of the token at ``col`` (an identifier, with a macro or function call's
    arguments, or a number), or -1."""
    m = _IDENT.match(line, col) or _NUMBER.match(line, col)
    if not m or not m.group(0):
        return -1
    end = m.end()
    j = _skip_ws(line, end)
    if j < len(line) and line[j] == "(" and _IDENT.match(line, col):
        depth = 0
        for k in range(j, len(line)):
            depth += {"(": 1, ")": -1}.get(line[k], 0)
            if depth == 0:
                return k + 1
        return -1
    return end


def rewrite_implicit(code: str, diagnostics: list[dict]) -> str:
    """``code`` with each implicit floating-to-integer conversion g++ reported (its JSON
    diagnostics) wrapped in ``tl_emu::Cvt``; edits only lines of kernel.cu."""
    lines = code.split("\n")
    try:
        first = lines.index('#line 1 "kernel.cu"') + 1  # the index of kernel.cu line 1
    except ValueError:
        return code
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for d in diagnostics:
        m = _MESSAGE.search(d.get("message", ""))
        dest = m and _int_dest(m.group(1), m.group(2))
        locs = d.get("locations") or []
        if not dest or d.get("kind") != "warning" or not locs:
            continue
        caret = locs[0].get("caret", {})
        start = locs[0].get("start", caret)
        finish = locs[0].get("finish")
        if caret.get("file") != "kernel.cu" or start.get("line") != caret.get("line") or (
                finish and finish.get("line") != caret.get("line")):
            continue
        row = first + caret["line"] - 1
        if not 0 <= row < len(lines):
            continue
        text = lines[row]
        raw = text.encode()

        def char_index(loc: dict, raw: bytes = raw) -> int:  # 1-based bytes to characters
            return len(raw[:loc.get("byte-column", loc["column"])].decode(errors="ignore"))

        a = char_index(start) - 1
        b = char_index(finish or caret)  # the range's last character (1-based)
        if "start" not in locs[0] and not finish:  # a point, not a range: where the value
            end = _token_end(text, a) if 0 <= a < len(text) else -1  # is one token, that
            if end < 0:  # token; else (the end of `x += a[i][j]`, say) its extent is not
                continue  # known: g++'s own conversion stands (the same for a value in range)
            b = end
        j = b - 1  # a range ending inside a name ends with the name (and a macro's call)
        while a < j <= len(text) and (text[j - 1].isalnum() or text[j - 1] == "_"):
            j -= 1
        if 0 <= j < len(text) and _IDENT.match(text, j):
            b = max(b, _token_end(text, j))
        expr = text[a:b] if 0 <= a < b <= len(text) else ""
        if not expr.strip():
            continue
        op = _COMPOUND.search(expr)
        if op:  # `i += x`: the sum converts; the left side is read and written once
            edits.setdefault(row, []).append((a, a + op.start(), "&"))
        elif not re.search(r"(?<![=!<>])=(?!=)", expr):
            edits.setdefault(row, []).append((a, b, dest))
    for row, spans in edits.items():
        text, last = lines[row], len(lines[row]) + 1
        for a, b, dest in sorted(set(spans), reverse=True):
            if b > last:
                continue  # overlaps a span already wrapped
            wrap = "tl_emu::cvt_ref(" if dest == "&" else f"tl_emu::Cvt<{dest}>::from("
            text = f"{text[:a]}{wrap}{text[a:b]}){text[b:]}"
            last = a
        lines[row] = text
    return "\n".join(lines)
