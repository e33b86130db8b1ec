"""``device.json``: the GPU the measurements ran on, with a measured copy and FMA peak."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog.reference import kernel_file
from tilelab.catalog.road import FP32_LANES_PER_SM, fp32_peak_tflops
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, time_ladder

COPY_N = 8192


def fma_peak_gflops(rt: Runtime, sm_count: int) -> float:
    """A measured chain of FMAs (8 independent per thread), in GFLOP/s."""
    fma = rt.SourceModule(kernel_file("fma_peak.cu")).get_function("fma_peak")
    blocks, iters = sm_count * 16, 1 << 14
    buf = rt.mem_alloc(4 * blocks * 256)

    def launch() -> None:
        fma(buf, np.float32(0.999), np.float32(0.001), np.int32(iters),
            block=(256, 1, 1), grid=(blocks, 1))

    t = time_interleaved({"fma": launch}, flush=False)["fma"]
    return 2.0 * 8 * iters * blocks * 256 / t.median_ms / 1e6


def describe(dev: Any, a: dict[str, Any], copy_ms: float, fma_gflops: float) -> dict[str, Any]:
    """The data file's one row from the driver's attributes ``a`` and the two measurements."""
    mem_mhz, bus = a["MEMORY_CLOCK_RATE"] / 1000, a["GLOBAL_MEMORY_BUS_WIDTH"]
    return {
        "name": dev.name(),
        "compute_capability": "{}.{}".format(*dev.compute_capability()),
        "sm_count": a["MULTIPROCESSOR_COUNT"],
        "max_threads_per_block": a["MAX_THREADS_PER_BLOCK"],
        "max_threads_per_sm": a["MAX_THREADS_PER_MULTIPROCESSOR"],
        "warp_size": a["WARP_SIZE"],
        "regs_per_sm": a["MAX_REGISTERS_PER_MULTIPROCESSOR"],
        "shared_per_block_bytes": a["MAX_SHARED_MEMORY_PER_BLOCK"],
        "shared_per_block_optin_bytes": a.get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "shared_per_sm_bytes": a["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"],
        "l2_bytes": a["L2_CACHE_SIZE"],
        "clock_mhz": a["CLOCK_RATE"] / 1000,
        "mem_clock_mhz": mem_mhz,
        "mem_bus_bits": bus,
        "total_mem_bytes": dev.total_memory(),
        "peak_bw_gbps": 2 * mem_mhz * 1e6 * bus / 8 / 1e9,
        "copy_gbps": 8.0 * COPY_N * COPY_N / copy_ms / 1e6,
        "fp32_peak_gflops": fma_gflops,
        # the FP32 peak: SMs x FP32 lanes x 2 FLOP per FMA x the clock the driver reports
        "fp32_theoretical_gflops": fp32_peak_tflops(
            a["MULTIPROCESSOR_COUNT"], a["CLOCK_RATE"], dev.compute_capability()) * 1e3,
        "max_resident_threads": a["MULTIPROCESSOR_COUNT"] * a["MAX_THREADS_PER_MULTIPROCESSOR"],
        "fp32_lanes": a["MULTIPROCESSOR_COUNT"] * FP32_LANES_PER_SM[dev.compute_capability()],
    }


def run(rt: Runtime, out: Path) -> Path:
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    a = {str(k): v for k, v in dev.get_attributes().items()}
    rng = np.random.default_rng()
    copy_ms = time_ladder(rt, ["copy"], (COPY_N, COPY_N), rng)["copy"].median_ms
    row = describe(dev, a, copy_ms, fma_peak_gflops(rt, a["MULTIPROCESSOR_COUNT"]))
    return write(
        out,
        "device",
        "The GPU these measurements ran on",
        "Attributes reported by the driver; copy_gbps is a measured device copy "
        "(bytes read + written, 8192 x 8192 floats); fp32_peak_gflops a measured chain "
        "of FMAs (8 independent per thread). peak_bw_gbps is 2 x memory clock x bus "
        "width as the driver reports them (HBM parts may report clocks that make this "
        "an underestimate or overestimate; the measured copy is the ceiling we use).",
        {
            "name": "",
            "sm_count": "",
            "copy_gbps": "GB/s",
            "fp32_peak_gflops": "GFLOP/s",
            "peak_bw_gbps": "GB/s",
            "l2_bytes": "B",
            "shared_per_sm_bytes": "B",
        },
        [row],
        method=METHOD,
        kernels={"file:fma_peak.cu": kernel_file("fma_peak.cu")},
    )
