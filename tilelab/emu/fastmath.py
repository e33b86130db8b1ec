"""nvcc's floating-point options on the emulator: ``-ftz``, ``--prec-div``, ``--prec-sqrt``
and ``--use_fast_math`` (which sets the three, unless given apart, and turns ``sinf``,
``expf``, ... into ``__sinf``, ``__expf``, ...: the CUDA C++ Programming Guide's table of
the functions it affects), and where the emulator's results may still differ from a GPU's.

The fast intrinsics themselves are the prelude's (tilelab_emu_fast.h): a GPU's argument
step done as a GPU does it, the special function unit's approximation computed exactly.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

#: the functions --use_fast_math turns into intrinsics (with their parameters)
FAST_FUNCTIONS = (("sinf", "x"), ("cosf", "x"), ("tanf", "x"), ("expf", "x"),
                  ("exp10f", "x"), ("logf", "x"), ("log2f", "x"), ("log10f", "x"),
                  ("powf", "x, y"), ("sincosf", "x, s, c"), ("fdividef", "x, y"))
_SWITCHES = {"ftz": "ftz", "prec-div": "prec_div", "prec_div": "prec_div",
             "prec-sqrt": "prec_sqrt", "prec_sqrt": "prec_sqrt"}
_FALSE = ("false", "0", "no", "off")


class FidelityWarning(UserWarning):
    """Results of this build may differ from a GPU's (the message says which, by how much)."""


@dataclass(frozen=True)
class FloatOptions:
    """What nvcc's options make of single-precision arithmetic."""

    ftz: bool = False  # subnormal floats flushed to zero
    prec_div: bool = True  # x / y rounded as IEEE 754 says (else div.full or div.approx)
    prec_sqrt: bool = True
    fast: bool = False  # --use_fast_math: sinf is __sinf, x / y is approximate, ...

    def prelude_lines(self) -> str:
        """C++ for the kernel's unit, after the prelude and before the source: the flush to
        zero for the launch, the fast functions as macros."""
        out = []
        if self.ftz:
            out.append("static const tl_emu::FtzMode tl_ftz_mode(true);")
        if self.fast:
            out += [f"#define {f}({p}) __{f}({p})" for f, p in FAST_FUNCTIONS]
        return "".join(line + "\n" for line in out)

    def differences(self, source: str = "") -> tuple[str, ...]:
        """Where a GPU built with these options may still give other results than the
        emulator for ``source``, and by how much."""
        out = []
        if self.ftz:
            out.append("-ftz=true: the CPU's flush to zero also flushes double-precision "
                       "subnormals (below 2.3e-308) to zero, which a GPU keeps; and -x or "
                       "fabsf(x) of a float subnormal, stored as it is, keeps its value here "
                       "where a GPU's flushes it to zero (below 1.2e-38)")
        if self.fast:
            out.append("--use_fast_math: a float division x / y is exact here; a GPU "
                       "computes x * (1/y), up to 2 ulp off, and 0 for 2^126 < |y| < 2^128 "
                       "(write __fdividef(x, y) to see the GPU's result here); sin(x), "
                       "exp(x), ... of a float are exact here, approximate on a GPU like "
                       "__sinf, __expf")
        elif not self.prec_div:
            out.append("--prec-div=false: a float division x / y is exact here; a GPU's "
                       "may be 2 ulp off")
        if not self.prec_sqrt:
            out.append(f"{'--use_fast_math' if self.fast else '--prec-sqrt=false'}: sqrtf "
                       "is exact here; a GPU's approximate square root may be 2 ulp off")
        if self.fast or re.search(r"\b__(?:sin|cos|tan|sincos|exp|exp10|log|log2|log10|pow)f\b",
                                  source):
            out.append("fast intrinsics (__sinf, __expf, __logf, __powf, ...): the GPU's "
                       "argument step is emulated, its special function unit computed "
                       "exactly: results may differ by up to 2^-21.41 absolute (__sinf, "
                       "__cosf on [-pi, pi]) or 2 ulp (__expf, __log2f)")
        return tuple(out)


def float_options(options: Sequence[str]) -> FloatOptions:
    """nvcc's floating-point settings for ``options`` (``-ftz=true``, ``--ftz true``,
    ``-use_fast_math``, ...): a switch given apart wins over ``--use_fast_math``, whatever
    their order (as nvcc does), the last of one switch wins."""
    opts = list(options)
    given: dict[str, bool] = {}
    fast = False
    for i, o in enumerate(opts):
        name, eq, value = o.lstrip("-").partition("=")
        if name == "use_fast_math" and o.startswith("-"):
            fast = True
        elif name in _SWITCHES and o.startswith("-"):
            if not eq:
                value = opts[i + 1] if i + 1 < len(opts) else ""
            given[_SWITCHES[name]] = value.strip().lower() not in _FALSE
    base = {"ftz": fast, "prec_div": not fast, "prec_sqrt": not fast}
    return FloatOptions(fast=fast, **{**base, **given})


def warn_differences(differences: Sequence[str]) -> None:
    """One :class:`FidelityWarning` naming where a GPU's results may differ (none when
    there is nothing to say)."""
    if differences:
        warnings.warn("CPU emulator: results may differ from a GPU's here: "
                      + "; ".join(differences) + ".", FidelityWarning, stacklevel=3)
