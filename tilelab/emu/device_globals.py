"""``__constant__`` and ``__device__`` variables: found in the source, kept by the module.

On a GPU a module's globals live as long as the module: ``module.get_global(name)`` gives
their address and size, ``memcpy_htod`` fills them, and what a launch leaves in a
``__device__`` variable is there at the next launch. Here every launch runs in a forked
child, so the module keeps each global's bytes in an emulated allocation; the child copies
them into the library's variable before the grid runs and back after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexer import Scope, directives, enclosing, line_of, split_top


@dataclass(frozen=True)
class DeviceGlobal:
    """A file-scope ``__constant__``/``__device__`` variable."""

    name: str
    line: int
    constant: bool


def _names(body: str) -> list[str]:
    """The declared names of ``float a[4] = {..}, *b``-like declarator text."""
    out = []
    for part in split_top(body):
        part = split_top(part, "=")[0]
        part = re.sub(r"\[[^\]]*\]", "", part)
        m = re.search(r"([A-Za-z_]\w*)\s*$", part)
        if m:
            out.append(m.group(1))
    return out


def find_globals(masked: str, all_scopes: list[Scope]) -> list[DeviceGlobal]:
    """The ``__constant__``/``__device__`` variables defined at file scope (not functions)."""
    found: dict[str, DeviceGlobal] = {}
    ends = [d.end for d in directives(masked)]  # a statement starts after a directive too
    for m in re.finditer(r"\b(__constant__|__device__)\b", masked):
        if any(s.block for s in enclosing(all_scopes, m.start())):
            continue
        start = max(max(masked.rfind(c, 0, m.start()) for c in ";{}") + 1,
                    max((e for e in ends if e <= m.start()), default=0))
        end = masked.find(";", m.end())
        if end < 0:
            continue
        stmt = masked[start:end]
        head = stmt.split("=", 1)[0]
        if "(" in head or "{" in head or re.search(
                r"\b(extern|template|typedef|__global__|__shared__)\b", head):
            continue  # a function, a declaration only, or not a variable
        text = re.sub(r"\b(__constant__|__device__|static|const|volatile|__managed__)\b", " ",
                      masked[m.end():end])
        for name in _names(text):
            found.setdefault(name, DeviceGlobal(name, line_of(masked, m.start()),
                                                m.group(1) == "__constant__"))
    return list(found.values())


def entry_code(found: list[DeviceGlobal]) -> str:
    """C++ after the user code: the exported table of the module's globals."""
    rows = [f'  {{"{g.name}", (void*)&{g.name}, sizeof({g.name}), {int(g.constant)}}},'
            for g in found] or ["  {nullptr, nullptr, 0, 0},"]
    return "\n".join(["TL_EXPORT const tl_emu::GlobalDesc tilelab_globals[] = {", *rows, "};",
                      f"TL_EXPORT const int tilelab_nglobals = {len(found)};"]) + "\n"
