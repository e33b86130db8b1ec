"""nvcc's words for a warp intrinsic given an operand type CUDA declares no overload for.

The prelude declares the warp intrinsics as CUDA does, as overload sets (function objects
``tl_emu::ov::NAME``, see tilelab_emu_warp.h), so g++ refuses exactly what nvcc refuses; this
turns g++'s refusal into nvcc's, at the learner's line, with the types each takes and a fix.
"""

from __future__ import annotations

import re

from .errors import DID_NOT_COMPILE, CompileError

_SHUFFLE = ("int, unsigned int, long, unsigned long, long long, unsigned long long, float "
            "or double")
#: the operand types each intrinsic is declared for (CUDA C++ Programming Guide: warp
#: shuffle, warp match and warp reduce functions)
TYPES = {
    **{n: _SHUFFLE for n in ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                             "__shfl_xor_sync", "__match_any_sync", "__match_all_sync")},
    **{n: "int or unsigned int" for n in ("__reduce_add_sync", "__reduce_min_sync",
                                          "__reduce_max_sync")},
    **{n: "unsigned int" for n in ("__reduce_and_sync", "__reduce_or_sync",
                                   "__reduce_xor_sync")},
}
_FIX = {
    "shfl": "shuffle a vector or struct one member at a time (v.x and v.y apart), each a "
            "type above",
    "match": "compare one member at a time, or pack the value into an unsigned long long",
    "reduce": "reduce a float, a double or a 64-bit value with __shfl_xor_sync steps "
              "(for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);), or "
              "convert it to int first if that is what you mean",
}

_CALL = re.compile(r"error: (?:(no match for call to)|call of) '\(tl_emu::ov::(\w+)\) "
                   r"\(([^']*)\)'(?: is ambiguous)?")
_WHERE = re.compile(r"^kernel\.cu:(\d+):(?:\d+:)? note: in expansion of macro '(\w+)'")


#: g++'s spellings of the integer types, as nvcc writes them
_SPELLED = {"long long unsigned int": "unsigned long long", "long long int": "long long",
            "long unsigned int": "unsigned long", "long int": "long", "short int": "short",
            "short unsigned int": "unsigned short"}


def _types(args: str) -> str:
    """g++'s argument types as nvcc writes them (no reference marks)."""
    out = []
    for a in args.split(","):
        t = a.strip().rstrip("&").strip()
        for gxx, nvcc in _SPELLED.items():
            t = re.sub(rf"\b{gxx}\b", nvcc, t)
        out.append(t)
    return ", ".join(out)


def nvcc_refusal(stderr: str, source: str = "") -> CompileError | None:
    """nvcc's refusal of each warp intrinsic that g++ found no single overload of, or None
    when g++'s errors are about something else."""
    lines = stderr.replace("\u2018", "'").replace("\u2019", "'").splitlines()
    src = source.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    named: list[int] = []
    for i, text in enumerate(lines):
        m = _CALL.search(text)
        if not m:
            continue
        name = m.group(2)
        where = next((w for t in lines[i + 1:i + 4] if (w := _WHERE.match(t))
                      and w.group(2) == name), None)
        line = int(where.group(1)) if where else 0
        kind = ("no instance of overloaded function" if m.group(1) else
                "more than one instance of overloaded function")
        fix = _FIX["reduce" if "reduce" in name else "match" if "match" in name else "shfl"]
        out.append(f"kernel.cu({line}): error: {kind} \"{name}\" matches the argument list "
                   f"(argument types are: ({_types(m.group(3))})); nvcc refuses it too: "
                   f"CUDA declares {name} for {TYPES.get(name, 'its own types')} only; {fix}.")
        if 0 < line <= len(src):
            out.append(f"{line:>5} | {src[line - 1]}")
        named.append(line)
    if not out:
        return None
    return CompileError(DID_NOT_COMPILE + "\n".join(out), stderr,
                        tuple(sorted({n for n in named if n})))
