"""Find the ``__global__`` functions of a source and emit their C entry points.

Python never parses parameter types: the emitted ``tl_emu::make_kernel(&k, ...)`` lets C++
templates describe each parameter (pointer? floating? signed? sizeof) and unpack a
``void** args`` array. Python parses only the parameter texts and names, for messages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .lexer import bracket_pairs, matching, split_top

_SKIP_CALLS = {"__launch_bounds__", "__attribute__", "__align__", "__declspec"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "enum"}
_BUILTIN = {"int", "char", "float", "double", "bool", "void", "unsigned", "signed", "long",
            "short"}


@dataclass(frozen=True)
class KernelSource:
    """A ``__global__`` function: its name, line and parameter texts and names."""

    name: str
    line: int
    params: tuple[str, ...]
    names: tuple[str, ...]


def param_name(text: str, index: int) -> str:
    """The declared name of a parameter, or ``#index`` when it has none."""
    core = [t for t in re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*", "", text))
            if t not in _QUALIFIERS]
    if len(core) >= 2 and core[-1] not in _BUILTIN:
        return core[-1]
    return f"#{index}"


#: an attribute with arguments among a declaration's words (``__launch_bounds__(N, 2)``)
_ATTR = r"(?:__launch_bounds__|__attribute__|__align__|__declspec)\s*\((?:[^()]|\([^()]*\))*\)\s*"
_TEMPLATE_KERNEL = re.compile(rf"\btemplate\s*<([^;{{}}]*?)>\s*(?:[\w:]+\s+|{_ATTR})*?__global__\s+"
                              rf"(?:[\w:]+\s+|{_ATTR})*?void\s+(?:{_ATTR})*([A-Za-z_]\w*)\s*\(")
_INSTANTIATION = re.compile(r"\btemplate\s+(?!<)(?:(?:__global__|extern|void)\s+)*"
                            r"([A-Za-z_]\w*)\s*<")


def find_instantiations(masked: str) -> list[KernelSource]:
    """Explicit instantiations of templated kernels (``template __global__ void k<float>(
    float*, int);``): each is a kernel, named ``k<float>`` here and by its mangled name."""
    templates = {m.group(2) for m in _TEMPLATE_KERNEL.finditer(masked)}
    out = []
    for m in _INSTANTIATION.finditer(masked):
        if m.group(1) not in templates:
            continue
        close_args = matching_angle(masked, m.end() - 1)
        paren = masked.find("(", close_args)
        if close_args < 0 or paren < 0 or masked[close_args + 1:paren].strip():
            continue
        close = matching(masked, paren)
        if close < 0:
            continue
        args = " ".join(masked[m.end() - 1:close_args + 1].split())
        texts = [" ".join(p.split()) for p in split_top(masked[paren + 1:close])]
        if texts in ([""], ["void"]):
            texts = []
        names = tuple(param_name(t, i) for i, t in enumerate(texts))
        line = masked.count("\n", 0, m.start()) + 1
        out.append(KernelSource(f"{m.group(1)}{args}", line, tuple(texts), names))
    return out


def matching_angle(masked: str, open_pos: int) -> int:
    """Position of the ``>`` closing the template argument list opening at ``open_pos``."""
    depth = 0
    for k in range(open_pos, len(masked)):
        depth += {"<": 1, ">": -1, "(": 0, ")": 0}.get(masked[k], 0)
        if masked[k] in ";{}":
            return -1
        if depth == 0:
            return k
    return -1


def find_kernels(masked: str) -> list[KernelSource]:
    """The ``__global__`` functions defined in ``masked``, then the explicit instantiations of
    templated ones, in order."""
    found: dict[str, KernelSource] = {}
    closes: dict[int, int] | None = None  # bracket pairs, found once (linear time)
    for m in re.finditer(r"\b__global__\b", masked):
        stmt_start = max(masked.rfind(c, 0, m.start()) for c in ";{}") + 1
        if re.search(r"\btemplate\b", masked[stmt_start:m.start()]):
            continue
        pos = m.end()
        while True:
            ident = re.compile(r"\s*(?:[*&]\s*)*([A-Za-z_]\w*)\s*").match(masked, pos)
            if not ident:
                break
            after = ident.end()
            if after < len(masked) and masked[after] == "(":
                if closes is None:
                    closes = bracket_pairs(masked)
                close = closes.get(after, -1)
                if close < 0:
                    break
                if ident.group(1) in _SKIP_CALLS:
                    pos = close + 1
                    continue
                if re.compile(r"\s*\{").match(masked, close + 1):
                    texts = [" ".join(p.split()) for p in split_top(masked[after + 1:close])]
                    if texts in ([""], ["void"]):
                        texts = []
                    names = tuple(param_name(t, i) for i, t in enumerate(texts))
                    line = masked.count("\n", 0, m.start()) + 1
                    found.setdefault(ident.group(1),
                                     KernelSource(ident.group(1), line, tuple(texts), names))
                break
            pos = after
    for k in find_instantiations(masked):
        found.setdefault(k.name, k)
    return list(found.values())


def launch_bound(masked: str, kernel: KernelSource, defines: tuple[str, ...] = ()
                 ) -> int | None:
    """The first argument of the kernel's ``__launch_bounds__(...)``, if it is a number
    once the macros (the source's ``#define``\\ s, the options' ``-DNAME=VALUE``) and, for
    an instantiation of a templated kernel, its template arguments are put in
    (``__launch_bounds__(N)`` of ``k<float, 256>``)."""
    base = kernel.name.split("<")[0]
    values = {m.group(1): m.group(2).strip() for m in re.finditer(
        r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]+)$", masked, re.M)}
    values.update(d[2:].split("=", 1) for d in defines if "=" in d)
    if "<" in kernel.name:
        definition = next((m for m in _TEMPLATE_KERNEL.finditer(masked)
                           if m.group(2) == base), None)
        if definition is None:
            return None
        names = [(re.findall(r"[A-Za-z_]\w*", p.split("=")[0]) or [""])[-1]
                 for p in split_top(definition.group(1))]
        values.update(zip(names, split_top(kernel.name[len(base) + 1:-1]), strict=False))
        stmt = definition.group(0)
    else:
        start = sum(len(ln) + 1 for ln in masked.split("\n")[:kernel.line - 1])
        head = re.compile(rf"\b{re.escape(base)}\s*[<(]").search(masked, start)
        if head is None:
            return None
        stmt = masked[max(masked.rfind(c, 0, head.start()) for c in ";{}") + 1:head.start()]
    m = re.search(r"\b__launch_bounds__\s*\(", stmt)
    if m is None:
        return None
    close = matching(stmt, m.end() - 1)
    arg = split_top(stmt[m.end():close] if close > 0 else "")[0]
    return _integer(arg, values)


def _integer(expr: str, values: dict[str, str]) -> int | None:
    """``expr``'s value where it is integer arithmetic once ``values`` are put in."""
    for _ in range(8):  # a macro standing for another
        expr = re.sub(r"[A-Za-z_]\w*", lambda w: f"({values[w.group()]})"
                      if w.group() in values else w.group(), expr)
    expr = re.sub(r"(?<=\d)[uUlL]+\b", "", expr)
    if not re.fullmatch(r"[\d\s+\-*/%()]+", expr) or len(expr) > 200 or \
            "**" in expr.replace(" ", ""):  # C has no power operator
        return None
    try:
        value = eval(expr.replace("/", "//"), {"__builtins__": {}})  # digits and operators
    except (SyntaxError, ZeroDivisionError, ValueError):
        return None
    return int(value) if isinstance(value, int) else None


def _cstr(text: str) -> str:
    return json.dumps(text)  # a valid C string literal for the ASCII a signature holds


def entry_code(kernels: list[KernelSource]) -> str:
    """C++ after the user code: the exported ``tilelab_kernels`` descriptor table."""
    lines = ['#line 1 "<tilelab entry points>"']
    entries = []
    for i, k in enumerate(kernels):
        texts = "".join(f"{_cstr(t)}, " for t in k.params)
        lines.append(f"static const char* const tl_pt_{i}[] = {{{texts}nullptr}};")
        entries.append(f"  tl_emu::make_kernel(&{k.name}, {_cstr(k.name)}, tl_pt_{i}),")
    if not entries:
        entries.append("  tl_emu::KernelDesc{},")
    lines.append("TL_EXPORT const tl_emu::KernelDesc tilelab_kernels[] = {")
    lines += entries
    lines.append("};")
    lines.append(f"TL_EXPORT const int tilelab_nkernels = {len(kernels)};")
    return "\n".join(lines) + "\n"
