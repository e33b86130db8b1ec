"""``latency.json``: DRAM latency, and read bandwidth against the bytes in flight."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.microbench import device_attr


def run(rt: Runtime, out: Path) -> Path:
    """DRAM latency by a pointer chase, then read bandwidth against bytes in flight."""
    mod = rt.SourceModule(kernel_file("latency.cu"))
    chase, stream = mod.get_function("chase"), mod.get_function("stream")
    sm = device_attr("MULTIPROCESSOR_COUNT")
    rng = np.random.default_rng()
    n = 1 << 26  # 256 MiB of int32: far beyond L2, and every step lands on a new line
    perm = rng.permutation(n // 32).astype(np.int64) * 32
    nxt = np.empty(n, np.int32)
    nxt[perm] = np.roll(perm, -1)
    d_next, d_out = rt.to_device(nxt), rt.mem_alloc(4)
    steps = 1 << 15
    t_chase = time_interleaved(
        {"chase": lambda: chase(d_next, np.int32(steps), d_out, block=(1, 1, 1), grid=(1, 1))},
        warmup=1, repeat=5,
    )["chase"]
    latency_ns = t_chase.median_ms * 1e6 / steps
    rows = [{"kind": "latency", "threads_per_sm": 1, "latency_ns": latency_ns,
             "median_ms": t_chase.median_ms, "spread": t_chase.spread}]
    per_thread, most = 64, 8  # float4 loads per thread; the most 256-thread blocks per SM
    d_in = rt.mem_alloc(16 * per_thread * most * 256 * sm)
    runs = {}
    for blocks_per_sm in (1, 2, 4, most):  # 256 threads each: 256 to 2048 threads per SM
        blocks = sm * blocks_per_sm
        d_o = rt.mem_alloc(4 * blocks * 256)
        runs[str(blocks_per_sm)] = (
            lambda b=blocks, o=d_o: stream(d_in, o, np.int32(per_thread), block=(256, 1, 1),
                                           grid=(b, 1))
        )
    t = time_interleaved(runs)
    for key, tk in t.items():
        threads = int(key) * 256
        nbytes = 16 * per_thread * threads * sm
        gbps = nbytes / tk.median_ms / 1e6
        rows.append({
            "kind": "stream",
            "threads_per_sm": threads,
            "bytes_in_flight_per_sm": 16 * threads,  # one float4 load per thread outstanding
            "gbps": gbps,
            "median_ms": tk.median_ms,
            "spread": tk.spread,
        })
    return write(
        out, "latency", "Memory latency, and the bytes in flight that hide it",
        f"latency: one thread follows a random chain through {n * 4 >> 20} MiB "
        f"({steps} dependent loads, one per 128-byte line). stream: 256-thread blocks, "
        f"1 to 8 per SM, each thread reading {per_thread} float4 values, at least one "
        "16-byte load outstanding per thread; GB/s counts bytes read.",
        {"kind": "", "threads_per_sm": "", "latency_ns": "ns",
         "bytes_in_flight_per_sm": "B", "gbps": "GB/s", "median_ms": "ms"},
        rows,
        method="CUDA events; median of 5 chases after one warm-up; streams: median of 20, "
        "L2 flushed before every timed launch",
        kernels={"file:latency.cu": kernel_file("latency.cu")},
    )
