"""``transpose.json``: copy, the two naive transposes (strided writes, strided reads), the
shared-tile and padded-tile transposes, with the GPU's own sector counts of each (Nsight
Compute, where ncu is installed) for chapter 4's L1/L2 explanation."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, time_ladder

#: The transpose ladder, in the order the book climbs it.
LADDER = ["copy", "transpose_naive", "transpose_reads", "transpose_shared", "transpose_padded"]


def run(rt: Runtime, out: Path, sizes: tuple[int, ...] = (2048, 4096)) -> Path:
    rng = np.random.default_rng()
    rows = []
    for n in sizes:
        t = time_ladder(rt, LADDER, (n, n), rng)
        for k in LADDER:
            ms = t[k].median_ms
            rows.append(
                {
                    "kernel": k.replace("transpose_", ""),
                    "label": KERNELS[k].label,
                    "n": n,
                    "median_ms": ms,
                    "spread": t[k].spread,
                    "gbps": 8.0 * n * n / ms / 1e6,
                    "speedup_vs_shared": t["transpose_shared"].median_ms / ms,
                }
            )
    return write(
        out,
        "transpose",
        "Transpose ladder, FP32, N x N",
        "Copy, the naive transpose (strided writes), the other naive one (strided reads, "
        "coalesced writes), the shared-tile and padded-tile transposes; GB/s counts bytes "
        "read plus bytes written.",
        {
            "kernel": "",
            "label": "",
            "n": "",
            "median_ms": "ms",
            "spread": "",
            "gbps": "GB/s",
            "speedup_vs_shared": "x",
        },
        rows,
        method=METHOD,
        kernels={k: KERNELS[k].source() for k in LADDER},
    )
