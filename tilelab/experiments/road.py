"""The road to cuBLAS: the SGEMM ladder, its tunable configurations, and two experiments.

``sgemm`` (GPU): checks every step against float64, times the ladder, the tuned
configurations and cuBLAS interleaved in one process at N = 1024, 2048, 4096, and writes
TFLOP/s, % of cuBLAS and % of the FP32 peak. ``sgemm_ptxas`` (no GPU): compiles every step
for sm_90 with ``nvcc --resource-usage`` and writes registers, shared memory, spills,
blocks per SM and occupancy from the H100's limits in ``device.json``, with the traffic
model of each step (global bytes per FMA, shared operands per FMA, FMAs per shared load).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog.problems import MATMUL, Launch
from tilelab.catalog.reference import KERNELS, KernelRef
from tilelab.device.bench import WARMUP, time_interleaved
from tilelab.experiments.cublas import Cublas, library_path, package_version, relative_error
from tilelab.experiments.sass import OPCODE, sass_of
from tilelab.grading.correctness import check_function

# Step 6, asynchronous copies: not a kernel of the course's catalogue, only of this road.
ASYNC = KernelRef(
    "async",
    "sgemm_06_async.cu",
    "matmul_async",
    MATMUL,
    Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(256, 128)),
    "cp.async copies, 4 stages, 128x256x8, warp 64x64, 2x4 sub-tiles of 4x4 per thread",
    (("BM", "128"), ("BN", "256"), ("BK", "8"), ("WM", "64"), ("WN", "64"), ("WNITER", "4"),
     ("TM", "4"), ("TN", "4"), ("STAGES", "4"), ("MINB", "1")),
)

# Step 7, A's tile copied by rows and swizzled: the road's too.
SWIZZLE = KernelRef(
    "swizzle",
    "sgemm_07_swizzle.cu",
    "matmul_swizzle",
    MATMUL,
    Launch(block=(128, 1, 1), grid_dims=("N", "M"), tile=(64, 128)),
    "16-byte cp.async of both tiles, A swizzled, 2 stages, 128x64x16, warp 64x32, "
    "8x8 per thread, 3 blocks per SM",
    (("BM", "128"), ("BN", "64"), ("BK", "16"), ("WM", "64"), ("WN", "32"), ("TM", "8"),
     ("TN", "8"), ("STAGES", "2"), ("SWIZZLE", "1"), ("PAD", "0"), ("RASTER", "0"),
     ("MINB", "3")),
)

# Step 8, step 5 with the operands loaded a step ahead: the road's too.
AHEAD = KernelRef(
    "ahead",
    "sgemm_08_ahead.cu",
    "matmul_ahead",
    MATMUL,
    Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(256, 128)),
    "operands loaded a step ahead, across the barrier, 128x256x16, warp 64x64, "
    "2x4 sub-tiles of 4x4 per thread",
    (("BM", "128"), ("BN", "256"), ("BK", "16"), ("WM", "64"), ("WN", "64"), ("WNITER", "4"),
     ("TM", "4"), ("TN", "4"), ("MINB", "1"), ("AHEAD", "1")),
)

# The ladder in teaching order: where the course stopped, then each step of the chapter.
LADDER = ("naive", "tiled32", "regblock_1d", "regblock", "vec4", "warptile", "dbuf", "async",
          "swizzle", "ahead")
STEP = {k: i for i, k in enumerate(LADDER)}
STEPS: dict[str, KernelRef] = {**{k: KERNELS[k] for k in LADDER if k in KERNELS},
                               "async": ASYNC, "swizzle": SWIZZLE, "ahead": AHEAD}

# Configurations of a step (template-free: #defines set in the file). A name starts with
# its step's key; what it does not set keeps the step's defaults. Two kinds: tuned shapes
# of the last steps, and ablations, which change one thing of a step (see ABLATIONS).
CONFIGS: dict[str, dict[str, int]] = {
    "dbuf_128x128x8": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "WNITER": 2,
                       "TM": 4, "TN": 4, "MINB": 2},
    "dbuf_128x128x16_t8x4": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64,
                             "WNITER": 4, "TM": 8, "TN": 4, "MINB": 2},
    "dbuf_128x256x16": {"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 64, "WNITER": 4,
                        "TM": 8, "TN": 4, "MINB": 1},
    "dbuf_64x128x16": {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "WNITER": 2,
                       "TM": 4, "TN": 4, "MINB": 2},
    "dbuf_128x128x8_t8x4": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WNITER": 4,
                            "TM": 8, "TN": 4, "MINB": 2},
    "dbuf_256x128x8": {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WNITER": 4,
                       "TM": 8, "TN": 4, "MINB": 1},
    "dbuf_128x128x16_w64x64": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64,
                               "WNITER": 4, "TM": 4, "TN": 4, "MINB": 2},
    "dbuf_128x128x8_w64x64": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 64,
                              "WNITER": 4, "TM": 4, "TN": 4, "MINB": 2},
    "dbuf_128x256x16_w64x64": {"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 64,
                               "WNITER": 4, "TM": 4, "TN": 4, "MINB": 1},
    "dbuf_256x128x16_w64x64": {"BM": 256, "BN": 128, "BK": 16, "WM": 64, "WN": 64,
                               "WNITER": 4, "TM": 4, "TN": 4, "MINB": 1},
    "dbuf_128x128x16_w64x64_arow": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64,
                                    "WNITER": 4, "TM": 4, "TN": 4, "MINB": 2, "A_BY_ROW": 1},
    "dbuf_128x128x16_arow": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "WNITER": 2,
                             "TM": 4, "TN": 4, "MINB": 2, "A_BY_ROW": 1},
    "dbuf_128x128x16_w64x64_checked": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64,
                                       "WNITER": 4, "TM": 4, "TN": 4, "MINB": 2,
                                       "CHECK_ALL": 1},
    "dbuf_128x128x16_minb1": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32,
                              "WNITER": 2, "TM": 4, "TN": 4, "MINB": 1},
    # ablations of steps 4 and 5 (one change each, see ABLATIONS)
    "vec4_bk16": {"BK": 16},
    "warptile_bk8": {"BK": 8},
    "dbuf_checked": {"CHECK_ALL": 1},
    "warptile_128x256x16_w64x64": {"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 64,
                                   "WNITER": 4, "TM": 4, "TN": 4},
    "dbuf_128x256x16_w64x64_checked": {"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 64,
                                       "WNITER": 4, "TM": 4, "TN": 4, "MINB": 1,
                                       "CHECK_ALL": 1},
    "dbuf_128x256x8_w64x64": {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64,
                              "WNITER": 4, "TM": 4, "TN": 4, "MINB": 1},
    # step 6: pipeline depth and shapes
    "async_s2": {"STAGES": 2},
    "async_s3": {"STAGES": 3},
    "async_128x256x16_s2": {"BK": 16, "STAGES": 2},
    "async_128x128x16_s2": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "WNITER": 2,
                            "TM": 4, "TN": 4, "STAGES": 2, "MINB": 2},
    "async_128x128x16_s3": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "WNITER": 2,
                            "TM": 4, "TN": 4, "STAGES": 3, "MINB": 2},
    "async_128x128x8_s4": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WNITER": 4,
                           "TM": 4, "TN": 4, "STAGES": 4, "MINB": 2},
    "async_128x64x16_s2": {"BM": 128, "BN": 64, "BK": 16, "WM": 64, "WN": 32, "WNITER": 2,
                           "TM": 4, "TN": 4, "STAGES": 2, "MINB": 3},
    # step 7: A's layout in shared memory (ablations), and cuBLAS's FFMA shape
    "swizzle_plain": {"SWIZZLE": 0},
    "swizzle_pad": {"SWIZZLE": 0, "PAD": 4},
    "swizzle_128x128x8_s3": {"BN": 128, "BK": 8, "WN": 64, "TN": 16, "STAGES": 3, "MINB": 2},
    # step 8: the same kernel in step 5's order (the ablation), and cuBLAS's tile
    "ahead_inorder": {"AHEAD": 0},
    "ahead_256x128x8": {"BM": 256, "BN": 128, "BK": 8, "TM": 8},
}

# What one change does, each measured as a pair (without, with) that differ in it only.
ABLATIONS: tuple[tuple[str, str, str, str], ...] = (
    ("bk", "BK 8 to 16, warp-tiled layout", "warptile_bk8", "warptile"),
    ("bk_vec4", "BK 8 to 16, step 3's layout", "vec4", "vec4_bk16"),
    ("layout", "warp-tiled layout, BK 16", "vec4_bk16", "warptile"),
    ("layout_bk8", "warp-tiled layout, BK 8", "vec4", "warptile_bk8"),
    ("dbuf", "two buffers instead of one, 128x128x16", "warptile", "dbuf_checked"),
    ("interior", "unchecked interior loads, 128x128x16", "dbuf_checked", "dbuf"),
    ("dbuf_big", "two buffers instead of one, 128x256x16", "warptile_128x256x16_w64x64",
     "dbuf_128x256x16_w64x64_checked"),
    ("interior_big", "unchecked interior loads, 128x256x16", "dbuf_128x256x16_w64x64_checked",
     "dbuf_128x256x16_w64x64"),
    ("interior_w64", "unchecked interior loads, 128x128x16, 64x64 warp tiles",
     "dbuf_128x128x16_w64x64_checked", "dbuf_128x128x16_w64x64"),
    ("async", "cp.async instead of registers, 2 stages, 128x256x8", "dbuf_128x256x8_w64x64",
     "async_s2"),
    ("stages", "4 stages instead of 2, 128x256x8", "async_s2", "async"),
    ("async_small", "cp.async instead of registers, 2 stages, 128x128x16", "dbuf",
     "async_128x128x16_s2"),
    ("stages_small", "3 stages instead of 2, 128x128x16", "async_128x128x16_s2",
     "async_128x128x16_s3"),
    ("async_bk16", "cp.async instead of registers, 2 stages, 128x256x16",
     "dbuf_128x256x16_w64x64", "async_128x256x16_s2"),
    ("a_rows", "A copied by 16-byte rows and swizzled instead of 4-byte transposing copies, "
     "128x64x16, 2 stages", "async_128x64x16_s2", "swizzle"),
    ("swizzle", "swizzled rows of A instead of plain ones", "swizzle_plain", "swizzle"),
    ("pad", "rows of A padded by 4 floats instead of plain", "swizzle_plain", "swizzle_pad"),
    ("ahead", "operands loaded a step ahead, across the barrier, 128x256x16",
     "ahead_inorder", "ahead"),
)

# H100 (compute capability 9.0) limits that device.json does not record: CUDA C
# Programming Guide, "Technical Specifications per Compute Capability".
MAX_BLOCKS_PER_SM = 32
RESERVED_SHARED_PER_BLOCK = 1024
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128}
REPEAT = 50  # timed runs per kernel and size: more than the book's other tables, the
# gaps between the last steps are a few percent
SMALL_SHAPES = ((1, 1, 1), (37, 53, 29), (64, 64, 64), (100, 30, 70), (33, 129, 65),
                (128, 96, 160), (130, 260, 36), (257, 300, 129))


def base_of(name: str) -> str:
    """The step a configuration configures: its name's first word."""
    return name.split("_")[0]


def config_ref(name: str) -> KernelRef:
    """A step's kernel under one configuration."""
    base = STEPS[base_of(name)]
    d = {**{k: int(v) for k, v in base.defines}, **CONFIGS[name]}
    launch = base.launch
    if "WM" in d:
        threads = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * 32
        launch = Launch(block=(threads, 1, 1), grid_dims=("N", "M"), tile=(d["BN"], d["BM"]))
    return replace(
        base,
        key=name,
        launch=launch,
        label=base.label.split(",")[0] + ", " + ", ".join(f"{k}={v}" for k, v in d.items()),
        defines=tuple((k, str(v)) for k, v in d.items()),
    )


def step_of(key: str) -> int:
    """The step a kernel or configuration belongs to (cuBLAS: one past the last)."""
    if key == "cublas":
        return len(LADDER)
    return STEP[key] if key in STEP else STEP[base_of(key)]


def kernel_refs() -> dict[str, KernelRef]:
    """Every kernel the experiments measure: the ladder, then the configurations."""
    return {**STEPS, **{c: config_ref(c) for c in CONFIGS}}


_IF_ASYNC = re.compile(r"^[ \t]*#[ \t]*if[ \t]+ASYNC[ \t]*$")
_ELSE_OR_END = re.compile(r"^[ \t]*#[ \t]*(else|endif)\b")


def emulator_source(ref: KernelRef) -> str:
    """The kernel as the CPU emulator runs it: each ``#if ASYNC`` branch (inline PTX such
    as ``cp.async``, which the emulator refuses to read) blanked up to its ``#else`` or
    ``#endif``, so the portable branch is what remains; every line keeps its number."""
    out, blanking = [], False
    for line in ref.source().split("\n"):
        if _IF_ASYNC.match(line):
            blanking = True
            out.append("")
            continue
        end = _ELSE_OR_END.match(line) if blanking else None
        if end:  # #else opens the portable branch its #endif closes; #endif closes nothing
            blanking = False
            out.append("#if 1" if end.group(1) == "else" else "")
            continue
        out.append("" if blanking else line)
    return "\n".join(out)


def fp32_peak_tflops(sm_count: int, clock_khz: float, cc: tuple[int, int]) -> float:
    """SMs x FP32 lanes x 2 FLOP per FMA x clock: the most FP32 work the chip can issue."""
    return sm_count * FP32_LANES_PER_SM[cc] * 2 * clock_khz * 1e3 / 1e12


# ---------------------------------------------------------------- the traffic model


@dataclass(frozen=True)
class Traffic:
    """What one FMA costs a step, counted from its tile sizes (caches ignored)."""

    global_bytes_per_fma: float  # bytes read from global memory per FMA, whole grid
    shared_operands_per_fma: float  # values a thread reads from shared memory per FMA
    fma_per_shared_load: float | None  # FMAs per shared-load instruction (widest width)


def traffic(key: str) -> Traffic:
    """The traffic model of a ladder step or configuration."""
    if key == "naive":
        return Traffic(8.0, 0.0, None)  # no shared loads: no ratio to show
    ref = kernel_refs()[key]
    d = {k: int(v) for k, v in ref.defines}
    if key.startswith("tiled"):
        t = int(d.get("TILE", 32))
        return Traffic(4.0 * 2 * t / (t * t), 2.0, 0.5)
    bm, bn = d["BM"], d["BN"]
    glob = 4.0 * (bm + bn) / (bm * bn)
    if key == "regblock_1d":  # TM values of A and one of B per k, scalar loads
        tm = d["TM"]
        return Traffic(glob, (tm + 1) / tm, tm / (tm + 1))
    if "WNITER" in d:  # warp tiling: WMITER x WNITER sub-tiles of TM x TN per thread
        wmiter = d["WM"] * d["WN"] // (32 * d["TM"] * d["TN"] * d["WNITER"])
        tm, tn = wmiter * d["TM"], d["WNITER"] * d["TN"]
    else:  # one TM x TN micro-tile per thread (step 7: its rows and columns spread)
        tm, tn = d["TM"], d["TN"]
    width = 1 if key == "regblock" else 4  # float4 shared loads from step 3 on
    return Traffic(glob, (tm + tn) / (tm * tn), tm * tn / ((tm + tn) / width))


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


def blocks_per_sm(threads: int, regs: int, smem: int, limits: dict[str, Any]) -> int:
    """Resident blocks per SM: the tightest of the thread, register, shared and block limits."""
    warps = math.ceil(threads / 32)
    regs_block = math.ceil(regs * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT * warps
    return min(
        MAX_BLOCKS_PER_SM,
        limits["max_threads_per_sm"] // threads,
        limits["regs_per_sm"] // max(regs_block, 1),
        limits["shared_per_sm_bytes"] // (smem + RESERVED_SHARED_PER_BLOCK),
    )


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
    rows = []
    for key, ref in kernel_refs().items():
        rep: dict[str, Any] = {**ptxas_report(ref.source()), **sass_counts(ref.source())}
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


def measure(rt, n: int, refs: dict[str, KernelRef], repeat: int = REPEAT) -> list[dict[str, Any]]:
    """Time every kernel and cuBLAS at N x N x N on one set of inputs, interleaved."""
    import pycuda.driver as cuda

    rng = np.random.default_rng()
    inputs = MATMUL.make_inputs((n, n, n), rng)
    expected = MATMUL.reference(inputs)
    a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
    blas = Cublas()
    outs: dict[str, Any] = {}
    runs = {}
    regs = {}
    sizes = {"M": n, "N": n, "K": n}
    for key, ref in refs.items():
        fn = rt.SourceModule(ref.source()).get_function(ref.name)
        regs[key] = fn.num_regs
        c = outs[key] = rt.mem_alloc(n * n * 4)
        grid = ref.launch.grid(sizes)
        runs[key] = (lambda fn=fn, c=c, ref=ref, grid=grid: fn(
            a, b, c, np.int32(n), np.int32(n), np.int32(n), block=ref.launch.block, grid=grid))
    c_blas = outs["cublas"] = rt.mem_alloc(n * n * 4)
    runs["cublas"] = lambda: blas.sgemm(a, b, c_blas, n, n, n)
    for c in outs.values():  # poison: NaN everywhere before the first run
        cuda.memset_d32(c, 0x7FC00000, n * n)
    t = time_interleaved(runs, warmup=WARMUP, repeat=repeat)
    flops = MATMUL.flops((n, n, n))
    rows = []
    for key, tm in t.items():
        got = rt.from_device(outs[key], (n, n), np.float32)
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
                "registers": regs.get(key),
            }
        )
    blas_row = next(r for r in rows if r["kernel"] == "cublas")
    blas_row["cublas_version"] = blas.version
    blas.close()
    return rows


def run_gpu(rt, sizes: tuple[int, ...] = (1024, 2048, 4096)) -> dict[str, Any]:
    """Check, time and compare everything; the rows and what the run learned."""
    import pycuda.driver as cuda

    refs = kernel_refs()
    bad = _check_small(rt, refs)
    if bad:
        raise RuntimeError("kernels failed their checks:\n" + "\n".join(bad))
    dev = cuda.Context.get_device()
    attr = cuda.device_attribute
    cc = dev.compute_capability()
    peak = fp32_peak_tflops(
        dev.get_attribute(attr.MULTIPROCESSOR_COUNT), dev.get_attribute(attr.CLOCK_RATE), cc)
    rows = []
    for n in sizes:
        rows.extend(measure(rt, n, refs))
    for n in sizes:
        at_n = [r for r in rows if r["n"] == n]
        blas = next(r for r in at_n if r["kernel"] == "cublas")
        best = max((r for r in at_n if r["kernel"] != "cublas"), key=lambda r: r["tflops"])
        for r in at_n:
            r["pct_cublas"] = 100.0 * r["tflops"] / blas["tflops"]
            r["pct_peak"] = 100.0 * r["tflops"] / peak
            r["peak_tflops"] = peak
            r["best_config"] = r["kernel"] == best["kernel"]
    return {
        "rows": rows,
        "peak": {
            "sm_count": dev.get_attribute(attr.MULTIPROCESSOR_COUNT),
            "clock_khz": dev.get_attribute(attr.CLOCK_RATE),
            "fp32_lanes_per_sm": FP32_LANES_PER_SM[cc],
            "peak_tflops": peak,
        },
        "cublas": {"library": Path(library_path()).name, "package": package_version()},
    }
