"""Just enough C lexing to transform a kernel source without moving its lines.

``mask`` blanks comments and the insides of string and character literals (same length,
newlines kept), so regular expressions over the masked text see only code, and positions in
it are positions in the original. Like the compiler, both ``mask`` and ``directives`` see
through backslash-newline line splices (``#inc\\`` + newline + ``lude``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# A line splice: backslash, optional blanks (g++ accepts them, with a warning), newline.
SPLICE = re.compile(r"\\[ \t\f\v]*\n")
_RAW_PREFIX = re.compile(r"(?:^|[^A-Za-z0-9_])(?:u8|u|U|L)?R$")


def splice(text: str) -> str:
    """``text`` with every backslash-newline line splice removed."""
    return SPLICE.sub("", text)


def _after_splices(src: str, j: int) -> int:
    """The first position at or after ``j`` that does not start a line splice."""
    while (m := SPLICE.match(src, j)) is not None:
        j = m.end()
    return j


def _line_comment_end(src: str, j: int) -> int:
    """End of a ``//`` comment whose text starts at ``j``: a newline that is not spliced."""
    while True:
        e = src.find("\n", j)
        if e < 0:
            return len(src)
        if not src[j:e].rstrip(" \t\f\v").endswith("\\"):
            return e
        j = e + 1


def _block_comment_end(src: str, j: int) -> int:
    """End (exclusive) of a ``/*`` comment whose text starts at ``j``: ``*`` then ``/``."""
    while (s := src.find("*", j)) >= 0:
        t = _after_splices(src, s + 1)
        if t < len(src) and src[t] == "/":
            return t + 1
        j = s + 1
    return len(src)


def _raw_string_end(src: str, quote: int) -> int:
    """End (exclusive) of the raw string literal opening at ``quote``, or -1 if it is none."""
    if not _RAW_PREFIX.search(src[max(0, quote - 4):quote]):
        return -1
    m = re.compile(r'([^\s()\\"]{0,16})\(').match(src, quote + 1)
    if not m:
        return -1
    close = src.find(f'){m.group(1)}"', m.end())
    return len(src) if close < 0 else close + len(m.group(1)) + 2


def mask(src: str) -> str:
    """``src`` with comments and literal contents replaced by spaces, newlines kept."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        nxt = _after_splices(src, i + 1) if c == "/" else i + 1
        if c == "/" and nxt < n and src[nxt] == "/":
            j = _line_comment_end(src, nxt + 1)
            blank(i, j)
            i = j
        elif c == "/" and nxt < n and src[nxt] == "*":
            j = _block_comment_end(src, nxt + 1)
            blank(i, j)
            i = j
        elif c == '"' and (j := _raw_string_end(src, i)) >= 0:
            blank(i + 1, max(i + 1, j - 1))
            i = j
        elif c == '"' or (c == "'" and not _digit_separator(src, i)):
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j, n)
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _digit_separator(src: str, i: int) -> bool:
    return 0 < i < len(src) - 1 and src[i - 1].isalnum() and src[i + 1].isalnum() and (
        src[i - 1].isdigit()
    )


def line_of(text: str, pos: int) -> int:
    """The 1-based line number of position ``pos``."""
    return text.count("\n", 0, pos) + 1


@dataclass(frozen=True)
class Directive:
    """A preprocessor directive: its span (all continued lines), name and argument text."""

    start: int
    end: int
    name: str
    arg: str
    line: int


_DIRECTIVE = re.compile(r"[ \t\f\v]*(?:#|%:)[ \t\f\v]*(\w*)(.*)", re.S)


def directives(masked: str) -> Iterator[Directive]:
    """Every preprocessor directive of ``masked`` (continuation lines spliced)."""
    pos, line = 0, 1
    while pos < len(masked):
        end = masked.find("\n", pos)
        end = len(masked) if end < 0 else end
        nlines, seg = 1, pos
        while end < len(masked) and masked[seg:end].rstrip().endswith("\\"):
            seg = end + 1  # only the newest line is looked at: linear in the directive
            nxt = masked.find("\n", seg)
            end = len(masked) if nxt < 0 else nxt
            nlines += 1
        m = _DIRECTIVE.match(splice(masked[pos:end]))  # what the compiler reads
        if m:
            yield Directive(pos, end, m.group(1), m.group(2).strip(), line)
        line += nlines
        pos = end + 1


def matching(masked: str, open_pos: int) -> int:
    """Position of the bracket closing the one at ``open_pos`` (or -1)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for k in range(open_pos, len(masked)):
        ch = masked[k]
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return k
    return -1


def bracket_pairs(masked: str) -> dict[int, int]:
    """Every matched bracket of ``masked``: opening position -> closing position (one pass;
    :func:`matching` of each would scan the source again for every bracket)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    out: dict[int, int] = {}
    stack: list[tuple[int, str]] = []
    for m in re.finditer(r"[()\[\]{}]", masked):
        ch, k = m.group(0), m.start()
        if ch in pairs:
            stack.append((k, pairs[ch]))
        elif stack and stack[-1][1] == ch:
            out[stack.pop()[0]] = k
        else:
            stack.clear()  # a stray closer: brackets opened before it never match
    return out


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


@dataclass(frozen=True)
class Scope:
    """A brace pair; ``block`` is False for ``extern "C" {`` and ``namespace {`` braces."""

    start: int
    end: int
    block: bool


def scopes(masked: str) -> list[Scope]:
    """Every matched brace pair of ``masked``, outermost first."""
    out, stack = [], []
    for k, ch in enumerate(masked):
        if ch == "{":
            before = masked[max(0, k - 80):k]
            linkage = re.search(r'(extern\s*"[^"\n]*"|\bnamespace(\s+\w+)?)\s*$', before)
            stack.append((k, linkage is None))
        elif ch == "}" and stack:
            start, block = stack.pop()
            out.append(Scope(start, k, block))
    return sorted(out, key=lambda s: s.start)


def enclosing(all_scopes: list[Scope], pos: int) -> list[Scope]:
    """The scopes containing ``pos``, outermost first."""
    return [s for s in all_scopes if s.start < pos < s.end]
