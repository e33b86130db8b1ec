"""The measurements behind the book: each experiment writes one data file.

``tilelab bench EXPERIMENT... --out book/data`` runs them; every file carries its
provenance (GPU, driver, CUDA, PyCUDA, date, command). GPU experiments need PyCUDA and a
GPU; ``emu_analysis`` runs on the CPU emulator.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import provenance
from tilelab.bench import REPEAT, WARMUP, prepared_launch, time_interleaved
from tilelab.problems import MATMUL, Shape
from tilelab.reference import KERNELS, kernel_file, tiled_without_barrier
from tilelab.runtime import Runtime, get_runtime

METHOD = (
    f"CUDA events around each launch; {WARMUP} warm-up launches; median of {REPEAT} "
    "runs; the kernels of one table interleaved launch by launch; L2 flushed before "
    "every timed launch; fresh random float32 inputs"
)


def write(
    out: Path,
    experiment: str,
    title: str,
    description: str,
    columns: dict[str, str],
    rows: list[dict[str, Any]],
    gpu: bool = True,
    method: str = METHOD,
) -> Path:
    """Write one data file with its provenance."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "experiment": experiment,
        "title": title,
        "description": description,
        "provenance": provenance.collect(method, gpu=gpu),
        "columns": columns,
        "rows": rows,
    }
    path = out / f"{experiment}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def _compile(rt: Runtime, key: str):
    k = KERNELS[key]
    return rt.SourceModule(k.source()).get_function(k.name)


def _ladder(rt: Runtime, keys: list[str], shape: Shape, rng: np.random.Generator):
    problem = KERNELS[keys[0]].problem
    inputs = problem.make_inputs(shape, rng)
    keep: list = []
    runs = {
        k: prepared_launch(
            rt, _compile(rt, k), KERNELS[k].problem, KERNELS[k].launch, shape, inputs, keep
        )
        for k in keys
    }
    return time_interleaved(runs)


def matmul(rt: Runtime, out: Path, sizes: tuple[int, ...] = (1024, 2048, 4096)) -> Path:
    keys = [
        "naive",
        "naive_xrow",
        "tiled16",
        "tiled32",
        "tiled32_padded",
        "tiled32_at",
        "tiled32_at_padded",
    ]
    rng = np.random.default_rng()
    rows = []
    for n in sizes:
        shape = (n, n, n)
        t = _ladder(rt, keys, shape, rng)
        flops, traffic = MATMUL.flops(shape), MATMUL.bytes_moved(shape)
        for k in keys:
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


def transpose(rt: Runtime, out: Path, sizes: tuple[int, ...] = (2048, 4096)) -> Path:
    keys = ["copy", "transpose_naive", "transpose_shared", "transpose_padded"]
    rng = np.random.default_rng()
    rows = []
    for n in sizes:
        t = _ladder(rt, keys, (n, n), rng)
        for k in keys:
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
        "Copy, naive, shared-tile and padded-tile transposes; GB/s counts bytes read "
        "plus bytes written.",
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
    )


def _simple_launches(
    rt: Runtime, source: str, names: list[str], make: Callable[[Any], Callable[[], None]]
) -> dict[str, Callable[[], None]]:
    mod = rt.SourceModule(source)
    return {name: make(mod.get_function(name)) for name in names}


def elementwise(rt: Runtime, out: Path, sizes: tuple[int, ...] = (1 << 22, 1 << 26)) -> Path:
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
            _simple_launches(rt, kernel_file("elementwise.cu"), ["add_global", "add_shared"], make)
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
    )


STRIDES = (1, 2, 4, 8, 16, 32, 33)


def bank_stride(rt: Runtime, out: Path, blocks: int = 1024, iters: int = 4096) -> Path:
    c = rt.mem_alloc(4 * blocks * 256)

    def make_for(stride: int):
        return lambda fn: (
            lambda: fn(c, np.int32(stride), np.int32(iters), block=(256, 1, 1), grid=(blocks, 1))
        )

    mod = rt.SourceModule(kernel_file("bank_stride.cu"))
    fn = mod.get_function("bank_stride")
    t = time_interleaved({str(s): make_for(s)(fn) for s in STRIDES}, flush=False)
    degrees = emu_stride_degrees()
    base = t["1"].median_ms
    rows = [
        {
            "stride": s,
            "median_ms": t[str(s)].median_ms,
            "spread": t[str(s)].spread,
            "slowdown": t[str(s)].median_ms / base,
            "emu_degree": degrees.get(s),
        }
        for s in STRIDES
    ]
    return write(
        out,
        "bank_stride",
        "Shared-memory reads at a stride",
        f"{blocks} blocks of 256 threads, {iters} reads each of s[lane*stride]; "
        "emu_degree is the CPU emulator's bank-conflict degree of the same access.",
        {"stride": "words", "median_ms": "ms", "spread": "", "slowdown": "x", "emu_degree": "way"},
        rows,
    )


def emu_stride_degrees() -> dict[int, float]:
    """The emulator's conflict degree for the bank_stride access at each stride."""
    try:
        from tilelab import emu
    except ImportError:  # a GPU-only install: leave the column empty
        return {}
    rt = get_runtime("emu")
    mod = emu.SourceModule(kernel_file("bank_stride.cu"), analysis=True)
    fn = mod.get_function("bank_stride")
    degrees = {}
    for s in STRIDES:
        c = rt.mem_alloc(4 * 64)
        fn(c, np.int32(s), np.int32(2), block=(64, 1, 1), grid=(1, 1))
        lines = [b for b in fn.last_report.analysis.bank_lines if b.kind == "read"]
        degrees[s] = max(b.max_degree for b in lines)
    return degrees


def occupancy(rt: Runtime, out: Path) -> Path:
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    attr = cuda.device_attribute
    regs_sm = dev.get_attribute(attr.MAX_REGISTERS_PER_MULTIPROCESSOR)
    thr_sm = dev.get_attribute(attr.MAX_THREADS_PER_MULTIPROCESSOR)
    smem_sm = dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
    blocks_sm = dev.get_attribute(attr.MAX_BLOCKS_PER_MULTIPROCESSOR)
    rows = []
    for key in (
        "naive",
        "tiled16",
        "tiled32",
        "tiled32_padded",
        "tiled32_at",
        "tiled32_at_padded",
        "transpose_shared",
        "transpose_padded",
    ):
        fn = _compile(rt, key)
        threads = int(np.prod(KERNELS[key].launch.block))
        regs, smem = fn.num_regs, fn.shared_size_bytes
        warps = math.ceil(threads / 32)
        regs_block = math.ceil(regs * 32 / 256) * 256 * warps  # allocated per warp, 256 at a time
        limit = min(
            blocks_sm,
            thr_sm // threads,
            regs_sm // max(regs_block, 1),
            smem_sm // (smem + 1024) if smem else blocks_sm,
        )
        rows.append(
            {
                "kernel": key,
                "threads_per_block": threads,
                "registers": regs,
                "shared_bytes": smem,
                "blocks_per_sm": limit,
                "occupancy": limit * threads / thr_sm,
            }
        )
    return write(
        out,
        "occupancy",
        "Resources and occupancy of each kernel",
        "Registers and static shared memory as compiled (PyCUDA's function attributes); "
        "blocks per SM from the occupancy formula (threads, registers allocated per warp "
        "in units of 256, shared memory plus 1 KiB reserved per block).",
        {
            "kernel": "",
            "threads_per_block": "",
            "registers": "",
            "shared_bytes": "B",
            "blocks_per_sm": "",
            "occupancy": "",
        },
        rows,
    )


def device(rt: Runtime, out: Path) -> Path:
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    a = {str(k): v for k, v in dev.get_attributes().items()}
    sm = a["MULTIPROCESSOR_COUNT"]
    clock_mhz = a["CLOCK_RATE"] / 1000
    mem_mhz = a["MEMORY_CLOCK_RATE"] / 1000
    bus = a["GLOBAL_MEMORY_BUS_WIDTH"]
    n = 8192
    rng = np.random.default_rng()
    copy = _ladder(rt, ["copy"], (n, n), rng)["copy"].median_ms
    fma = rt.SourceModule(kernel_file("fma_peak.cu")).get_function("fma_peak")
    blocks, iters = sm * 16, 1 << 14
    buf = rt.mem_alloc(4 * blocks * 256)
    t = time_interleaved(
        {
            "fma": lambda: fma(
                buf,
                np.float32(0.999),
                np.float32(0.001),
                np.int32(iters),
                block=(256, 1, 1),
                grid=(blocks, 1),
            )
        },
        flush=False,
    )["fma"]
    fma_gflops = 2.0 * 8 * iters * blocks * 256 / t.median_ms / 1e6
    row = {
        "name": dev.name(),
        "compute_capability": "{}.{}".format(*dev.compute_capability()),
        "sm_count": sm,
        "max_threads_per_block": a["MAX_THREADS_PER_BLOCK"],
        "max_threads_per_sm": a["MAX_THREADS_PER_MULTIPROCESSOR"],
        "warp_size": a["WARP_SIZE"],
        "regs_per_sm": a["MAX_REGISTERS_PER_MULTIPROCESSOR"],
        "shared_per_block_bytes": a["MAX_SHARED_MEMORY_PER_BLOCK"],
        "shared_per_block_optin_bytes": a.get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "shared_per_sm_bytes": a["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"],
        "l2_bytes": a["L2_CACHE_SIZE"],
        "clock_mhz": clock_mhz,
        "mem_clock_mhz": mem_mhz,
        "mem_bus_bits": bus,
        "total_mem_bytes": dev.total_memory(),
        "peak_bw_gbps": 2 * mem_mhz * 1e6 * bus / 8 / 1e9,
        "copy_gbps": 8.0 * n * n / copy / 1e6,
        "fp32_peak_gflops": fma_gflops,
        "fp32_theoretical_gflops": None,
    }
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
    )


_LDS = re.compile(r"\bLDS(\.[A-Z0-9]+)*")


def sass(rt: Runtime | None, out: Path, arch: str = "sm_90") -> Path:
    """Count shared loads in the compiled inner loops (needs nvcc and cuobjdump)."""
    rows = []
    for key in ("tiled32", "tiled32_padded"):
        text = _sass_of(KERNELS[key].source(), arch)
        ops = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\d\s+)?([A-Z0-9_.]+)", text, re.M)
        lds = [o for o in ops if o.startswith("LDS")]
        excerpt = [ln.strip() for ln in text.splitlines() if "LDS" in ln or "FFMA" in ln][:12]
        rows.append(
            {
                "kernel": key,
                "arch": arch,
                "instructions": len(ops),
                "lds_total": len(lds),
                "lds_128": sum(o.startswith("LDS.128") for o in lds),
                "lds_64": sum(o.startswith("LDS.64") for o in lds),
                "lds_32": sum(o in ("LDS", "LDS.U", "LDS.32") for o in lds),
                "ffma": sum(o.startswith("FFMA") for o in ops),
                "excerpt": "\n".join(excerpt),
            }
        )
    return write(
        out,
        "sass",
        "Shared loads in the compiled tiled kernels",
        f"nvcc -cubin -arch={arch} and cuobjdump -sass; instruction counts of the whole kernel.",
        {
            "kernel": "",
            "lds_total": "",
            "lds_128": "",
            "lds_32": "",
            "ffma": "",
            "instructions": "",
        },
        rows,
        gpu=rt is not None,
        method="static: compiled code, no timing",
    )


def _sass_of(source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp, "k.cu"), Path(tmp, "k.cubin")
        cu.write_text('extern "C" {\n' + source + "\n}\n", encoding="utf-8")
        subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-o", str(cubin), str(cu)],
            check=True,
            capture_output=True,
        )
        return subprocess.run(
            ["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True
        ).stdout


def racecheck(rt: Runtime, out: Path) -> Path:
    """compute-sanitizer racecheck on the tiled kernel with and without each barrier."""
    from tilelab.grade_worker import SANITIZE_SHAPE
    from tilelab.sanitizer import find_sanitizer, parse

    exe = find_sanitizer()
    variants = {
        "both_barriers": KERNELS["tiled32"].source(),
        "no_barrier_1": tiled_without_barrier(1),
        "no_barrier_2": tiled_without_barrier(2),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in variants.items():
            path = Path(tmp, f"{name}.cu")
            path.write_text(src, encoding="utf-8")
            if exe is None:
                continue
            p = subprocess.run(
                [
                    exe,
                    "--tool",
                    "racecheck",
                    "--print-limit",
                    "5",
                    "python3",
                    "-m",
                    "tilelab.sanitizer",
                    "--exercise",
                    "tiled",
                    "--source",
                    str(path),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            res = parse("racecheck", p.stdout + p.stderr)
            rows.append(
                {
                    "variant": name,
                    "tool": "compute-sanitizer racecheck",
                    "hazards": res["errors"],
                    "excerpt": res["excerpt"][-2000:],
                }
            )
    return write(
        out,
        "racecheck",
        "compute-sanitizer racecheck on the tiled kernel",
        "The reference tiled kernel (TILE 32), one launch at (M, N, K) = "
        f"{SANITIZE_SHAPE['matmul']}, as written and with its first or second "
        "__syncthreads() removed.",
        {"variant": "", "hazards": "", "excerpt": ""},
        rows,
        method="compute-sanitizer --tool racecheck, one launch",
    )


def traffic_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The per-kernel traffic figures a data file keeps (see tilelab.traffic.summary)."""
    keys = ("loads_per_multiply_add", "sector_bytes_per_multiply_add",
            "sectors_per_load_request", "sectors_per_store_request", "shared_wavefronts")
    return {k: summary[k] for k in keys if k in summary}


def emu_analysis(rt: Runtime | None, out: Path) -> Path:
    """The CPU emulator's race, bank-conflict and traffic reports on the course's kernels."""
    from tilelab import emu, traffic
    from tilelab.check import launch

    erow = get_runtime("emu")
    rng = np.random.default_rng()
    rows: list[dict[str, Any]] = []
    cases = {
        "both_barriers": KERNELS["tiled32"].source(),
        "no_barrier_1": tiled_without_barrier(1),
        "no_barrier_2": tiled_without_barrier(2),
    }
    for name, src in cases.items():
        fn = emu.SourceModule(src, analysis=True).get_function("matmul_tiled")
        launch(
            erow,
            fn,
            MATMUL,
            KERNELS["tiled32"].launch,
            (64, 64, 64),
            MATMUL.make_inputs((64, 64, 64), rng),
        )
        rep = fn.last_report.analysis
        rows.append(
            {
                "kind": "race",
                "kernel": "tiled32",
                "variant": name,
                "races": len(rep.races),
                "excerpt": rep.summary()[:2500],
            }
        )
    for key in (
        "naive",
        "naive_xrow",
        "tiled16",
        "tiled32",
        "tiled32_padded",
        "tiled32_at",
        "tiled32_at_padded",
        "transpose_naive",
        "transpose_shared",
        "transpose_padded",
    ):
        k = KERNELS[key]
        fn = emu.SourceModule(k.source(), analysis=True).get_function(k.name)
        shape = (64, 64, 64) if k.problem is MATMUL else (64, 64)
        launch(erow, fn, k.problem, k.launch, shape, k.problem.make_inputs(shape, rng))
        rep = fn.last_report.analysis
        rows.append({"kind": "traffic", "kernel": key,
                     **traffic_figures(traffic.summary(rep, k.problem, shape))})
        if not rep.bank_lines:
            continue
        for b in rep.bank_lines:
            rows.append(
                {
                    "kind": "bank",
                    "kernel": key,
                    "array": b.array,
                    "line": b.line,
                    "access": b.kind,
                    "accesses": b.count,
                    "degree": b.avg_degree,
                    "max_degree": b.max_degree,
                }
            )
        rows.append({"kind": "bank_average", "kernel": key, "degree": rep.average_degree})
    return write(
        out,
        "emu_analysis",
        "The CPU emulator's analysis of the course's kernels",
        "Races between barriers, the bank-conflict degree of every warp-wide shared access, "
        "and global traffic (32-byte sectors per warp-wide request, loads per multiply-add), "
        "from the emulator's analysis mode (no GPU involved).",
        {
            "kind": "",
            "kernel": "",
            "variant": "",
            "races": "",
            "array": "",
            "access": "",
            "degree": "way",
            "max_degree": "way",
            "loads_per_multiply_add": "",
            "sector_bytes_per_multiply_add": "B",
            "sectors_per_load_request": "",
            "sectors_per_store_request": "",
            "shared_wavefronts": "",
        },
        rows,
        gpu=False,
        method="tilelab CPU emulator, analysis mode, one launch at N=64",
    )


def calibration(rt: Runtime, out: Path) -> Path:
    """Each exercise's reference and a slow-but-right kernel against the gate's baseline."""
    from tilelab import exercises, gates

    rows = [
        {
            "exercise": name,
            "baseline": exercises.get(name).baseline.label,
            "shape": " x ".join(map(str, g["shape"])),
            "reference_speedup": g["reference_speedup"],
            "slow_speedup": g["slow_speedup"],
            "gate": g["default_gate"],
            "calibrated_gate": g["gate"],
        }
        for name, g in gates.calibrate(rt=rt)["gates"].items()
    ]
    return write(
        out,
        "calibration",
        "The speed gates against what the kernels measure",
        "For each graded kernel: the reference solution's speedup over the gate's baseline, "
        "the speedup of a correct kernel that skips the lesson (uncoalesced, untiled or "
        "unpadded), the default gate, and the gate `tilelab calibrate` would set.",
        {
            "exercise": "",
            "baseline": "",
            "shape": "",
            "reference_speedup": "x",
            "slow_speedup": "x",
            "gate": "x",
            "calibrated_gate": "x",
        },
        rows,
    )


GPU_EXPERIMENTS: dict[str, Callable[[Runtime, Path], Path]] = {
    "device": device,
    "matmul": matmul,
    "transpose": transpose,
    "elementwise": elementwise,
    "bank_stride": bank_stride,
    "occupancy": occupancy,
    "sass": sass,
    "racecheck": racecheck,
    "calibration": calibration,
}
CPU_EXPERIMENTS: dict[str, Callable[[Runtime | None, Path], Path]] = {"emu_analysis": emu_analysis}
ALL = {**GPU_EXPERIMENTS, **CPU_EXPERIMENTS}


def run(names: list[str], out: Path) -> list[Path]:
    """Run experiments by name; GPU ones need a GPU."""
    unknown = [n for n in names if n not in ALL]
    if unknown:
        raise KeyError(f"unknown experiment(s) {unknown}; choose from {', '.join(ALL)}")
    paths = []
    gpu_rt = get_runtime("gpu") if any(n in GPU_EXPERIMENTS for n in names) else None
    for name in names:
        if name in GPU_EXPERIMENTS:
            if name == "sass" and not shutil.which("cuobjdump"):
                raise RuntimeError("the sass experiment needs nvcc and cuobjdump on PATH")
            paths.append(GPU_EXPERIMENTS[name](gpu_rt, out))  # type: ignore[arg-type]
        else:
            paths.append(CPU_EXPERIMENTS[name](gpu_rt, out))
    return paths
