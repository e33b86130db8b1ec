"""Generated kernels for the emulator-against-GPU differential test: what one case is (its
kernel, inputs, launch, options, and how its outcome is compared), and how cases are packed
into few modules so nvcc and g++ build few files.

A :class:`Case` is self-contained: its source (names prefixed by its id), its arguments with
their initial bytes, its launch geometry and the nvcc options it is built with. Cases with
the same options and linkage share a :class:`Module`, except those marked ``alone`` (a compile
refusal is expected or possible: one failing kernel would take its module's others with it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Kernels per shared module (nvcc and g++ each build a few dozen files for the corpus).
MODULE_SIZE = 60

#: What a comparison of one output may be: bitwise (NaN equal to NaN), within ``n`` ulps of
#: the GPU's value or ``e`` absolute, equal once sorted (an order the GPU does not fix), or
#: not compared (a value the GPU does not fix at all).
COMPARE_MODES = ("exact", "ulp", "abs", "sorted", "none")


@dataclass(frozen=True)
class Arg:
    """One kernel parameter: a buffer (``in``: read only; ``out``: compared after the launch,
    passed with its initial bytes so an element left unwritten is the same on both sides;
    ``ptr``: a buffer passed as a raw device address ``offset`` bytes into its allocation) or
    a ``scalar``."""

    role: str  # in | out | ptr | scalar
    value: np.ndarray  # the initial elements (a 0-d array for a scalar)
    compare: str = "exact"  # for outputs: one of COMPARE_MODES
    tol: float = 0.0  # ulps (compare "ulp") or absolute error (compare "abs")
    offset: int = 0  # bytes, for role "ptr"
    out: bool = True  # a "ptr" buffer read back and compared

    @property
    def compared(self) -> bool:
        return (self.role == "out" or (self.role == "ptr" and self.out)) \
            and self.compare != "none"


@dataclass(frozen=True)
class Case:
    """One generated kernel with everything needed to run it and judge its outcome.

    ``expect`` is what the generator built it to do (``ok``, ``fault:misaligned``,
    ``refuse``, ``launch``, or ``any`` when only a GPU can say): the stand-in for the GPU's
    answer on a machine without one. ``lines`` are the indices (into ``source.splitlines()``)
    of statements a minimiser may delete."""

    id: str
    family: str
    symbol: str  # the name get_function takes (mangled when no_extern_c and not extern "C")
    source: str
    args: tuple[Arg, ...]
    block: tuple[int, int, int]
    grid: tuple[int, int] = (1, 1)
    shared: int = 0
    options: tuple[str, ...] = ()
    no_extern_c: bool = False
    alone: bool = False
    expect: str = "ok"
    printf: str = ""  # "" | "lines" (the printed lines, sorted) | "count" (how many)
    lines: tuple[int, ...] = ()
    note: str = ""
    attrs: tuple[tuple[str, int], ...] = ()  # function attributes set before the launch

    @property
    def module_key(self) -> tuple:
        return (self.options, self.no_extern_c, self.id if self.alone else "")

    def digest(self) -> str:
        """A hash of everything that decides the outcome (a truth file's answer for a case
        applies only to the case it was measured on)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.source, self.symbol, self.block, self.grid, self.shared,
                             self.options, self.no_extern_c, self.attrs]).encode())
        for a in self.args:
            h.update(f"{a.role}|{a.value.dtype.str}|{a.offset}|".encode())
            h.update(np.ascontiguousarray(a.value).tobytes())
        return h.hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("id", "family", "symbol", "source", "block", "grid",
                                           "shared", "options", "no_extern_c", "alone",
                                           "expect", "printf", "lines", "note", "attrs")}
        d["args"] = [{"role": a.role, "value": encode_array(a.value), "compare": a.compare,
                      "tol": a.tol, "offset": a.offset, "out": a.out} for a in self.args]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Case:
        args = tuple(Arg(a["role"], decode_array(a["value"]), a.get("compare", "exact"),
                         a.get("tol", 0.0), a.get("offset", 0), a.get("out", True))
                     for a in d["args"])
        return Case(d["id"], d["family"], d["symbol"], d["source"], args, tuple(d["block"]),
                    tuple(d.get("grid", (1, 1))), d.get("shared", 0),
                    tuple(d.get("options", ())), d.get("no_extern_c", False),
                    d.get("alone", False), d.get("expect", "ok"), d.get("printf", ""),
                    tuple(d.get("lines", ())), d.get("note", ""),
                    tuple(tuple(x) for x in d.get("attrs", ())))


@dataclass
class Module:
    """Cases built together: one source, one set of nvcc options, one linkage."""

    options: tuple[str, ...]
    no_extern_c: bool
    cases: list[Case] = field(default_factory=list)

    @property
    def source(self) -> str:
        return "\n".join(c.source.rstrip("\n") for c in self.cases) + "\n"

    @property
    def name(self) -> str:
        h = hashlib.sha256(self.source.encode() + repr(self.options).encode()).hexdigest()
        return f"m{h[:12]}"

    def case_at(self, line: int) -> Case | None:
        """The case whose source holds 1-based ``line`` of :attr:`source` (compile errors
        name lines; PyCUDA's extern "C" wrapper adds one line above, the caller subtracts
        it)."""
        start = 1
        for c in self.cases:
            n = c.source.rstrip("\n").count("\n") + 1
            if start <= line < start + n:
                return c
            start += n
        return None


def modules_of(cases: list[Case], size: int = MODULE_SIZE) -> list[Module]:
    """Cases packed into modules: by options and linkage, ``size`` at most, alone where a
    case asks to be."""
    by: dict[tuple, list[Case]] = {}
    for c in cases:
        by.setdefault(c.module_key, []).append(c)
    out = []
    for key, group in by.items():
        for i in range(0, len(group), size):
            out.append(Module(key[0], key[1], group[i:i + size]))
    return out


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """An array as JSON: dtype, shape and its bytes compressed, base64."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "b64": base64.b64encode(zlib.compress(a.tobytes(), 6)).decode()}


def decode_array(d: dict[str, Any]) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(d["b64"]))
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()
