"""What the class run writes for an instructor's tools, made inert there: a CSV field a
spreadsheet would run as a formula, and text a terminal would take for a command.

Student names, ids and file names come from learners (an enrolment list, a folder name,
a file in a submission) and a verdict quotes a learner's code: none of it may become a
formula in a spreadsheet (``=HYPERLINK(...)``, ``@SUM(...)``) or an escape sequence on the
instructor's terminal (OSC 52 writes the clipboard; others retitle the window or hide the
text after them). Each writer passes what it writes through one of the two functions here.
"""

from __future__ import annotations

import unicodedata

#: What a spreadsheet takes a cell's text to start a formula with (OWASP's list).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")


def spreadsheet_cell(value: object) -> object:
    """``value`` as a CSV field: a number or None as it is; text that starts like a formula
    gets a leading apostrophe, which every spreadsheet shows as text and never evaluates
    (quoting commas, quotes and line breaks is the CSV writer's part)."""
    if not isinstance(value, str):
        return value
    return "'" + value if value.startswith(FORMULA_PREFIXES) else value


def _visible(ch: str) -> str:
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def terminal_text(text: object) -> str:
    """``text`` safe to print on a terminal: every control character (C0 and C1: escape,
    bell, backspace, carriage return...; line breaks and tabs too: one value is one line)
    and every bidirectional override written as a visible escape, ``\\x1b``; the rest as
    it is."""
    out = []
    for ch in str(text):
        kind = unicodedata.category(ch)
        out.append(_visible(ch) if kind == "Cc" or (kind == "Cf" and ch not in "\u200d") else ch)
    return "".join(out)
