"""``bank_wide.json``: the 8- and 16-byte bank rule held against the GPU, pattern by pattern.

Each pattern is one warp's lane offsets into shared memory: the course's own wide accesses
(the broadcast of the tiled kernel, steps 3, 4 and 7's loads of A and B, plain and
swizzled) and patterns drawn at random, some with the lane pairs that NVIDIA describes as
uniform loads. One launch per pattern and access (``tilelab/kernels/bank_wide.cu``) under
Nsight Compute gives the GPU's wavefronts per instruction; beside them, what the rule of
:mod:`tilelab.catalog.banks` predicts, what two simpler rules predict (quarter-warps
always; one pass per 128 distinct bytes), and the CPU emulator's degree of the same
access, run through its analysis.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import emu
from tilelab.catalog import banks
from tilelab.catalog.reference import kernel_file
from tilelab.catalog.road import portable_source
from tilelab.device.runtime import get_runtime
from tilelab.experiments import counters
from tilelab.experiments.datafile import write

ITERS = 256  # accesses per launch (the counts are per instruction: any number would do)
WORDS = 2048  # the kernel's shared array
KERNELS = {"lds128": (16, True), "lds64": (8, True), "sts128": (16, False)}
#: within this many wavefronts per instruction, a prediction matches the count
MATCH = 0.02

Pattern = list[int | None]  # word offset of each of the 32 lanes (None: inactive)


def _course() -> dict[str, Pattern]:
    """The wide shared accesses of the course's kernels, one warp's word offsets each."""
    lanes = range(32)
    swz = [(m // 4) * 16 + 4 * (0 ^ (((m // 4) // 2) % 4)) for m in lanes]
    return {
        "broadcast (tiled32's As[ty][k..k+3])": [0] * 32,
        "32 consecutive float4": [4 * lane for lane in lanes],
        "float4 at a stride of 2 chunks": [8 * lane for lane in lanes],
        "step 3, A (two rows of 16 lanes, one chunk each)": [(lane // 16) * 8 for lane in lanes],
        "step 3, B (chunks 2t of 16 lanes, twice)": [(lane % 16) * 8 for lane in lanes],
        "step 4, A (a chunk per 4 lanes)": [(lane // 4) * 4 for lane in lanes],
        "step 4, B (4 chunks, 8 times over)": [(lane % 4) * 4 for lane in lanes],
        "step 7, A plain (8 rows of 64 bytes)": [(lane // 4) * 16 for lane in lanes],
        "step 7, A swizzled": swz,
        "two chunks, one per half-warp": [0 if lane < 16 else 8 for lane in lanes],
        "lanes n and n^4 alike": [4 * ((lane % 4) + 4 * (lane // 8)) for lane in lanes],
        "lanes n and n^8 alike": [4 * ((lane % 8) + 8 * (lane // 16)) for lane in lanes],
        "lanes n and n^16 alike": [4 * (lane % 16) for lane in lanes],
        "half the lanes, consecutive": [4 * lane if lane % 2 == 0 else None for lane in lanes],
    }


def _drawn(seed: int = 53) -> dict[str, Pattern]:
    """Patterns drawn at random (chunk offsets within 64 chunks), a third of them with the
    lanes paired as uniform loads pair them, some with lanes left out."""
    rng = np.random.default_rng(seed)
    out: dict[str, Pattern] = {}
    for i in range(8):
        out[f"random {i + 1}"] = [4 * int(c) for c in rng.integers(0, 64, 32)]
    for step in (1, 2):
        for i in range(3):
            half = [4 * int(c) for c in rng.integers(0, 64, 32)]
            out[f"random, lanes n and n^{step} alike, {i + 1}"] = [
                half[lane & ~step] for lane in range(32)]
    for i in range(3):
        pat: Pattern = [4 * int(c) for c in rng.integers(0, 16, 32)]
        for lane in rng.choice(32, 10, replace=False):
            pat[int(lane)] = None
        out[f"random, 10 lanes idle, {i + 1}"] = pat
    return out


def patterns() -> dict[str, Pattern]:
    """Every pattern, the course's first (word offsets, 16-byte aligned)."""
    return {**_course(), **_drawn()}


def predictions(pattern: Pattern, width: int, load: bool) -> dict[str, Any]:
    """What each rule predicts for one pattern (byte addresses from its word offsets)."""
    addr = [None if w is None else 4 * w for w in pattern]
    return {
        "predicted": banks.wavefronts(addr, width, load),
        "ideal": banks.ideal(addr, width, load),
        "degree": banks.degree(addr, width, load),
        "quarter_warp": banks.quarter_warp_wavefronts(addr, width),
        "merged": banks.merged_wavefronts(addr, width),
    }


def emulator_degrees(rows: list[tuple[str, str, Pattern]]) -> dict[tuple[str, str], float]:
    """The CPU emulator's worst degree of each (kernel, pattern)'s access, analysed."""
    rt = get_runtime("emu")
    mod = emu.SourceModule(portable_source(kernel_file("bank_wide.cu")), analysis=True)
    out: dict[tuple[str, str], float] = {}
    for kernel, name, pattern in rows:
        fn = mod.get_function(kernel)
        offs = rt.to_device(np.array([-1 if w is None else w for w in pattern], np.int32))
        res = rt.mem_alloc(4 * 32)
        fn(offs, res, np.int32(1), block=(32, 1, 1), grid=(1, 1))
        # the wide access is the kernel's only shared load (lds*) or store (sts128)
        kind = "write" if kernel.startswith("sts") else "read"
        degrees = [b.max_degree for b in fn.last_report.analysis.bank_lines
                   if b.kind == kind and b.array == "s"]
        out[(kernel, name)] = float(max(degrees)) if degrees else float("nan")
    return out


def child(cases: list[tuple[str, Pattern]]) -> None:
    """Under ncu: one launch per (kernel, pattern), in order."""
    rt = get_runtime("gpu")
    mod = rt.SourceModule(kernel_file("bank_wide.cu"))
    res = rt.mem_alloc(4 * 32)
    for kernel, pattern in cases:
        offs = rt.to_device(np.array([-1 if w is None else w for w in pattern], np.int32))
        mod.get_function(kernel)(offs, res, np.int32(ITERS), block=(32, 1, 1), grid=(1, 1))
        rt.synchronize()


METRICS = [
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
]


def cases() -> list[tuple[str, str, Pattern]]:
    """(kernel, pattern name, pattern): every pattern as a 16-byte load, a 16-byte store
    and an 8-byte load."""
    out = []
    for name, pat in patterns().items():
        out.append(("lds128", name, pat))
        out.append(("sts128", name, pat))
        out.append(("lds64", name, pat))
    return out


def _count(vals: dict[str, float], kernel: str) -> tuple[float, float]:
    """Wavefronts and conflicts per instruction of the pattern's own access: the kernel's
    only shared loads (lds*: its init loop stores) or only shared stores (sts128: its
    read-back loads)."""
    op = "st" if kernel.startswith("sts") else "ld"
    wf = vals[f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}_sum"]
    inst = vals[f"smsp__inst_executed_op_shared_{op}_sum"]
    conf = vals.get(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}_sum", 0.0)
    return (wf / inst if inst else float("nan"), conf / inst if inst else float("nan"))


RULES = ("predicted", "quarter_warp", "merged")


def summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each rule, how many of the patterns' counts it predicted (kind "summary")."""
    patterns = [r for r in rows if r.get("kind") == "pattern"]
    key = {"predicted": "match", "quarter_warp": "quarter_warp_match",
           "merged": "merged_match"}
    return [{"kind": "summary", "rule": rule, "patterns": len(patterns),
             "matched": sum(bool(r[key[rule]]) for r in patterns)} for rule in RULES]


def run(rt, out: Path) -> Path:
    """Count every pattern on the GPU, predict it, analyse it on the emulator; write."""
    todo = cases()
    launches, _ = counters.profile(
        ["tilelab.experiments.bank_wide", "child"], METRICS, len(todo))
    try:
        emu_deg = emulator_degrees(todo)
    except Exception as exc:  # the GPU's counts stand without the emulator's degrees
        print(f"bank_wide: the CPU emulator could not analyse the patterns here: {exc}",
              file=sys.stderr)
        emu_deg = {}
    rows = []
    for (kernel, name, pattern), vals in zip(todo, launches, strict=True):
        width, load = KERNELS[kernel]
        measured, conflicts = _count(vals, kernel)
        pred = predictions(pattern, width, load)
        rows.append({
            "kind": "pattern", "kernel": kernel, "pattern": name, "width": width,
            "op": "load" if load else "store", "course": name in _course(),
            "active_lanes": sum(w is not None for w in pattern),
            "offsets": " ".join("-" if w is None else str(w) for w in pattern),
            "measured": measured, "ncu_conflicts": conflicts, **pred,
            "emu_degree": emu_deg.get((kernel, name)),
            "match": abs(measured - pred["predicted"]) <= MATCH,
            "quarter_warp_match": abs(measured - pred["quarter_warp"]) <= MATCH,
            "merged_match": abs(measured - pred["merged"]) <= MATCH,
        })
    rows += summary_rows(rows)
    return write(
        out, "bank_wide", "Wide shared-memory accesses: the bank rule against the GPU's count",
        f"One warp, {ITERS} accesses per launch, each lane at its own word offset (offsets: "
        "lane by lane, '-' an idle lane); measured: Nsight Compute's shared wavefronts per "
        "instruction of the access; predicted: tilelab.catalog.banks.wavefronts (phases of "
        "8 lanes for 16-byte accesses, 16 for 8-byte, twice as many lanes for a load whose "
        "lanes n and n^1, or n and n^2, read alike); quarter_warp: the same without the "
        "pairing; merged: one pass per 128 distinct bytes of the warp, at least 2; "
        "emu_degree: the CPU emulator's worst degree of the access (degree: the rule's).",
        {"kind": "", "rule": "", "matched": "", "patterns": "",
         "kernel": "", "pattern": "", "width": "B", "op": "", "course": "",
         "active_lanes": "", "offsets": "", "measured": "", "ncu_conflicts": "",
         "predicted": "", "ideal": "", "degree": "", "quarter_warp": "", "merged": "",
         "emu_degree": "", "match": "", "quarter_warp_match": "", "merged_match": ""},
        rows,
        method=f"ncu --clock-control none; one launch of {ITERS} accesses per pattern",
        kernels={"file:bank_wide.cu": kernel_file("bank_wide.cu")},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child([(k, p) for k, _, p in cases()])
