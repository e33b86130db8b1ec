"""``matmul.json``: every matrix multiply of the course on the same inputs, and cuBLAS
(called as chapter 6 calls it: :class:`tilelab.experiments.cublas.Cublas`, through ctypes
on PyCUDA's buffers, timed interleaved with the kernels, its medians held against
``cublas_check.json`` of the same run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.catalog.problems import MATMUL
from tilelab.catalog.reference import KERNELS
from tilelab.device.bench import prepared_launch, time_interleaved
from tilelab.device.runtime import Runtime
from tilelab.experiments import cublas_check
from tilelab.experiments.cublas import Cublas, package_version, relative_error
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, compile_kernel

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
        inputs = MATMUL.make_inputs(shape, rng)
        keep: list = []
        runs = {k: prepared_launch(rt, compile_kernel(rt, k), MATMUL, KERNELS[k].launch, shape,
                                   inputs, keep) for k in LADDER}
        blas = Cublas()
        a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
        c = rt.mem_alloc(n * n * 4)
        runs["cublas"] = lambda blas=blas, a=a, b=b, c=c, n=n: blas.sgemm(a, b, c, n, n, n)
        t = time_interleaved(runs)
        blas_error = relative_error(rt.from_device(c, (n, n), np.float32),
                                    MATMUL.reference(inputs))
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
        ms = t["cublas"].median_ms
        rows.append({
            "kernel": "cublas",
            "label": "cuBLAS SGEMM through ctypes (CUBLAS_DEFAULT_MATH: "
                     f"FP32, TF32 off; nvidia-cublas {package_version()})",
            "n": n,
            "median_ms": ms,
            "spread": t["cublas"].spread,
            "gflops": flops / ms / 1e6,
            "speedup_vs_naive": t["naive"].median_ms / ms,
            "intensity": None,
            "rel_error": blas_error,
        })
        blas.close()
    try:
        checked, refused = cublas_check.verify(out, {r["n"]: r["median_ms"] for r in rows
                                                     if r["kernel"] == "cublas"}, "matmul"), None
    except cublas_check.CrossCheckFailed as exc:  # the rows are kept, under another name
        checked, refused = {}, str(exc)
    for r in rows:
        if r["kernel"] == "cublas":
            r.update(checked.get(r["n"], {}))
    path = write(
        out,
        "matmul" if refused is None else "matmul.rejected",
        "Matrix multiply, FP32, square N",
        "Each kernel of the course and cuBLAS on the same inputs, timed interleaved. cuBLAS "
        "is called as in sgemm.json: cublasSgemm of the nvidia-cublas wheel through ctypes "
        "on PyCUDA's buffers, math mode CUBLAS_DEFAULT_MATH (FP32, TF32 off); rel_error is "
        "its Frobenius-norm error against float64; its medians were held against "
        "cublas_check.json of the same run (check_*: that file's cross-checked median, "
        "Nsight Compute's duration and the second binding's median).",
        {
            "kernel": "",
            "label": "",
            "n": "",
            "median_ms": "ms",
            "spread": "",
            "gflops": "GFLOP/s",
            "speedup_vs_naive": "x",
            "intensity": "FLOP/byte",
            "rel_error": "",
            "check_event_ms": "ms",
            "ncu_ms": "ms",
            "second_ms": "ms",
            "check_disagreement": "",
        },
        rows,
        method=METHOD,
        kernels={k: KERNELS[k].source() for k in LADDER},
    )
    if refused is not None:
        raise cublas_check.CrossCheckFailed(f"{refused} (the rows: {path})")
    return path
