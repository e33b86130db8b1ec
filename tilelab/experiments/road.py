"""The road to cuBLAS measured (its kernels and configurations: :mod:`tilelab.catalog.road`).

``sgemm`` (GPU): checks every step against float64 at odd small shapes, times the ladder,
the configurations, the ablations and cuBLAS interleaved in one process at N = 1024, 2048
and 4096, and the ladder, step 9's candidates and cuBLAS at every size of the sweep
(3072, 4000, 4095, 6144, 8192 too); step 9 chooses its configuration per size from the
candidates' speeds at N = 4096; every output is checked against float64 and bit for bit
against cuBLAS's; cuBLAS's medians are held against ``cublas_check.json``; Nsight Compute
counts step 9's choice and cuBLAS at every size. ``sgemm_ptxas`` (no GPU): compiles every
step for sm_90 with ``nvcc --resource-usage`` and writes registers, shared memory, spills,
blocks per SM and occupancy from the limits in ``device.json``, with the traffic model of
each step (global bytes per FMA, shared operands per FMA, FMAs per shared load).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog.problems import MATMUL
from tilelab.catalog.reference import KernelRef
from tilelab.catalog.road import (
    CANDIDATES,
    FP32_LANES_PER_SM,
    LADDER,
    RATE_N,
    SMALL_SHAPES,
    blocks_per_sm,
    choose,
    fp32_peak_tflops,
    kernel_refs,
    predicted_ms,
    step_of,
    traffic,
)
from tilelab.device.bench import WARMUP, time_interleaved
from tilelab.device.runtime import get_runtime
from tilelab.experiments import compile_cache, counters, cublas_check
from tilelab.experiments.cublas import Cublas, library_path, package_version, relative_error
from tilelab.experiments.cublas_check import SIZES
from tilelab.experiments.sass import OPCODE, sass_of
from tilelab.grading.correctness import check_function

REPEAT = 50  # timed runs per kernel and size: more than the book's other tables, the
# gaps between the last steps are a few percent

# ---------------------------------------------------------------- ptxas, no GPU


_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_report(source: str, arch: str = "sm_90", options: tuple[str, ...] = ()
                 ) -> dict[str, int]:
    """Registers, static shared memory and spills as ``nvcc --resource-usage`` reports
    (``options``: more nvcc options, e.g. ``-maxrregcount=N``)."""
    if not shutil.which("nvcc"):
        raise RuntimeError("the sgemm_ptxas experiment needs nvcc on PATH (no GPU needed)")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp, "k.cu")
        cu.write_text('extern "C" {\n' + source + "\n}\n", encoding="utf-8")
        res = subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "--resource-usage", *options, "-o",
             str(Path(tmp, "k.cubin")), str(cu)],
            capture_output=True, text=True, check=True,
        )
    text = res.stdout + res.stderr
    used, smem, spill = _USED.search(text), _SMEM.search(text), _SPILL.search(text)
    return {
        "registers": int(used.group(1)) if used else 0,
        "shared_bytes": int(smem.group(1)) if smem else 0,
        "spill_bytes": int(spill.group(1)) + int(spill.group(2)) if spill else 0,
    }


def sass_counts(source: str, arch: str = "sm_90") -> dict[str, Any]:
    """Shared loads by width and FFMAs in the compiled kernel, where cuobjdump is installed
    (the CUDA toolkit's; None otherwise): the FMAs per shared-load instruction, as built."""
    if not shutil.which("cuobjdump"):
        return {"lds": None, "lds_128": None, "ffma": None, "ffma_per_lds": None}
    ops = OPCODE.findall(sass_of(source, arch))
    lds = [o for o in ops if o.startswith("LDS")]
    ffma = sum(o.startswith("FFMA") for o in ops)
    return {
        "lds": len(lds),
        "lds_128": sum(o.startswith("LDS.128") for o in lds),
        "ffma": ffma,
        "ffma_per_lds": ffma / len(lds) if lds else None,
    }


def device_limits(data_dir: Path) -> tuple[dict[str, Any], str]:
    """The SM limits recorded in ``device.json`` (measured on the course's GPU) and its GPU."""
    path = Path(data_dir) / "device.json"
    try:
        row = json.loads(path.read_text(encoding="utf-8"))["rows"][0]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise RuntimeError(
            f"sgemm_ptxas reads the GPU's limits from {path} ({exc!r}); "
            "run `tilelab bench device` on the GPU first"
        ) from None
    return row, str(row.get("name"))


def ptxas_rows(data_dir: Path) -> tuple[list[dict[str, Any]], str]:
    """One row per kernel: resources from ptxas, occupancy on the recorded GPU, traffic."""
    limits, gpu = device_limits(data_dir)
    refs = kernel_refs()
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # nvcc and cuobjdump: processes
        reports = dict(zip(refs, pool.map(
            lambda ref: {**ptxas_report(ref.source()), **sass_counts(ref.source())},
            refs.values()), strict=True))
    rows = []
    for key, ref in refs.items():
        rep: dict[str, Any] = reports[key]
        threads = int(np.prod(ref.launch.block))
        blocks = blocks_per_sm(threads, rep["registers"], rep["shared_bytes"], limits)
        t = traffic(key)
        rows.append(
            {
                "kernel": key,
                "step": step_of(key),
                "label": ref.label,
                "threads_per_block": threads,
                **rep,
                "blocks_per_sm": blocks,
                "warps_per_sm": blocks * math.ceil(threads / 32),
                "occupancy": blocks * threads / limits["max_threads_per_sm"],
                "global_bytes_per_fma": t.global_bytes_per_fma,
                "shared_operands_per_fma": t.shared_operands_per_fma,
                "fma_per_shared_load": t.fma_per_shared_load,
            }
        )
    return rows, gpu


# ---------------------------------------------------------------- the GPU run

#: every size the road is timed at (chapter 6's sweep: powers of two and shapes that are
#: not multiples of any tile), and those at which every configuration and ablation is
FULL_SIZES = (1024, 2048, 4096)
#: the kernels timed at every size of the sweep, beside cuBLAS: the ladder, step 9's
#: candidates and the rule it changes, and two shapes of earlier steps that suit small N
SWEEP = (*LADDER, *CANDIDATES, "shapes_aligned", "dbuf_64x128x16", "ahead_256x128x8")
#: the slow first steps are left out above this size (seconds per launch at 8192)
SLOW = ("naive", "tiled32")
REPEAT_LARGE = 20  # timed runs per kernel at N > 4096 (9 to 25 ms a launch)
#: Nsight Compute's figures of step 9's choice and of cuBLAS at every size (why a size
#: falls short: waves, idle SMs, issue rate, stalls)
SIZE_METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_active.avg",
    "sm__cycles_elapsed.max",
    "launch__grid_size",
    "launch__waves_per_multiprocessor",
    "launch__occupancy_limit_registers",
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"
      for s in ("barrier", "short_scoreboard", "long_scoreboard", "wait", "dispatch_stall")),
)


def kernels_at(n: int, refs: dict[str, KernelRef]) -> dict[str, KernelRef]:
    """The kernels timed at N: all of them at :data:`FULL_SIZES`, else :data:`SWEEP`
    (without :data:`SLOW` above 4096)."""
    if n in FULL_SIZES:
        return refs
    return {k: refs[k] for k in SWEEP if not (n > 4096 and k in SLOW)}


def _check_small(rt, refs: dict[str, KernelRef]) -> list[str]:
    """Every kernel at the small shapes (non-multiples, rectangular, 1x1x1); failures."""
    rng = np.random.default_rng()
    bad = []
    for key, ref in refs.items():
        fn = rt.SourceModule(ref.source()).get_function(ref.name)
        for shape in SMALL_SHAPES:
            r = check_function(rt, fn, MATMUL, ref.launch, shape, rng)
            if not r.ok:
                bad.append(f"{key} {shape}: {r.message}")
    return bad


def _limits() -> dict[str, int]:
    import pycuda.driver as cuda

    dev, attr = cuda.Context.get_device(), cuda.device_attribute
    return {"max_threads_per_sm": dev.get_attribute(attr.MAX_THREADS_PER_MULTIPROCESSOR),
            "regs_per_sm": dev.get_attribute(attr.MAX_REGISTERS_PER_MULTIPROCESSOR),
            "shared_per_sm_bytes": dev.get_attribute(
                attr.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            "sm_count": dev.get_attribute(attr.MULTIPROCESSOR_COUNT)}


def measure(rt, n: int, refs: dict[str, KernelRef], repeat: int = REPEAT) -> list[dict[str, Any]]:
    """Time every kernel and cuBLAS at N x N x N on one set of inputs, interleaved; each
    output checked against float64 and compared bit for bit with cuBLAS's."""
    import pycuda.driver as cuda

    rng = np.random.default_rng()
    inputs = MATMUL.make_inputs((n, n, n), rng)
    a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
    blas = Cublas()
    outs: dict[str, Any] = {}
    runs = {}
    info: dict[str, dict[str, Any]] = {}
    sizes = {"M": n, "N": n, "K": n}
    limits = _limits()
    for key, ref in refs.items():
        fn = rt.SourceModule(ref.source()).get_function(ref.name)
        c = outs[key] = rt.mem_alloc(n * n * 4)
        grid = ref.launch.grid(sizes)
        threads = int(np.prod(ref.launch.block))
        per_sm = blocks_per_sm(threads, fn.num_regs, fn.shared_size_bytes, limits)
        tiles = grid[0] * grid[1]
        waves = tiles / max(per_sm * limits["sm_count"], 1)
        info[key] = {"registers": fn.num_regs, "tiles": tiles, "blocks_per_sm": per_sm,
                     "waves": waves, "full_waves": math.ceil(waves)}
        runs[key] = (lambda fn=fn, c=c, ref=ref, grid=grid: fn(
            a, b, c, np.int32(n), np.int32(n), np.int32(n), block=ref.launch.block, grid=grid))
    c_blas = outs["cublas"] = rt.mem_alloc(n * n * 4)
    runs["cublas"] = lambda: blas.sgemm(a, b, c_blas, n, n, n)
    for c in outs.values():  # poison: NaN everywhere before the first run
        cuda.memset_d32(c, 0x7FC00000, n * n)
    t = time_interleaved(runs, warmup=WARMUP, repeat=repeat)
    expected = MATMUL.reference(inputs)
    theirs = rt.from_device(c_blas, (n, n), np.float32)
    flops = MATMUL.flops((n, n, n))
    rows = []
    for key, tm in t.items():
        got = theirs if key == "cublas" else rt.from_device(outs[key], (n, n), np.float32)
        ref = refs.get(key)
        rows.append(
            {
                "kernel": key,
                "step": step_of(key),
                "label": ref.label if ref else "cuBLAS SGEMM, FP32 (CUBLAS_DEFAULT_MATH, TF32 off)",
                "n": n,
                "median_ms": tm.median_ms,
                "spread": tm.spread,
                "tflops": flops / tm.median_ms / 1e9,
                "rel_error": relative_error(got, expected),
                "bitwise_cublas": bool(np.array_equal(got.view(np.uint32),
                                                      theirs.view(np.uint32))),
                "submit_max_ms": max(tm.submitted_ms),
                "redone": tm.redone,
                **info.get(key, {}),
            }
        )
        del got
    blas_row = next(r for r in rows if r["kernel"] == "cublas")
    blas_row["cublas_version"] = blas.version
    blas.close()
    return rows


def size_child(cases: list[tuple[str, int]]) -> None:
    """Under ncu: one launch of each (kernel, N) case (``cublas``: one cuBLAS call)."""
    rt = get_runtime("gpu")
    refs = kernel_refs()
    for key, n in cases:
        inputs = MATMUL.make_inputs((n, n, n), np.random.default_rng(n))
        a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
        c = rt.mem_alloc(n * n * 4)
        if key == "cublas":
            blas = Cublas()
            blas.sgemm(a, b, c, n, n, n)
            rt.synchronize()
            blas.close()
            continue
        ref = refs[key]
        fn = rt.SourceModule(ref.source()).get_function(ref.name)
        fn(a, b, c, np.int32(n), np.int32(n), np.int32(n), block=ref.launch.block,
           grid=ref.launch.grid({"M": n, "N": n, "K": n}))
        rt.synchronize()


def size_counters(cases: list[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Nsight Compute's :data:`SIZE_METRICS` for each (kernel, N) case, by case (a cuBLAS
    call's kernels: its longest one's figures, their durations summed)."""
    launches, names = counters.profile(
        ["tilelab.experiments.road", "size-child", *(f"{k}:{n}" for k, n in cases)],
        list(SIZE_METRICS), None)
    refs = kernel_refs()
    out: dict[tuple[str, int], dict[str, Any]] = {}
    i = 0
    for key, n in cases:
        if key == "cublas":  # every launch up to the next course kernel's (or the end)
            group = []
            while i < len(launches) and not any(
                    refs[k].name in names[i] for k, _ in cases if k != "cublas"):
                group.append(i)
                i += 1
        else:
            group, i = [i], i + 1
        if not group:
            raise RuntimeError(f"no ncu launch for {key} at N = {n}: {names}")
        longest = max(group, key=lambda j: launches[j]["gpu__time_duration_sum"])
        figures = dict(launches[longest])
        figures["gpu__time_duration_sum"] = sum(launches[j]["gpu__time_duration_sum"]
                                                for j in group)
        figures["ncu_kernel"] = names[longest]
        out[(key, n)] = figures
    return out


def ncu_columns(figures: dict[str, Any]) -> dict[str, Any]:
    """The size counters as the data file's columns."""
    cols = {f"ncu_{k}": v for k, v in figures.items() if k != "ncu_kernel"}
    elapsed = figures.get("sm__cycles_elapsed_max")
    if elapsed:
        cols["sm_busy"] = figures.get("sm__cycles_active_avg", 0.0) / elapsed
    cols["ncu_ms"] = figures.get("gpu__time_duration_sum", 0.0) / 1e6
    cols["ncu_kernel"] = figures.get("ncu_kernel", "")
    return cols


def run_gpu(rt, out: Path, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Check, time and compare everything; the rows and what the run learned."""
    import pycuda.driver as cuda

    refs = kernel_refs()
    compile_cache.warm([ref.source() for ref in refs.values()])
    bad = _check_small(rt, refs)
    wrong = sorted({b.split(" ", 1)[0] for b in bad})
    if set(CANDIDATES) & set(wrong):  # step 9 cannot choose among wrong kernels
        raise RuntimeError("kernels failed their checks:\n" + "\n".join(bad))
    refs = {k: r for k, r in refs.items() if k not in wrong}  # never timed; named at the end
    dev = cuda.Context.get_device()
    attr = cuda.device_attribute
    cc = dev.compute_capability()
    sm_count = dev.get_attribute(attr.MULTIPROCESSOR_COUNT)
    peak = fp32_peak_tflops(sm_count, dev.get_attribute(attr.CLOCK_RATE), cc)
    first = RATE_N if RATE_N in sizes else sizes[0]  # step 9's rates are measured here
    order = [first, *(n for n in sizes if n != first)]
    rows = []
    for n in order:
        rows.extend(measure(rt, n, kernels_at(n, refs), REPEAT if n <= 4096 else REPEAT_LARGE))
    rates = {r["kernel"]: r["tflops"] for r in rows
             if r["n"] == first and r["kernel"] in CANDIDATES}
    chosen = {n: choose(n, n, n, sm_count, rates) for n in sizes}
    for n in sizes:
        at_n = [r for r in rows if r["n"] == n]
        blas = next(r for r in at_n if r["kernel"] == "cublas")
        blas["kernels_timed"] = len(at_n) - 1
        blas["bitwise_kernels"] = sum(bool(r["bitwise_cublas"]) for r in at_n
                                      if r["kernel"] != "cublas")
        best = max((r for r in at_n if r["kernel"] != "cublas"), key=lambda r: r["tflops"])
        for r in at_n:
            r["pct_cublas"] = 100.0 * r["tflops"] / blas["tflops"]
            r["pct_peak"] = 100.0 * r["tflops"] / peak
            r["peak_tflops"] = peak
            r["best_config"] = r["kernel"] == best["kernel"]
            r["chosen"] = r["kernel"] == chosen[n]
            if r["kernel"] in CANDIDATES:
                r["predicted_ms"] = predicted_ms(r["kernel"], n, n, n, sm_count,
                                                 rates[r["kernel"]])
                r["predicted_ratio"] = r["predicted_ms"] / r["median_ms"]
    try:
        checked, refused = cublas_check.verify(out, {r["n"]: r["median_ms"] for r in rows
                                                     if r["kernel"] == "cublas"}, "sgemm"), None
    except cublas_check.CrossCheckFailed as exc:  # the rows are kept, under another name
        checked, refused = {}, str(exc)
    try:
        counted = size_counters([c for n in sizes for c in ((chosen[n], n), ("cublas", n))])
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:  # the times stand
        print(f"sgemm: Nsight Compute could not count the sizes: {exc}", file=sys.stderr)
        counted = {}
    for r in rows:
        if r["kernel"] == "cublas":
            r.update(checked.get(r["n"], {}))
        if (r["kernel"], r["n"]) in counted:
            r.update(ncu_columns(counted[(r["kernel"], r["n"])]))
    return {
        "rows": rows,
        "peak": {
            "sm_count": sm_count,
            "clock_khz": dev.get_attribute(attr.CLOCK_RATE),
            "fp32_lanes_per_sm": FP32_LANES_PER_SM[cc],
            "peak_tflops": peak,
        },
        "rates": rates,
        "refused": refused,
        "wrong": bad,
        "cublas": {"library": Path(library_path()).name, "package": package_version()},
        "kernels": {k: ref.source() for k, ref in refs.items()},
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["size-child"]:
        size_child([(a.rpartition(":")[0], int(a.rpartition(":")[2])) for a in sys.argv[2:]])
    else:
        print(f"usage: python -m {__name__} size-child KERNEL:N...", file=sys.stderr)
        sys.exit(2)
