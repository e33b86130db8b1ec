"""``bank_stride.json``: shared-memory reads at a stride, timed, with the emulator's degree."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab import emu
from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime, get_runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD

STRIDES = (1, 2, 4, 8, 16, 32, 33)


def run(rt: Runtime, out: Path, blocks: int = 1024, iters: int = 4096) -> Path:
    c = rt.mem_alloc(4 * blocks * 256)

    def make_for(stride: int):
        return lambda fn: (
            lambda: fn(c, np.int32(stride), np.int32(iters), block=(256, 1, 1), grid=(blocks, 1))
        )

    mod = rt.SourceModule(kernel_file("bank_stride.cu"))
    fn = mod.get_function("bank_stride")
    t = time_interleaved({str(s): make_for(s)(fn) for s in STRIDES}, flush=False)
    degrees = emu_stride_degrees()
    base = t["1"].median_ms
    rows = [
        {
            "stride": s,
            "median_ms": t[str(s)].median_ms,
            "spread": t[str(s)].spread,
            "slowdown": t[str(s)].median_ms / base,
            "emu_degree": degrees.get(s),
        }
        for s in STRIDES
    ]
    return write(
        out,
        "bank_stride",
        "Shared-memory reads at a stride",
        f"{blocks} blocks of 256 threads, {iters} reads each of s[lane*stride]; "
        "emu_degree is the CPU emulator's bank-conflict degree of the same access.",
        {"stride": "words", "median_ms": "ms", "spread": "", "slowdown": "x", "emu_degree": "way"},
        rows,
        method=METHOD,
        kernels={"file:bank_stride.cu": kernel_file("bank_stride.cu")},
    )


def emu_stride_degrees() -> dict[int, float]:
    """The emulator's conflict degree for the bank_stride access at each stride."""
    rt = get_runtime("emu")
    mod = emu.SourceModule(kernel_file("bank_stride.cu"), analysis=True)
    fn = mod.get_function("bank_stride")
    degrees = {}
    for s in STRIDES:
        c = rt.mem_alloc(4 * 64)
        fn(c, np.int32(s), np.int32(2), block=(64, 1, 1), grid=(1, 1))
        lines = [b for b in fn.last_report.analysis.bank_lines if b.kind == "read"]
        degrees[s] = max(b.max_degree for b in lines)
    return degrees
