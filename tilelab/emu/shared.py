"""Rewrite ``__shared__`` declarations (and, in analysis mode, their uses) on the same lines.

Static arrays become ``static TL_SHARED T name[..];``: one linker section the runtime
poisons at every block start. ``extern __shared__ T name[];`` becomes a ``T*`` to the
launch's dynamic buffer. Every ``name[`` in an array's scope becomes an index-checked
``tl_emu::sh(name, "name", __LINE__)[`` (``shp`` for extern arrays). In analysis mode each
array also gets a registrar (``tl_reg_<name>``) naming it for the race and bank reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import CompileError
from .lexer import Scope, enclosing, line_of, matching, split_top

Edit = tuple[int, int, str]


@dataclass(frozen=True)
class SharedDecl:
    """One ``__shared__`` declarator."""

    name: str
    type: str
    dims: tuple[str, ...]
    dynamic: bool
    line: int
    scope: tuple[int, int]  # uses of the name are rewritten from the declaration to the end

    @property
    def is_array(self) -> bool:
        return bool(self.dims)


_QUALS = re.compile(r"((?:\b(?:extern|static|volatile|const)\b\s*)*)$")
_ATTRS = re.compile(r"\b__align__\s*\([^()]*\)|\b__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")


_ALIGNAS = re.compile(r"\s*\balignas\s*\([^()]*\)\s*")


def _declarators(body: str) -> tuple[str, list[tuple[str, tuple[str, ...], str]]]:
    """Split ``float a[2][3], *p`` into the type and (name, dims, pointer stars)."""
    parts = split_top(body)
    first = parts[0]
    cut = first.find("[")
    head = first if cut < 0 else first[:cut]
    m = re.search(r"(\**)\s*([A-Za-z_]\w*)\s*$", head)
    if not m:
        return body.strip(), []
    type_ = head[:m.start()].strip()
    decls = [(m.group(2), tuple(re.findall(r"\[([^\]]*)\]", first[m.end():])), m.group(1))]
    for part in parts[1:]:
        d = re.match(r"\s*(\**)\s*([A-Za-z_]\w*)((?:\s*\[[^\]]*\])*)", part)
        if d:
            decls.append((d.group(2), tuple(re.findall(r"\[([^\]]*)\]", d.group(3))), d.group(1)))
    return type_, decls


def check_initializers(body: str, line: int) -> None:
    """nvcc's refusal of an initializer on a ``__shared__`` variable (``body``: the text of
    the declaration after ``__shared__``), which g++ would take and run only once."""
    for part in split_top(_ALIGNAS.sub(" ", _ATTRS.sub(" ", body))):
        text = re.sub(r"\[[^\]]*\]", "[]", part)  # extents hold no initializer
        init = re.search(r"[={(]", text)
        if init is None:
            continue
        names = re.findall(r"[A-Za-z_]\w*", text[:init.start()])
        name = names[-1] if names else "?"
        index = "[0]" if text[:init.start()].rstrip().endswith("]") else ""
        raise CompileError(
            f"kernel.cu({line}): error: initializer not allowed for __shared__ variable "
            f"\"{name}\" (nvcc refuses it: shared memory starts each block uninitialised, "
            "and no initializer runs). Declare it without one and let the block's threads "
            f"write it, then wait for them: if (threadIdx.x == 0) {name}{index} = ...; "
            "__syncthreads();", lines=(line,))


def rewrite_declarations(masked: str, all_scopes: list[Scope], analysis: bool
                         ) -> tuple[list[Edit], list[SharedDecl]]:
    """Edits replacing every ``__shared__`` declaration, and the declarators found."""
    edits: list[Edit] = []
    decls: list[SharedDecl] = []
    for m in re.finditer(r"\b__shared__\b", masked):
        q = _QUALS.search(masked, max(0, m.start() - 100), m.start())
        start = q.start() if q else m.start()
        quals = q.group(1).split() if q else []
        end = masked.find(";", m.end())
        if end < 0:
            continue
        body = " ".join(masked[m.end():end].split())
        inside = enclosing(all_scopes, m.start())
        function_scope = any(s.block for s in inside)
        scope_end = inside[-1].end if inside else len(masked)
        type_, names = _declarators(body)
        keep = " ".join(x for x in quals if x in ("volatile", "const"))
        line = line_of(masked, m.start())
        check_initializers(body, line)
        extern = "extern" in quals
        out = []
        if extern:
            ptr_type = " ".join(_ALIGNAS.sub(" ", _ATTRS.sub(" ", f"{keep} {type_}")).split())
            for name, _dims, stars in names:
                t = f"{ptr_type}{stars}"
                if function_scope and not analysis:
                    out.append(f"{t}* const {name} = ({t}*)tl_emu::g_dyn_shared;")
                else:
                    out.append(f'static {t}* {name}; static tl_emu::DynReg tl_reg_{name}'
                               f'({name}, "{name}");')
        else:
            # alignas(n) leads the declaration (g++ takes no standard attribute after static)
            lead = _ALIGNAS.match(body)
            head, rest = (lead.group(0), body[lead.end():]) if lead else ("", body)
            out.append(" ".join(f"{head} static TL_SHARED {keep} {rest};".split()))
            if analysis:
                out += [f'static tl_emu::ShReg tl_reg_{n}({n}, "{n}");'
                        for n, dims, stars in names if not stars]
        text = " ".join(out) + "\n" * masked.count("\n", start, end + 1)
        edits.append((start, end + 1, text))
        for name, dims, stars in names:
            decls.append(SharedDecl(name, f"{type_}{stars}", () if stars else dims, extern,
                                    line, (end + 1, scope_end)))
    return edits, decls


def rewrite_uses(masked: str, decls: list[SharedDecl]) -> list[Edit]:
    """Edits turning ``name[`` into an index-checked access, within each array's scope."""
    edits: list[Edit] = []
    for d in decls:
        if not (d.is_array or d.dynamic):
            continue
        pattern = re.compile(rf"\b{re.escape(d.name)}\s*\[")
        for m in pattern.finditer(masked, d.scope[0], d.scope[1]):
            before = masked[max(0, m.start() - 40):m.start()].rstrip()
            if before.endswith((".", "->", "::")) or re.search(r"\bsizeof\s*\(?$", before):
                continue
            fn = "shp" if d.dynamic else "sh"
            if not d.dynamic and (n := _subscripts(masked, m.end() - 1)) < len(d.dims):
                fn = f"shr<{n}>"  # a row (buf[i] of buf[4][32]): the array itself, checked
            edits.append((m.start(), m.end(), f'tl_emu::{fn}({d.name}, "{d.name}", __LINE__)['))
    return edits


def _subscripts(masked: str, open_pos: int) -> int:
    """How many ``[...]`` follow one another from the ``[`` at ``open_pos``."""
    n, pos = 0, open_pos
    while pos < len(masked) and masked[pos] == "[":
        close = matching(masked, pos)
        if close < 0:
            break
        n += 1
        pos = close + 1
        while pos < len(masked) and masked[pos] in " \t\n":
            pos += 1
    return max(n, 1)
