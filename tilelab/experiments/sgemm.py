"""``sgemm.json``: the road to cuBLAS on a GPU. Every step of chapter 6, the tuned
configurations of its last steps, the ablations that change one thing of a step, step 9's
choice per shape, and cuBLAS, checked against float64 and timed interleaved at every size
of the sweep (the kernels, the ablation pairs and the choice: :mod:`tilelab.catalog.road`;
the run: :mod:`tilelab.experiments.road`)."""

from __future__ import annotations

from pathlib import Path

from tilelab.catalog.road import RATE_N
from tilelab.device.bench import REPEAT
from tilelab.device.runtime import Runtime
from tilelab.experiments import road
from tilelab.experiments.cublas_check import TOLERANCE, CrossCheckFailed
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD

COLUMNS = {
    "kernel": "", "step": "", "label": "", "n": "", "median_ms": "ms", "spread": "",
    "tflops": "TFLOP/s", "pct_cublas": "%", "pct_peak": "%", "peak_tflops": "TFLOP/s",
    "rel_error": "", "bitwise_cublas": "", "registers": "", "tiles": "", "blocks_per_sm": "",
    "waves": "", "best_config": "", "chosen": "", "predicted_ms": "ms", "predicted_ratio": "",
    "submit_max_ms": "ms", "redone": "", "check_event_ms": "ms", "check_disagreement": "",
    "ncu_ms": "ms", "second_ms": "ms", "sm_busy": "", "ncu_kernel": "",
}


def run(rt: Runtime, out: Path) -> Path:
    """The road to cuBLAS: every step, configuration and ablation, and cuBLAS, interleaved."""
    res = road.run_gpu(rt, out)
    peak = res["peak"]
    sizes = sorted({r["n"] for r in res["rows"]})
    columns = {**COLUMNS, **{k: "" for r in res["rows"] for k in r if k not in COLUMNS}}
    path = write(
        out,
        "sgemm" if not res["refused"] else "sgemm.rejected",
        "SGEMM from the naive kernel to cuBLAS, FP32, square N",
        "Each step of the road to cuBLAS, the tuned configurations of its last steps, the "
        "ablations (road.ABLATIONS) and "
        f"cuBLAS ({res['cublas']['library']}, nvidia-cublas {res['cublas']['package']}, "
        "called through ctypes on PyCUDA's buffers, math mode CUBLAS_DEFAULT_MATH) on the "
        f"same inputs, timed interleaved at N = {', '.join(map(str, sizes))} (every kernel "
        f"at {', '.join(map(str, road.FULL_SIZES))}; the ladder, step 9's candidates and a "
        "few shapes at the others). rel_error is the Frobenius-norm error against float64 "
        "(TF32 would fail tilelab.experiments.cublas.FP32_TOLERANCE); bitwise_cublas: the "
        "output equals cuBLAS's bit for bit. Step 9 (chosen) takes, at each N, the "
        "candidate its wave model (road.predicted_ms) predicts fastest from the candidates' "
        f"speeds at N = {RATE_N} in this run. cuBLAS's medians were held against "
        f"cublas_check.json (within {TOLERANCE:.0%}); ncu_* columns: Nsight Compute's "
        "figures of step 9's choice and of cuBLAS at each N (sm_busy: SM active cycles "
        "over the longest SM's elapsed cycles). The FP32 peak is "
        f"{peak['sm_count']} SMs x {peak['fp32_lanes_per_sm']} FP32 lanes x 2 FLOP x "
        f"{peak['clock_khz'] / 1e3:.0f} MHz, from the device's attributes.",
        columns,
        res["rows"],
        method=METHOD.replace(f"median of {REPEAT}", f"median of {road.REPEAT} "
                              f"({road.REPEAT_LARGE} at N > 4096)"),
        kernels=res["kernels"],
    )
    if res["refused"]:
        raise CrossCheckFailed(f"{res['refused']} (the rows: {path})")
    if res["wrong"]:
        raise RuntimeError(f"{path} was written without the kernels that failed their "
                           "checks:\n" + "\n".join(res["wrong"]))
    return path
