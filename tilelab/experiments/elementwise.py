"""``elementwise.json``: an elementwise add from global memory vs staged through shared."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, simple_launches


def run(rt: Runtime, out: Path, sizes: tuple[int, ...] = (1 << 22, 1 << 26)) -> Path:
    rows = []
    rng = np.random.default_rng()
    for n in sizes:
        a, b = (
            rt.to_device(rng.random(n, dtype=np.float32)),
            rt.to_device(rng.random(n, dtype=np.float32)),
        )
        c = rt.mem_alloc(4 * n)
        grid = (math.ceil(n / 256), 1)

        def make(fn, a=a, b=b, c=c, n=n, grid=grid):
            return lambda: fn(a, b, c, np.int32(n), block=(256, 1, 1), grid=grid)

        t = time_interleaved(
            simple_launches(rt, kernel_file("elementwise.cu"), ["add_global", "add_shared"], make)
        )
        for k, tk in t.items():
            rows.append(
                {
                    "kernel": k,
                    "n": n,
                    "median_ms": tk.median_ms,
                    "spread": tk.spread,
                    "gbps": 12.0 * n / tk.median_ms / 1e6,
                }
            )
    return write(
        out,
        "elementwise",
        "Elementwise add: global vs staged through shared memory",
        "c = a + b; GB/s counts 12 bytes per element (two reads, one write).",
        {"kernel": "", "n": "", "median_ms": "ms", "spread": "", "gbps": "GB/s"},
        rows,
        method=METHOD,
        kernels={"file:elementwise.cu": kernel_file("elementwise.cu")},
    )
