"""What happened to one generated case on one backend, and whether the emulator's outcome
matches the GPU's.

An :class:`Outcome` is a status (``ok``, ``fault``, ``refused`` at compile time, ``launch``
refused, ``timeout``, ``error``), a class for faults and launch refusals (misaligned
address, illegal address, ...), the message, the outputs and what printf wrote. Both
backends' errors are read into the same classes (:func:`from_pycuda`, :func:`from_emulator`).

:func:`verdict` compares the emulator's outcome with the GPU's: ``agree``; ``silent`` (the
emulator ran and gave a result where the GPU faulted or refused, or gave other values than
the GPU beyond the case's bound: the divergences that mislead a learner); ``stricter`` (the
emulator stopped with a reason where the GPU ran); ``other`` (both stopped, in different
ways); and whether every refusal of the emulator's gives a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .corpus import Arg, Case, decode_array, encode_array

#: CUDA's launch-failure messages (cuGetErrorString, as PyCUDA quotes them) and their class.
GPU_FAULTS = (
    ("misaligned address", "misaligned"),
    ("an illegal memory access was encountered", "illegal_address"),
    ("device-side assert triggered", "assert"),
    ("an illegal instruction was encountered", "illegal_instruction"),
    ("unspecified launch failure", "launch_failure"),
    ("operation not supported on global/shared address space", "address_space"),
    ("invalid program counter", "invalid_pc"),
    ("the launch timed out", "timeout"),
    ("hardware stack error", "stack"),
    ("warp illegal address", "illegal_address"),
)
GPU_LAUNCH = (
    ("too many resources requested for launch", "resources"),
    ("invalid argument", "invalid"),
    ("invalid value", "invalid"),
    ("named symbol not found", "not_found"),
    ("invalid configuration", "invalid"),
)


@dataclass
class Outcome:
    """One case's result on one backend."""

    status: str  # ok | fault | refused | launch | timeout | error | missing
    kind: str = ""  # the class of a fault or launch refusal
    message: str = ""
    outputs: dict[int, np.ndarray] = field(default_factory=dict)  # argument index -> values
    stdout: str = ""
    seconds: float = 0.0

    def to_json(self, with_outputs: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status, "kind": self.kind,
                             "message": self.message[:2000], "seconds": round(self.seconds, 4)}
        if with_outputs and self.outputs:
            d["outputs"] = {str(k): encode_array(v) for k, v in self.outputs.items()}
        if self.stdout:
            d["stdout"] = self.stdout if len(self.stdout) < 20000 else \
                self.stdout[:10000] + "\n...\n" + self.stdout[-10000:]
            d["stdout_lines"] = self.stdout.count("\n")
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Outcome:
        o = Outcome(d["status"], d.get("kind", ""), d.get("message", ""),
                    {int(k): decode_array(v) for k, v in d.get("outputs", {}).items()},
                    d.get("stdout", ""), d.get("seconds", 0.0))
        if "stdout_lines" in d and o.stdout.count("\n") != d["stdout_lines"]:
            o.stdout_lines = d["stdout_lines"]  # type: ignore[attr-defined]
        return o

    @property
    def lines(self) -> int:
        return getattr(self, "stdout_lines", self.stdout.count("\n"))

    @property
    def label(self) -> str:
        return f"{self.status}:{self.kind}" if self.kind else self.status


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def from_pycuda(exc: BaseException) -> Outcome:
    """The outcome a PyCUDA exception stands for (a compile error, a refused launch, or a
    fault reported at the next synchronising call)."""
    name = type(exc).__name__
    msg = _one_line(exc)
    if name == "CompileError":
        stderr = getattr(exc, "stderr", "") or ""
        return Outcome("refused", "nvcc", _one_line(stderr) or msg)
    low = msg.lower()
    for text, kind in GPU_FAULTS:
        if text in low:
            return Outcome("fault", kind, msg)
    for text, kind in GPU_LAUNCH:
        if text in low:
            return Outcome("launch", kind, msg)
    return Outcome("error", name, msg)


def from_emulator(exc: BaseException) -> Outcome:
    """The outcome an emulator exception stands for, in the GPU's classes."""
    name = type(exc).__name__
    msg = _one_line(exc)
    low = msg.lower()
    if name in ("CompileError", "UnsupportedConstruct"):
        return Outcome("refused", "unsupported" if name == "UnsupportedConstruct" else "compile",
                       msg)
    if name == "OutOfBoundsAccess":
        return Outcome("fault", "illegal_address", msg)
    if name == "MisalignedAccess" or "misaligned" in low:
        return Outcome("fault", "misaligned", msg)
    if name == "KernelTimeout":
        return Outcome("timeout", "", msg)
    if name == "BarrierDivergence":
        return Outcome("fault", "divergence", msg)
    if name == "KernelCrash":
        if "assertion" in low:
            return Outcome("fault", "assert", msg)
        if "__trap()" in low:
            return Outcome("fault", "trap", msg)
        if "arithmetic exception" in low:
            return Outcome("fault", "arithmetic", msg)
        return Outcome("fault", "crash", msg)
    if name in ("LaunchError", "LogicError"):
        for text, kind in GPU_LAUNCH:
            if text in low:
                return Outcome("launch", kind, msg)
        if "cumodulegetfunction" in low:
            return Outcome("launch", "not_found", msg)
        return Outcome("launch", "other", msg)
    return Outcome("error", name, msg)


# ---- comparing values --------------------------------------------------------------------------
def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance between ``a`` and ``b`` in units in the last place of their type
    (counting representable values between them; a NaN against a NaN is 0, against a number
    infinite)."""
    a, b = np.asarray(a), np.asarray(b)
    it = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    top = np.int64(np.iinfo(it).min)
    # map the sign-magnitude bits onto a line: -0 and +0 meet at 0
    la = np.where(ia < 0, top - ia, ia).astype(np.float64)
    lb = np.where(ib < 0, top - ib, ib).astype(np.float64)
    d = np.abs(la - lb)
    both = np.isnan(a) & np.isnan(b)
    one = np.isnan(a) ^ np.isnan(b)
    return np.where(both, 0.0, np.where(one, np.inf, d))


def same_values(arg: Arg, emu: np.ndarray, gpu: np.ndarray) -> tuple[bool, str]:
    """Whether the emulator's output ``emu`` matches the GPU's ``gpu`` by ``arg``'s rule; and,
    when not, how far apart they are."""
    if emu.shape != gpu.shape or emu.dtype != gpu.dtype:
        return False, f"shape/type {emu.shape} {emu.dtype} vs {gpu.shape} {gpu.dtype}"
    mode = arg.compare
    if mode == "none":
        return True, ""
    if mode == "sorted":
        emu, gpu = np.sort(emu), np.sort(gpu)
        mode = "exact"
    if gpu.dtype.kind != "f":
        bad = emu != gpu
        if not bad.any():
            return True, ""
        k = int(np.argmax(bad))
        return False, f"{int(bad.sum())} of {bad.size} differ; first [{k}]: emulator " \
                      f"{emu[k]!r}, GPU {gpu[k]!r}"
    if mode == "exact":
        bad = (emu.view(f"u{emu.itemsize}") != gpu.view(f"u{gpu.itemsize}")) & \
            ~(np.isnan(emu) & np.isnan(gpu))
        dist = ulps(emu, gpu)
    elif mode == "ulp":
        dist = ulps(emu, gpu)
        bad = dist > arg.tol
    else:  # abs
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(emu.astype(np.float64) - gpu.astype(np.float64))
        same_special = (np.isnan(emu) & np.isnan(gpu)) | (emu == gpu)
        bad = ~same_special & ~(diff <= arg.tol)
        dist = np.where(same_special, 0.0, diff)
    if not bad.any():
        return True, ""
    k = int(np.argmax(np.where(bad, dist, -1)))
    unit = "" if mode == "abs" else " ulp"
    return False, (f"{int(bad.sum())} of {bad.size} beyond {mode} {arg.tol:g}; worst [{k}]: "
                   f"emulator {emu[k]!r}, GPU {gpu[k]!r} ({dist[k]:.4g}{unit})")


def printed(case: Case, emu: Outcome, gpu: Outcome) -> tuple[bool, str]:
    """Whether the emulator printed what the GPU did (the lines, sorted, or their count)."""
    if not case.printf:
        return True, ""
    if case.printf == "count":
        if emu.lines == gpu.lines:
            return True, ""
        return False, f"printf: {emu.lines} lines on the emulator, {gpu.lines} on the GPU"
    e, g = sorted(emu.stdout.splitlines()), sorted(gpu.stdout.splitlines())
    if e == g:
        return True, ""
    diff = next((f"emulator {a!r}, GPU {b!r}" for a, b in zip(e, g, strict=False) if a != b),
                f"{len(e)} lines vs {len(g)}")
    return False, f"printf differs: {diff}"


#: What an emulator refusal must not read like: the emulator's own internals, or g++'s words
#: about code the learner did not write.
_NO_REASON = re.compile(r"tl_emu|tilelab_|\bIdx<|\bPIdx<|template argument deduction|"
                        r"internal error", re.I)


def has_reason(out: Outcome) -> bool:
    """Whether an emulator error says, in the learner's terms, what is wrong."""
    return bool(out.message.strip()) and not _NO_REASON.search(out.message)


@dataclass
class Verdict:
    """The emulator's outcome against the GPU's for one case."""

    case: str
    family: str
    klass: str  # agree | silent | stricter | other
    detail: str
    emu: str  # the outcomes' labels
    gpu: str
    reason: bool = True  # the emulator's refusal or fault gave a reason (when it stopped)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def verdict(case: Case, emu: Outcome, gpu: Outcome) -> Verdict:
    """Compare the emulator's outcome with the GPU's (see the module's docstring)."""
    v = Verdict(case.id, case.family, "agree", "", emu.label, gpu.label,
                emu.status == "ok" or has_reason(emu))
    if gpu.status == "ok" and emu.status == "ok":
        for i, arg in enumerate(case.args):
            if not arg.compared:
                continue
            if i not in emu.outputs or i not in gpu.outputs:
                v.klass, v.detail = "silent", f"output #{i} missing"
                return v
            ok, why = same_values(arg, emu.outputs[i], gpu.outputs[i])
            if not ok:
                v.klass, v.detail = "silent", f"output #{i}: {why}"
                return v
        ok, why = printed(case, emu, gpu)
        if not ok:
            v.klass, v.detail = "silent", why
        return v
    if emu.status == "ok":
        v.klass = "silent"
        v.detail = f"the GPU {gpu.label}: {gpu.message[:300]}"
        return v
    if gpu.status == "ok":
        v.klass = "stricter"
        v.detail = f"the emulator {emu.label}: {emu.message[:300]}"
        return v
    same = emu.status == gpu.status and (emu.status == "refused" or emu.kind == gpu.kind)
    if not same:
        v.klass = "other"
        v.detail = f"emulator {emu.label} ({emu.message[:200]}); GPU {gpu.label} " \
                   f"({gpu.message[:200]})"
    return v


def expected(case: Case) -> Outcome:
    """The generator's expectation as an outcome (no values): what a machine without a GPU
    compares the emulator with."""
    if case.expect == "ok":
        return Outcome("ok")
    if case.expect == "refuse":
        return Outcome("refused", "nvcc", "expected")
    if case.expect == "launch":
        return Outcome("launch", "", "expected")
    if case.expect.startswith("fault:"):
        return Outcome("fault", case.expect.split(":", 1)[1], "expected")
    return Outcome("missing")


def against_expectation(case: Case, emu: Outcome) -> str:
    """``agree``, ``silent``, ``stricter``, ``other`` or ``unknown`` (nothing expected) for the
    emulator against what the generator built the case to do (outputs not compared)."""
    want = expected(case)
    if want.status == "missing":
        return "unknown"
    if want.status == emu.status == "ok":
        return "agree"
    if emu.status == "ok":
        return "silent"
    if want.status == "ok":
        return "stricter"
    if want.status == emu.status and (want.status in ("refused", "launch")
                                      or want.kind == emu.kind):
        return "agree"
    return "other"
