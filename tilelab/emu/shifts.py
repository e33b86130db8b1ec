"""Shifts rewritten to shift as a GPU does (on the same line).

PTX's ``shl`` and ``shr`` take the count as 32 bits and clamp it: a count of the operand's
width or more gives 0 (all sign bits for an arithmetic right shift), where x86 masks the
count (``x << 33`` is ``x << 1`` there). So each ``L << R`` and ``L >> R`` whose count is not
a plain number becomes ``tl_emu::shl(L, R)`` (``shr``), which shifts integers by CUDA's rule
and anything else as the operator did; ``L <<= R`` becomes ``tl_emu::shl_to(L, R)`` (``L``
evaluated once). Directives are left alone (an ``#if`` cannot call a
function), and so is a ``>>`` or ``<<`` that may sit among template brackets.
"""

from __future__ import annotations

import re

from .lexer import directives

Edit = tuple[int, int, str]

_TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\.?\d(?:[\w.']|[eEpP][+-])*|<<=|>>=|<=>|->\*?|::|\+\+|--|"
                    r"<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=?:,;.()\[\]{}#]|\S")
#: Tokens that end the operand to the left of a shift (lower precedence, or no expression).
_LEFT_STOP = frozenset(("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=",
                        "?", ":", ",", ";", "{", "}", "(", "[", "||", "&&", "|", "^", "==",
                        "!=", "<", ">", "<=", ">=", "<=>", "#"))
_RIGHT_STOP = _LEFT_STOP | {"<<", ">>", ")", "]", "&"}
_KEYWORDS_STOP = frozenset(("return", "case", "throw", "else", "do", "co_return", "co_yield",
                            "operator", "default", "goto"))
_CONTROL = frozenset(("if", "while", "for", "switch", "catch"))
_NUMBER = re.compile(r"\d[\w']*")


def _tokens(masked: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(0)) for m in _TOKEN.finditer(masked)
            if not m.group(0).isspace()]


def _operand_end(tok: str) -> bool:
    return tok in (")", "]") or tok[0].isalnum() or tok[0] in "_.'\"" or tok in ("++", "--")


def _templateish(toks: list[tuple[int, str]], lo: int, hi: int) -> bool:
    """Whether tokens ``lo..hi`` (exclusive) may be template arguments."""
    return all(re.fullmatch(r"[\w:*&,]+|const|unsigned", t) for _, t in toks[lo:hi])


def _left_start(toks: list[tuple[int, str]], k: int, close: dict[int, int]) -> int:
    """Index of the first token of the shift-expression left of the operator at ``k``, or
    -1 where it is not found (a template bracket, say)."""
    j = k - 1
    start = -1
    while j >= 0:
        t = toks[j][1]
        if t in (")", "]"):
            o = close.get(j)
            if o is None:
                return -1
            if t == ")" and o > 0 and toks[o - 1][1] in _CONTROL and start >= 0:
                return start  # `if (c) x << n`: the operand begins after the condition
            start = j = o
            j -= 1
            continue
        if t == ">":  # the end of a template-id (`static_cast<int>(x)`), or a comparison
            d, i = 0, j
            while i >= 0 and toks[i][1] not in (";", "{", "}", "("):
                d += {">": 1, "<": -1}.get(toks[i][1], 0)
                if d == 0:
                    break
                i -= 1
            if d == 0 and i > 0 and _templateish(toks, i + 1, j) and \
                    re.fullmatch(r"[A-Za-z_]\w*", toks[i - 1][1]):
                return -1  # a template-id in the operand: left as it was
            return start
        if t == "<" and j > 0 and re.fullmatch(r"[A-Za-z_]\w*", toks[j - 1][1]):
            return -1  # maybe a template's bracket (`Foo<Bar<int>>::v << n`): left as it was
        if t in _LEFT_STOP or t in _KEYWORDS_STOP:
            return start
        if t == "&" and j > 0 and _operand_end(toks[j - 1][1]):
            return start  # a binary & (lower precedence)
        start = j
        j -= 1
    return start


def _right_end(toks: list[tuple[int, str]], k: int, pairs: dict[int, int]) -> int:
    """Index one past the last token of the additive-expression right of ``k``, or -1."""
    j = k + 1
    n = len(toks)
    while j < n:
        t = toks[j][1]
        if t in ("(", "["):
            c = pairs.get(j)
            if c is None:
                return -1
            j = c + 1
            continue
        if t == "&" and j > k + 1 and _operand_end(toks[j - 1][1]):
            return j
        if t == "<" and j > k + 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[j - 1][1]):
            return -1  # maybe a template-id: left as it was
        if (t in _RIGHT_STOP and t != "&") or t in _KEYWORDS_STOP:
            return j
        j += 1
    return j


def _assigned_end(toks: list[tuple[int, str]], k: int, pairs: dict[int, int]) -> int:
    """Index one past the last token of the assignment-expression right of ``k``, or -1."""
    j, n, pending = k + 1, len(toks), 0
    while j < n:
        t = toks[j][1]
        if t in ("(", "[", "{"):
            c = pairs.get(j)
            if c is None:
                return -1
            j = c + 1
            continue
        if t == "<" and re.fullmatch(r"[A-Za-z_]\w*", toks[j - 1][1]):
            return -1  # maybe a template-id, whose commas would end the count
        pending += t == "?"
        if t == ":" and pending:
            pending -= 1
        elif t in (",", ";", ")", "]", "}", ":"):
            return j
        j += 1
    return j


def rewrite_shifts(masked: str) -> list[Edit]:
    """Edits sending every shift by a count that is not a plain number through
    ``tl_emu::shl``/``tl_emu::shr``."""
    toks = _tokens(masked)
    skip = [(d.start, d.end) for d in directives(masked)]
    opens = {"(": ")", "[": "]", "{": "}"}
    pairs: dict[int, int] = {}  # token index of an opener -> its closer
    close: dict[int, int] = {}
    stack: list[int] = []
    for i, (_, t) in enumerate(toks):
        if t in opens:
            stack.append(i)
        elif t in (")", "]", "}"):
            if stack and opens[toks[stack[-1]][1]] == t:
                o = stack.pop()
                pairs[o], close[i] = i, o
            else:
                stack.clear()
    edits: list[Edit] = []
    for k, (pos, t) in enumerate(toks):
        if t not in ("<<", ">>", "<<=", ">>=") or any(a <= pos < b for a, b in skip):
            continue
        if k == 0 or toks[k - 1][1] == "operator":
            continue
        lo = _left_start(toks, k, close)
        hi = _right_end(toks, k, pairs) if len(t) == 2 else _assigned_end(toks, k, pairs)
        if lo < 0 or hi <= k + 1:
            continue
        if hi == k + 2 and _NUMBER.fullmatch(toks[k + 1][1]):
            continue  # a constant count: x86 and a GPU agree below the width
        end_pos = toks[hi - 1][0] + len(toks[hi - 1][1])
        name = ("shl" if t[0] == "<" else "shr") + ("_to" if len(t) == 3 else "")
        edits += [(toks[lo][0], toks[lo][0], f"tl_emu::{name}("), (pos, pos + len(t), ","),
                  (end_pos, end_pos, ")")]
    return edits
