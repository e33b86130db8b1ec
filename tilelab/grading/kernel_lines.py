"""Where in a learner's kernel a diagnosed mistake sits.

A diagnosis finds a cause from the outputs (what the kernel computed); this module points
at the line that does it, by the shape of the CUDA C statements: the load of a tile from
an input, the reads of that tile, the product, a loop, a guard, the store of the output.
It reads the kernel text only; a line it cannot find is left unnamed, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SHARED = re.compile(r"__shared__\s+[\w\s]*?\b(\w+)\s*\[")
_FOR = re.compile(r"\bfor\s*\(")
_IF = re.compile(r"\bif\s*\(")
_PRODUCT = re.compile(r"\]\s*\*\s*\w+\s*\[")


def _code(line: str) -> str:
    """A line without its ``//`` comment, stripped."""
    return line.split("//", 1)[0].strip()


@dataclass
class Kernel:
    """A kernel's source, searched line by line (numbered from 1, as the emulator does)."""

    text: str
    lines: list[str] = field(init=False)
    _indent: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        raw = self.text.expandtabs(4).splitlines()
        self.lines = [_code(x) for x in raw]
        self._indent = [len(x) - len(x.lstrip()) for x in raw]

    def find(self, pattern: str | re.Pattern[str], start: int = 1,
             end: int | None = None) -> int | None:
        """The first line in ``start..end`` whose code matches ``pattern``."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        stop = len(self.lines) if end is None else min(end, len(self.lines))
        return next((n for n in range(max(1, start), stop + 1) if rx.search(self.lines[n - 1])),
                    None)

    def last_before(self, pattern: str | re.Pattern[str], line: int) -> int | None:
        """The last line before ``line`` whose code matches ``pattern``."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        return next((n for n in range(line - 1, 0, -1) if rx.search(self.lines[n - 1])), None)

    def at(self, line: int | None) -> str:
        """`` (line N: `code`)``, or "" when no line was found."""
        if not line:
            return ""
        code = self.lines[line - 1] if line <= len(self.lines) else ""
        return f" (line {line}: `{code[:90]}`)" if code else f" (line {line})"

    @property
    def shared(self) -> list[str]:
        """The names of the kernel's ``__shared__`` arrays."""
        return [m.group(1) for m in map(_SHARED.search, self.lines) if m]

    def tile_of(self, array: str) -> tuple[str, int] | None:
        """The shared array loaded from the global ``array``, and the line loading it."""
        for name in self.shared:
            n = self.find(rf"\b{name}\s*\[[^=]*\]\s*=[^=].*\b{array}\s*\[")
            if n:
                return name, n
        return None

    def load(self, array: str) -> int | None:
        """The line that loads a tile from the global ``array``."""
        found = self.tile_of(array)
        return found[1] if found else None

    def read(self, array: str) -> int | None:
        """The first line that reads the tile loaded from ``array`` (not its load)."""
        found = self.tile_of(array)
        if not found:
            return None
        name, load = found
        return self.find(rf"(=|\*|\+).*\b{name}\s*\[", load + 1)

    def product(self) -> int | None:
        """The line that multiplies two array elements (the inner product's)."""
        return self.find(_PRODUCT)

    def store(self, output: str) -> int | None:
        """The line that stores to the global ``output``."""
        return self.find(rf"\b{output}\s*\[[^;=]*\]\s*(\+|-)?=[^=]")

    def k_loop(self) -> int | None:
        """The loop over k of a tiled product: the ``for`` above the read of A's tile that
        declares the variable indexing A's tile column (or B's tile row)."""
        for array, pick in (("A", -1), ("B", 0)):
            found, read = self.tile_of(array), self.read(array)
            if not found or not read:
                continue
            subs = re.findall(rf"\b{found[0]}\s*((?:\[[^\]]*\]\s*)+)", self.lines[read - 1])
            if not subs:
                continue
            names = re.findall(r"\w+", re.findall(r"\[([^\]]*)\]", subs[0])[pick])
            for n in range(read - 1, 0, -1):
                m = re.search(r"\bfor\s*\(\s*(?:int\s+)?(\w+)\s*=", self.lines[n - 1])
                if m and m.group(1) in names:
                    return n
        return None

    def stuck_loop(self) -> int | None:
        """A ``for`` whose step cannot advance its counter (``k += 0``, ``k *= 1``, another
        variable stepped, no step at all)."""
        rx = re.compile(r"\bfor\s*\(\s*(?:int\s+)?(\w+)\s*=[^;]*;[^;]*;([^)]*)\)")
        for n, code in enumerate(self.lines, 1):
            m = rx.search(code)
            if m and (not re.search(rf"\b{m.group(1)}\b", m.group(2))
                      or re.search(r"[+-]=\s*0\b|\*=\s*1\b|/=\s*1\b", m.group(2))):
                return n
        return None

    def loop_before(self, line: int | None) -> int | None:
        """The ``for`` loop nearest above ``line``."""
        return self.last_before(_FOR, line) if line else None

    def guard_before(self, line: int | None) -> int | None:
        """The guard of ``line``: a ``? :`` or an ``if`` on it, or the ``if`` that encloses it
        (by indentation: a line above it, indented less, with only deeper lines between);
        None when no ``if`` encloses it."""
        if not line or line > len(self.lines):
            return None
        here = self.lines[line - 1]
        if "?" in here or _IF.search(here):
            return line
        depth = self._indent[line - 1]
        for n in range(line - 1, 0, -1):
            code = self.lines[n - 1]
            if not code or code in ("{", "}") or self._indent[n - 1] >= depth:
                continue
            if _IF.search(code):
                return n
            depth = self._indent[n - 1]
            if depth == 0:
                break
        return None
