"""``waves.json``: blocks that do not fill the last wave of SMs (wave quantization)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.microbench import NO_FLUSH, device_attr


def run(rt: Runtime, out: Path, iters: int = 1 << 15) -> Path:
    """Time of a fixed-work block kernel as the grid crosses whole waves of SMs."""
    fn = rt.SourceModule(kernel_file("waves.cu")).get_function("waves")
    sm = device_attr("MULTIPROCESSOR_COUNT")
    threads, per_sm = 1024, device_attr("MAX_THREADS_PER_MULTIPROCESSOR") // 1024
    wave = sm * per_sm
    counts = sorted({wave // 2, wave, wave + 1, 2 * wave, 2 * wave + 1, 3 * wave,
                     3 * wave + 1, 4 * wave})
    buf = rt.mem_alloc(4 * threads * max(counts))
    runs = {
        str(b): (lambda b=b: fn(buf, np.int32(iters), block=(threads, 1, 1), grid=(b, 1)))
        for b in counts
    }
    t = time_interleaved(runs, flush=False)
    one = t[str(wave)].median_ms
    rows = [{
        "blocks": b,
        "waves": b / wave,
        "full_waves": -(-b // wave),
        "median_ms": t[str(b)].median_ms,
        "spread": t[str(b)].spread,
        "per_wave": t[str(b)].median_ms / one,
    } for b in counts]
    return write(
        out, "waves", "Wave quantization: blocks of fixed work on every SM",
        f"Blocks of {threads} threads, {per_sm} resident per SM, so one wave is "
        f"{per_sm} x {sm} = {wave} blocks; each block runs the same {iters} rounds of FMAs. "
        "per_wave is the time in units of one full wave's time.",
        {"blocks": "", "waves": "", "full_waves": "", "median_ms": "ms", "spread": "",
         "per_wave": "x"},
        rows, method=NO_FLUSH,
        kernels={"file:waves.cu": kernel_file("waves.cu")},
    )
