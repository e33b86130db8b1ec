"""``divergence.json``: a warp that splits over branches runs the paths one after the other."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.microbench import NO_FLUSH, device_attr


def run(rt: Runtime, out: Path, iters: int = 4096) -> Path:
    """Time against the number of distinct paths, split within warps or between them."""
    fn = rt.SourceModule(kernel_file("divergence.cu")).get_function("divergence")
    sm = device_attr("MULTIPROCESSOR_COUNT")
    blocks, threads = sm * 8, 256
    buf = rt.mem_alloc(4 * blocks * threads)
    runs = {}
    for paths in (1, 2, 4, 8, 16, 32):
        for by_lane in (1, 0):
            runs[f"{paths}:{by_lane}"] = (
                lambda p=paths, b=by_lane: fn(buf, np.int32(p), np.int32(b), np.int32(iters),
                                              block=(threads, 1, 1), grid=(blocks, 1))
            )
    t = time_interleaved(runs, flush=False)
    base = t["1:1"].median_ms
    rows = []
    for key, tk in t.items():
        paths, by_lane = map(int, key.split(":"))
        rows.append({
            "paths": paths,
            "split": "within each warp (by lane)" if by_lane else "between warps (by warp)",
            "by_lane": bool(by_lane),
            "median_ms": tk.median_ms,
            "spread": tk.spread,
            "slowdown": tk.median_ms / base,
        })
    return write(
        out, "divergence", "Warp divergence: the same work on 1 to 32 code paths",
        f"{blocks} blocks of {threads} threads; every thread runs {iters} dependent FMAs on "
        "one of `paths` branches, chosen by its lane (the warp splits) or by its warp "
        "(each warp stays together). slowdown is against one path.",
        {"paths": "", "split": "", "median_ms": "ms", "spread": "", "slowdown": "x"},
        rows, method=NO_FLUSH,
        kernels={"file:divergence.cu": kernel_file("divergence.cu")},
    )
