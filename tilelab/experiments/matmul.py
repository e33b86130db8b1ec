"""``matmul.json``: every matrix multiply of the course on the same inputs, and cuBLAS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog.problems import MATMUL
from tilelab.catalog.reference import KERNELS
from tilelab.device.bench import REPEAT, WARMUP
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, time_ladder

#: The course's matmul ladder, in the order the book climbs it.
LADDER = [
    "naive",
    "naive_xrow",
    "tiled16",
    "tiled32",
    "tiled32_padded",
    "tiled32_at",
    "tiled32_at_padded",
]


def run(rt: Runtime, out: Path, sizes: tuple[int, ...] = (1024, 2048, 4096)) -> Path:
    rng = np.random.default_rng()
    rows = []
    for n in sizes:
        shape = (n, n, n)
        t = time_ladder(rt, LADDER, shape, rng)
        flops, traffic = MATMUL.flops(shape), MATMUL.bytes_moved(shape)
        for k in LADDER:
            ms = t[k].median_ms
            rows.append(
                {
                    "kernel": k,
                    "label": KERNELS[k].label,
                    "n": n,
                    "median_ms": ms,
                    "spread": t[k].spread,
                    "gflops": flops / ms / 1e6,
                    "speedup_vs_naive": t["naive"].median_ms / ms,
                    "intensity": flops / traffic,
                }
            )
        rows.extend(_cublas_row(n, flops, t["naive"].median_ms))
    return write(
        out,
        "matmul",
        "Matrix multiply, FP32, square N",
        "Each kernel of the course on the same inputs, timed interleaved.",
        {
            "kernel": "",
            "label": "",
            "n": "",
            "median_ms": "ms",
            "spread": "",
            "gflops": "GFLOP/s",
            "speedup_vs_naive": "x",
            "intensity": "FLOP/byte",
        },
        rows,
        method=METHOD,
    )


def _cublas_row(n: int, flops: float, naive_ms: float) -> list[dict[str, Any]]:
    """cuBLAS SGEMM through CuPy with TF32 off, where CuPy is installed."""
    try:
        import cupy as cp
        from cupyx.profiler import benchmark
    except ImportError:
        return []
    import os

    os.environ["CUPY_TF32"] = "0"
    a = cp.random.uniform(-1, 1, (n, n), dtype=cp.float32)
    b = cp.random.uniform(-1, 1, (n, n), dtype=cp.float32)
    res = benchmark(cp.matmul, (a, b), n_warmup=WARMUP, n_repeat=REPEAT)
    ms = float(np.median(res.gpu_times)) * 1e3
    return [
        {
            "kernel": "cublas",
            "label": "cuBLAS SGEMM via CuPy (TF32 off)",
            "n": n,
            "median_ms": ms,
            "spread": None,
            "gflops": flops / ms / 1e6,
            "speedup_vs_naive": naive_ms / ms,
            "intensity": None,
        }
    ]
