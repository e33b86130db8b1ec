"""Keep kernels from calling host functions (``system``, ``fopen``, ``write``, ...).

On a GPU a kernel can call only device functions; here it is native code, so after g++
links it its undefined dynamic symbols are compared with what the prelude needs (found by
compiling ``PROBE_SOURCE``, see ``compile.prelude_needs``) plus ``KERNEL_CALLABLE``. The
functions only the prelude may call (``write``, ``mmap``, ...) cannot be named by the
kernel either: ``poison_pragma`` makes g++ reject every use of their names (even one built
with ``##``), and of ``asm`` and ``weakref`` which could reach them without naming them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from . import elf
from .errors import CompileError, UnsupportedConstruct
from .lexer import mask

_MATH = (
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos",
    "cosh", "drem", "erf", "erfc", "exp", "exp2", "exp10", "expm1", "fabs", "fdim", "finite",
    "floor", "fma", "fmax", "fmin", "fmod", "frexp", "gamma", "gamma_r", "hypot", "ilogb",
    "isinf", "isnan", "j0", "j1", "jn", "ldexp", "lgamma", "lgamma_r", "llrint", "llround", "log",
    "log10", "log1p", "log2", "logb", "lrint", "lround", "modf", "nan", "nearbyint", "nextafter",
    "nexttoward", "pow", "pow10", "remainder", "remquo", "rint", "round", "scalb", "scalbln",
    "scalbn", "significand", "sin", "sincos", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc",
    "y0", "y1", "yn", "__finite", "__fpclassify", "__isinf", "__isnan", "__issignaling",
    "__signbit",
)
# Library symbols a CUDA kernel may reach: the C math library (float, double and long double
# names), printf (g++ turns some printf calls into puts/putchar), device-side memcpy/memset/
# malloc/free, new/delete, clock, and the C++ runtime support plain C++ code compiles to.
KERNEL_CALLABLE = frozenset((
    *(f"{m}{s}" for m in _MATH for s in ("", "f", "l")),
    "abs", "labs", "llabs", "clock", "printf", "puts", "putchar", "__printf_chk",
    "memcpy", "memmove", "memset", "__memcpy_chk", "__memmove_chk", "__memset_chk",
    "malloc", "free",
    *(f"_Z{op}{arg}" for op in ("nw", "na") for arg in ("m", "mSt11align_val_t")),
    *(f"_Z{op}Pv{arg}" for op in ("dl", "da")
      for arg in ("", "m", "St11align_val_t", "mSt11align_val_t")),
    "__cxa_throw_bad_array_new_length", "__cxa_pure_virtual", "__cxa_deleted_virtual",
    "__cxa_atexit", "__gxx_personality_v0", "_Unwind_Resume", "__stack_chk_fail",
    "__stack_chk_guard",
    *(f"_ZTVN10__cxxabiv1{n}E" for n in ("17__class_type_info", "20__si_class_type_info",
                                         "21__vmi_class_type_info")),
))
# libgcc's arithmetic helpers (128-bit division, popcount without -mpopcnt, complex math...).
_LIBGCC = re.compile(
    r"__(?:u?(?:div|mod|mul)[dt]i3|u?divmod[dt]i4|(?:ashl|ashr|lshr)[dt]i3|neg[dt]i2|u?cmp[dt]i2"
    r"|(?:abs|add|sub|mul|neg)v[sdt]i[23]|(?:popcount|parity|clz|ctz|ffs)[sdt]i2|bswap[sd]i2"
    r"|(?:mul|div)[sdxth]c3|powi[sdxth]f2|fix(?:uns)?[sdxth]f[sdt]i|float(?:un)?[sdt]i[sdxth]f"
    r"|(?:extend|trunc)[sdxth]f[sdxth]f2|(?:add|sub|mul|div|neg)[sdxth]f[23]"
    r"|(?:eq|ne|ge|gt|le|lt|unord)[sdxth]f2)"
)
# Names that could reach a host function without naming it: inline assembly, weak aliases.
_ASM = ("asm", "__asm", "__asm__")
_SNEAKY = (*_ASM, "weakref", "__weakref__")
# A kernel exercising the prelude (shared memory, barriers, atomics, printf, assert, math):
# what its library needs, less KERNEL_CALLABLE, only the prelude may call.
PROBE_SOURCE = r"""
extern __shared__ float tl_probe_dyn[];
__global__ void tl_probe(float* x, int* c, int n)
{
    __shared__ float tile[4][8];
    int t = threadIdx.x;
    tile[t % 4][t % 8] = x[t] + tl_probe_dyn[t];
    __syncthreads();
    if (__syncthreads_count(t < n) && __syncthreads_and(1) && __syncthreads_or(0)) c[1] = 1;
    atomicAdd(&c[0], 1);
    atomicAdd(&x[1], 1.0f);
    atomicCAS(&c[2], 0, 1);
    x[t] = tile[t % 4][(t + 1) % 8] + __expf(x[2]) + sqrtf(x[3]) + (float)clock64();
    assert(n > 0);
    if (n < 0) __trap();
    printf("%d %f %s\n", t, x[t], "probe");
}
"""


def kernel_callable(name: str) -> bool:
    """Whether library symbol ``name`` is one a CUDA kernel could call."""
    return name in KERNEL_CALLABLE or _LIBGCC.fullmatch(name) is not None


def poisoned(prelude_symbols: Iterable[str]) -> list[str]:
    """Names a kernel may not use: what only the prelude may call, and ``asm``/``weakref``."""
    only = sorted(s for s in prelude_symbols
                  if not kernel_callable(s) and re.fullmatch(r"[A-Za-z_]\w*", s))
    return [*only, *(f"__builtin_{s}" for s in only), *_SNEAKY]


def poison_pragma(names: Iterable[str]) -> str:
    """The ``#pragma GCC poison`` line for ``names``, to put between prelude and kernel."""
    return "#pragma GCC poison " + " ".join(names)


def library_symbols(path: Path) -> elf.Symbols:
    """The shared library ``path``'s imported and defined symbols, as binutils' ``nm`` lists
    them: read from the file (:mod:`tilelab.emu.elf`), or by ``nm`` where that reader does
    not know the file (``$TILELAB_EMU_NM`` names another nm)."""
    try:
        return elf.read_symbols(path)
    except elf.Unreadable:
        return elf.Symbols(frozenset(nm_undefined_symbols(path)),
                           frozenset(_nm(path, "--defined-only") | _nm(path, "-D",
                                                                      "--defined-only")))
    except OSError as exc:
        raise CompileError(f"internal error: {path.name} could not be read ({exc}).") from None


def undefined_symbols(path: Path) -> set[str]:
    """Names of the undefined (imported) dynamic symbols of the shared library ``path``, as
    ``nm -D --undefined-only`` lists them (:func:`library_symbols`)."""
    return set(library_symbols(path).imported)


def nm_undefined_symbols(path: Path) -> set[str]:
    """:func:`undefined_symbols` as ``nm`` reads them."""
    return _nm(path, "-D", "--undefined-only")


def _nm(path: Path, *options: str) -> set[str]:
    """The names ``nm`` lists for ``path`` with ``options``."""
    nm = shutil.which(os.environ.get("TILELAB_EMU_NM", "nm") or "nm")
    if not nm:
        raise CompileError("The CPU emulator checks each compiled kernel with `nm`, which was not "
                           "found. Install binutils (Debian/Ubuntu: apt install binutils; it "
                           "comes with g++).")
    try:
        proc = subprocess.run([nm, *options, "--format=posix", str(path)],
                              capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompileError(f"internal error: nm could not read {path.name} ({exc}).") from None
    if proc.returncode != 0:
        raise CompileError(f"internal error: nm could not read {path.name}: "
                           f"{proc.stderr.strip()[:300]}")
    # "name[@version] type [value size]"; a version suffix is not part of the name
    return {line.split()[0].split("@")[0] for line in proc.stdout.splitlines() if line.split()}


def _demangle(names: list[str]) -> list[str]:
    filt = shutil.which("c++filt")
    if not filt or not any(n.startswith("_Z") for n in names):
        return names
    out = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True,
                         check=False, timeout=30).stdout.splitlines()
    return out if len(out) == len(names) else names


def _line_naming(source: str, name: str) -> int | None:
    """The first line of ``source`` where identifier ``name`` appears outside comments."""
    word = re.sub(r"\(.*", "", name).split("::")[-1].split("<")[0]
    masked = mask(source)
    m = re.search(rf"(?<![\w$]){re.escape(word)}(?![\w$])", masked) if word else None
    return masked.count("\n", 0, m.start()) + 1 if m else None


def library_names_defined(defined: Iterable[str], needs: Iterable[str]) -> list[str]:
    """Of the names a built library defines, those of library functions (or data) that the
    library may import: the prelude's own (``needs``), ``KERNEL_CALLABLE`` and libgcc's
    helpers. Defined there, such a name would stand for the library's in every call the
    emulator's own code makes to it (its runtime calls memcpy, say), since the link binds
    them to it."""
    imported = set(needs) | KERNEL_CALLABLE
    return sorted(n for n in set(defined) if n in imported or _LIBGCC.fullmatch(n))


def library_name_error(names: Iterable[str], source: str) -> CompileError:
    """The learner-facing error for a kernel source defining library names ``names``."""
    names = sorted(set(names))
    line = _line_naming(source, names[0])
    where = f" line {line}" if line else ""
    return CompileError(
        f"kernel.cu{where} defines `{names[0]}`"
        + (f" (and {', '.join(f'`{n}`' for n in names[1:])})" if len(names) > 1 else "")
        + ", the name of a library function the emulator's own code calls; a kernel's "
        "functions and variables may not take a library function's name: rename it.",
        lines=(line,) if line else ())


def host_call_error(names: Iterable[str], source: str, found: dict[str, int] | None = None
                    ) -> CompileError:
    """The learner-facing error for a kernel calling host functions ``names``.

    ``found`` (names g++ refused as poisoned) gives the lines g++ named; the other lines
    are the first mention of the name in ``source``.
    """
    names = sorted(set(names))
    shown = dict(zip(names, _demangle(names), strict=True))
    lines = {n: (found or {}).get(n) or _line_naming(source, shown[n]) for n in names}
    named = tuple(sorted({v for v in lines.values() if v}))
    sneaky = [n for n in names if n in _SNEAKY]
    if sneaky:
        n = sneaky[0]
        if n in _ASM:
            return UnsupportedConstruct(f"inline assembly ({n})", lines[n])
        where = f" line {lines[n]}" if lines[n] else ""
        return CompileError(f"kernel.cu{where} uses `{n}`, which kernels cannot use. Remove it.",
                            lines=(lines[n],) if lines[n] else ())
    verb = "uses" if found else "calls"
    if len(names) == 1:
        n = names[0]
        where = f" line {lines[n]}" if lines[n] else ""
        what = f"kernel.cu{where} {verb} `{shown[n]}`, a host function"
    else:
        parts = [f"`{shown[n]}`" + (f" (line {lines[n]})" if lines[n] else "") for n in names]
        what = f"kernel.cu {verb} {', '.join(parts[:-1])} and {parts[-1]}, host functions"
    calls = "call" if len(names) == 1 else "calls"
    hint = " (or rename your own function or variable of that name)" if found else ""
    return CompileError(f"{what}; kernels can call only CUDA device functions (math functions, "
                        f"printf, atomics, ...). Remove the {calls}{hint}.", lines=named)


_POISONED = re.compile(r'^(?P<file>[^:\n]*):(?P<line>\d+):(?:\d+:)? error: attempt to use '
                       r'poisoned ["\u201c\u2018](?P<name>\w+)["\u201d\u2019]', re.M)


def poisoned_names(stderr: str) -> dict[str, int]:
    """Names g++ refused as poisoned, with their ``kernel.cu`` line (0 if elsewhere)."""
    found: dict[str, int] = {}
    for m in _POISONED.finditer(stderr):
        line = int(m.group("line")) if m.group("file") == "kernel.cu" else 0
        found.setdefault(m.group("name").removeprefix("__builtin_"), line)
    return found
