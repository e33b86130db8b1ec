"""``sgemm.json``: the road to cuBLAS on a GPU. Every step of chapter 6, the tuned
configurations of its last steps, the ablations that change one thing of a step, and
cuBLAS, checked against float64 and timed interleaved at N = 1024, 2048, 4096 (the kernels,
the ablation pairs and the cuBLAS call: :mod:`tilelab.experiments.road`)."""

from __future__ import annotations

from pathlib import Path

from tilelab.device.bench import REPEAT
from tilelab.device.runtime import Runtime
from tilelab.experiments import road
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD


def run(rt: Runtime, out: Path) -> Path:
    """The road to cuBLAS: every step, configuration and ablation, and cuBLAS, interleaved."""
    res = road.run_gpu(rt)
    peak = res["peak"]
    return write(
        out,
        "sgemm",
        "SGEMM from the naive kernel to cuBLAS, FP32, square N",
        "Each step of the road to cuBLAS, the tuned configurations of its last steps, the "
        "ablations (road.ABLATIONS: pairs that differ in one thing) and "
        f"cuBLAS ({res['cublas']['library']}, nvidia-cublas {res['cublas']['package']}, "
        "called through ctypes on PyCUDA's buffers, math mode CUBLAS_DEFAULT_MATH) on the "
        "same inputs, timed interleaved. rel_error is the Frobenius-norm error against "
        "float64; TF32 (10 mantissa bits instead of 23) would fail "
        "tilelab.experiments.cublas.FP32_TOLERANCE. The FP32 peak is "
        f"{peak['sm_count']} SMs x {peak['fp32_lanes_per_sm']} FP32 lanes x 2 FLOP x "
        f"{peak['clock_khz'] / 1e3:.0f} MHz, from the device's attributes.",
        {
            "kernel": "",
            "step": "",
            "label": "",
            "n": "",
            "median_ms": "ms",
            "spread": "",
            "tflops": "TFLOP/s",
            "pct_cublas": "%",
            "pct_peak": "%",
            "peak_tflops": "TFLOP/s",
            "rel_error": "",
            "registers": "",
            "best_config": "",
        },
        res["rows"],
        method=METHOD.replace(f"median of {REPEAT}", f"median of {road.REPEAT}"),
    )
