"""``shared_bw.json``: the shared-memory data path's bytes per clock (the model's rate)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.microbench import NO_FLUSH, device_attr


def run(rt: Runtime, out: Path, iters: int = 1 << 14) -> Path:
    """Shared-memory bytes per clock per SM, conflict-free 16-byte loads."""
    fn = rt.SourceModule(kernel_file("shared_bw.cu")).get_function("shared_bw")
    sm = device_attr("MULTIPROCESSOR_COUNT")
    clock_mhz = device_attr("CLOCK_RATE") / 1000
    blocks, threads = sm * 8, 256
    buf = rt.mem_alloc(4 * blocks * threads)
    t = time_interleaved(
        {"lds128": lambda: fn(buf, np.int32(iters), block=(threads, 1, 1), grid=(blocks, 1))},
        flush=False,
    )["lds128"]
    nbytes = 16.0 * iters * blocks * threads
    gbps = nbytes / t.median_ms / 1e6
    return write(
        out, "shared_bw", "Shared-memory bandwidth, conflict-free 16-byte loads",
        f"{blocks} blocks of {threads} threads, {iters} float4 shared loads each (a warp's "
        "512 bytes over 32 consecutive 16-byte words). bytes_per_clock_per_sm divides by the "
        "SM count and the driver's maximum clock.",
        {"gbps": "GB/s", "bytes_per_clock_per_sm": "B", "median_ms": "ms"},
        [{"gbps": gbps, "bytes_per_clock_per_sm": gbps * 1e9 / sm / (clock_mhz * 1e6),
          "clock_mhz": clock_mhz, "sm_count": sm, "median_ms": t.median_ms,
          "spread": t.spread}],
        method=NO_FLUSH,
        kernels={"file:shared_bw.cu": kernel_file("shared_bw.cu")},
    )
