"""The road to cuBLAS as data: chapter 6's steps, their configurations and ablations, the
GPU limits occupancy is computed from, the traffic model of each step, and the last step's
choice of a configuration per shape.

Pure data and arithmetic (nothing here runs a kernel): the book reads the ablations and
the bank diagrams from here without loading the grader or the emulator;
:mod:`tilelab.experiments.road` measures what is listed here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tilelab.catalog.problems import MATMUL, Launch
from tilelab.catalog.reference import KERNELS, KernelRef

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

# Step 9, step 8 at any shape: interior tiles take the unchecked path whatever the
# alignment, and a configuration is chosen per shape (choose() below).
SHAPES = KernelRef(
    "shapes",
    "sgemm_09_shapes.cu",
    "matmul_shapes",
    MATMUL,
    Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(256, 128)),
    "step 8 at any alignment, 128x256x16, warp 64x64, 2x4 sub-tiles of 4x4 per thread",
    (("BM", "128"), ("BN", "256"), ("BK", "16"), ("WM", "64"), ("WN", "64"), ("WNITER", "4"),
     ("TM", "4"), ("TN", "4"), ("MINB", "1")),
)

# The ladder in teaching order: where the course stopped, then each step of the chapter.
LADDER = ("naive", "tiled32", "regblock_1d", "regblock", "vec4", "warptile", "dbuf", "async",
          "swizzle", "ahead", "shapes")
STEP = {k: i for i, k in enumerate(LADDER)}
STEPS: dict[str, KernelRef] = {**{k: KERNELS[k] for k in LADDER if k in KERNELS},
                               "async": ASYNC, "swizzle": SWIZZLE, "ahead": AHEAD,
                               "shapes": SHAPES}

# Configurations of a step (template-free: #defines set in the file). A name starts with
# its step's key; what it does not set keeps the step's defaults. Two kinds: tuned shapes
# of the last steps, and ablations, which change one thing of a step (see ABLATIONS).
CONFIGS: dict[str, dict[str, int]] = {
    # step 1 taken apart, from the tiled kernel to step 1, one change at a time
    "regblock_1d_32x32x32_tm1": {"BM": 32, "BN": 32, "BK": 32, "TM": 1},
    "regblock_1d_32x32x32": {"BM": 32, "BN": 32, "BK": 32, "TM": 8},
    "regblock_1d_64x64x32": {"BM": 64, "BN": 64, "BK": 32, "TM": 8},
    # step 2 taken apart, from step 1 to step 2
    "regblock_64x64x8_tn1": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 1},
    "regblock_64x64x8": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 8},
    "regblock_minb2": {"MINB": 2},
    # step 3 taken apart: its global loads as four scalar ones
    "vec4_scalar": {"GLOBAL_WIDE": 0},
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
    # step 9: the configurations it chooses among (choose()), and step 8's interior rule
    "shapes_128x128x16": {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "WNITER": 4,
                          "TM": 4, "TN": 4, "MINB": 2},
    "shapes_64x128x16": {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "WNITER": 2,
                         "TM": 4, "TN": 4, "MINB": 2},
    "shapes_aligned": {"ANY_ALIGN": 0},
}


@dataclass(frozen=True)
class Ablation:
    """Two kernels measured as a pair (``without``, ``with_``). ``one_change``: they differ
    in one thing only, so the ratio of their speeds is what that thing is worth; where
    they differ in more (``False``), the ratio is a comparison that credits no one cause."""

    key: str
    what: str
    without: str
    with_: str
    one_change: bool = True


# What one change does, each measured as a pair (without, with).
ABLATIONS: tuple[Ablation, ...] = (
    Ablation("file_1d", "the tiled kernel written in step 1's file (32x32x32, one output "
             "per thread)", "tiled32", "regblock_1d_32x32x32_tm1"),
    Ablation("outputs_1d", "8 outputs of a column per thread instead of 1, 32x32x32",
             "regblock_1d_32x32x32_tm1", "regblock_1d_32x32x32"),
    Ablation("tile_1d", "a 64x64 tile instead of 32x32, BK 32, 8 outputs per thread",
             "regblock_1d_32x32x32", "regblock_1d_64x64x32"),
    Ablation("bk_1d", "BK 8 instead of 32, 64x64 tile", "regblock_1d_64x64x32",
             "regblock_1d"),
    Ablation("file_2d", "step 1 written in step 2's file (64x64x8, 8x1 per thread)",
             "regblock_1d", "regblock_64x64x8_tn1"),
    Ablation("microtile", "an 8x8 micro-tile per thread instead of a column of 8, 64x64x8",
             "regblock_64x64x8_tn1", "regblock_64x64x8"),
    Ablation("tile_2d", "a 128x128 tile instead of 64x64, 8x8 per thread",
             "regblock_64x64x8", "regblock"),
    Ablation("occupancy_2d", "two blocks per SM instead of one (__launch_bounds__(256, 2)), "
             "step 2", "regblock", "regblock_minb2"),
    Ablation("layout_3", "A stored transposed, contiguous 8x8 micro-tiles, 16-byte shared "
             "loads (two blocks per SM, scalar global loads both)", "regblock_minb2",
             "vec4_scalar"),
    Ablation("global_wide", "16-byte global loads and stores instead of 4-byte ones, step 3",
             "vec4_scalar", "vec4"),
    Ablation("bk", "BK 8 to 16, warp-tiled layout", "warptile_bk8", "warptile"),
    Ablation("bk_vec4", "BK 8 to 16, step 3's layout", "vec4", "vec4_bk16"),
    Ablation("layout", "warp-tiled layout, BK 16", "vec4_bk16", "warptile"),
    Ablation("layout_bk8", "warp-tiled layout, BK 8", "vec4", "warptile_bk8"),
    Ablation("dbuf", "two buffers instead of one, 128x128x16", "warptile", "dbuf_checked"),
    Ablation("interior", "unchecked interior loads, 128x128x16", "dbuf_checked", "dbuf"),
    Ablation("dbuf_big", "two buffers instead of one, 128x256x16",
             "warptile_128x256x16_w64x64", "dbuf_128x256x16_w64x64_checked"),
    Ablation("interior_big", "unchecked interior loads, 128x256x16",
             "dbuf_128x256x16_w64x64_checked", "dbuf_128x256x16_w64x64"),
    Ablation("interior_w64", "unchecked interior loads, 128x128x16, 64x64 warp tiles",
             "dbuf_128x128x16_w64x64_checked", "dbuf_128x128x16_w64x64"),
    Ablation("async", "cp.async instead of registers, 2 stages, 128x256x8",
             "dbuf_128x256x8_w64x64", "async_s2"),
    Ablation("stages", "4 stages instead of 2, 128x256x8", "async_s2", "async"),
    Ablation("async_small", "cp.async instead of registers, 2 stages, 128x128x16", "dbuf",
             "async_128x128x16_s2"),
    Ablation("stages_small", "3 stages instead of 2, 128x128x16", "async_128x128x16_s2",
             "async_128x128x16_s3"),
    Ablation("async_bk16", "cp.async instead of registers, 2 stages, 128x256x16",
             "dbuf_128x256x16_w64x64", "async_128x256x16_s2"),
    Ablation("a_rows", "step 6's kernel against step 7's at the same tile, stages and threads "
             "(128x64x16, 2 stages, 128 threads): A copied by 16-byte rows, read as float4 "
             "along k and kept in registers, 8x8 outputs per thread, lanes 8x4, swizzled",
             "async_128x64x16_s2", "swizzle", one_change=False),
    Ablation("swizzle", "swizzled rows of A instead of plain ones", "swizzle_plain", "swizzle"),
    Ablation("pad", "rows of A padded by 4 floats instead of plain", "swizzle_plain",
             "swizzle_pad"),
    Ablation("file_8", "step 5's fastest configuration written in step 8's file, in step 5's "
             "order (128x256x16)", "dbuf_128x256x16_w64x64", "ahead_inorder"),
    Ablation("ahead", "operands loaded a step ahead, across the barrier, 128x256x16",
             "ahead_inorder", "ahead"),
    Ablation("file_9", "step 8 written in step 9's file, its interior rule as step 8's "
             "(128x256x16)", "ahead", "shapes_aligned"),
    Ablation("any_align", "interior tiles unchecked at any alignment (step 9's rule) instead "
             "of only where K and N are multiples of 4, 128x256x16", "shapes_aligned",
             "shapes"),
)



@dataclass(frozen=True)
class Step:
    """One row of chapter 6's scoreboard: a step, the kernel it starts from (the one its
    gain is measured over) and its change in a line."""

    key: str
    start: str | None
    change: str


SCOREBOARD: tuple[Step, ...] = (
    Step("naive", None, "one output per thread, operands from global memory"),
    Step("tiled32", "naive", "32x32 tiles in shared memory"),
    Step("regblock_1d", "tiled32", "8 outputs of a column per thread"),
    Step("regblock", "regblock_1d", "an 8x8 micro-tile per thread"),
    Step("vec4", "regblock", "16-byte loads, A's tile transposed"),
    Step("warptile", "vec4", "warp tiles, BK 16"),
    Step("dbuf", "warptile", "two buffers, unchecked interior"),
    Step("async", "dbuf_128x256x8_w64x64", "cp.async copies, 4 stages"),
    Step("swizzle", "async_128x64x16_s2", "A by 16-byte rows, swizzled"),
    Step("ahead", "dbuf_128x256x16_w64x64", "operands a step ahead"),
    Step("shapes", "ahead", "any alignment, a tile per shape"),
)


def attribution(step: Step) -> str:
    """How the scoreboard credits a step's gain: ``ablations`` where one-change pairs lead
    from its start to it, ``ablations in part`` where some do, ``model`` for the first two
    steps (chapter 5's model predicts both), ``none`` otherwise; step 9's choice per shape
    is credited to its wave model."""
    if step.key in ("naive", "tiled32"):
        return "model (chapter 5)"
    edges: dict[str, list[str]] = {}
    for ab in ABLATIONS:
        if ab.one_change:
            edges.setdefault(ab.without, []).append(ab.with_)
    seen, todo = set(), [step.start]
    while todo:
        node = todo.pop()
        if node == step.key:
            break
        if node in seen or node is None:
            continue
        seen.add(node)
        todo.extend(edges.get(node, []))
    else:
        touches = any(ab.one_change and step.key in (ab.with_, base_of(ab.with_))
                      for ab in ABLATIONS)
        return "ablations in part" if touches else "none"
    return "ablations; the choice: wave model" if step.key == "shapes" else "ablations"


# H100/H200 (compute capability 9.0) limits that device.json does not record: CUDA C
# Programming Guide, "Technical Specifications per Compute Capability".
MAX_BLOCKS_PER_SM = 32
RESERVED_SHARED_PER_BLOCK = 1024
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128}
SMALL_SHAPES = ((1, 1, 1), (37, 53, 29), (64, 64, 64), (100, 30, 70), (33, 129, 65),
                (128, 96, 160), (130, 260, 36), (257, 300, 129))


def base_of(name: str) -> str:
    """The step a configuration configures: the longest step key its name starts with."""
    for key in sorted(STEPS, key=len, reverse=True):
        if name == key or name.startswith(key + "_"):
            return key
    raise KeyError(f"{name!r} names no step of the road ({', '.join(LADDER)})")


def _launch(base: str, d: Mapping[str, int], default: Launch) -> Launch:
    """The launch of a configuration: its block from its tile and thread tiling."""
    if "WM" in d:
        threads = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * 32
        return Launch(block=(threads, 1, 1), grid_dims=("N", "M"), tile=(d["BN"], d["BM"]))
    if base == "regblock_1d":
        return Launch(block=(d["BN"], d["BM"] // d["TM"], 1), grid_dims=("N", "M"),
                      tile=(d["BN"], d["BM"]))
    if base == "regblock":
        return Launch(block=(d["BN"] // d["TN"], d["BM"] // d["TM"], 1),
                      grid_dims=("N", "M"), tile=(d["BN"], d["BM"]))
    if base == "vec4":
        return Launch(block=((d["BM"] // d["TM"]) * (d["BN"] // d["TN"]), 1, 1),
                      grid_dims=("N", "M"), tile=(d["BN"], d["BM"]))
    return default


def config_ref(name: str) -> KernelRef:
    """A step's kernel under one configuration."""
    key = base_of(name)
    base = STEPS[key]
    d = {**{k: int(v) for k, v in base.defines}, **CONFIGS[name]}
    return replace(
        base,
        key=name,
        launch=_launch(key, d, base.launch),
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


_IF_DEVICE_ONLY = re.compile(r"^[ \t]*#[ \t]*if[ \t]+(ASYNC|PTX)[ \t]*$")
_ELSE_OR_END = re.compile(r"^[ \t]*#[ \t]*(else|endif)\b")


def portable_source(text: str) -> str:
    """A kernel file as the CPU emulator runs it: each ``#if ASYNC`` or ``#if PTX`` branch
    (inline PTX such as ``cp.async``, which the emulator refuses to read) blanked up to its
    ``#else`` or ``#endif``, so the portable branch is what remains; every line keeps its
    number."""
    out, blanking = [], False
    for line in text.split("\n"):
        if _IF_DEVICE_ONLY.match(line):
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


def emulator_source(ref: KernelRef) -> str:
    """A step's kernel as the CPU emulator runs it (:func:`portable_source`)."""
    return portable_source(ref.source())


def fp32_peak_tflops(sm_count: int, clock_khz: float, cc: tuple[int, int]) -> float:
    """SMs x FP32 lanes x 2 FLOP per FMA x clock: the most FP32 work the chip can issue."""
    return sm_count * FP32_LANES_PER_SM[cc] * 2 * clock_khz * 1e3 / 1e12


def blocks_per_sm(threads: int, regs: int, smem: int, limits: Mapping[str, int]) -> int:
    """Resident blocks per SM: the tightest of the thread, register, shared and block limits."""
    warps = math.ceil(threads / 32)
    regs_block = math.ceil(regs * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT * warps
    return min(
        MAX_BLOCKS_PER_SM,
        limits["max_threads_per_sm"] // threads,
        limits["regs_per_sm"] // max(regs_block, 1),
        limits["shared_per_sm_bytes"] // (smem + RESERVED_SHARED_PER_BLOCK),
    )


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
    if base_of(key) == "regblock_1d":  # TM values of A and one of B per k, scalar loads
        tm = d["TM"]
        return Traffic(glob, (tm + 1) / tm, tm / (tm + 1))
    if "WNITER" in d:  # warp tiling: WMITER x WNITER sub-tiles of TM x TN per thread
        wmiter = d["WM"] * d["WN"] // (32 * d["TM"] * d["TN"] * d["WNITER"])
        tm, tn = wmiter * d["TM"], d["WNITER"] * d["TN"]
    else:  # one TM x TN micro-tile per thread (step 7: its rows and columns spread)
        tm, tn = d["TM"], d["TN"]
    width = 1 if base_of(key) == "regblock" else 4  # float4 shared loads from step 3 on
    return Traffic(glob, (tm + tn) / (tm * tn), tm * tn / ((tm + tn) / width))


# ---------------------------------------------------------------- step 9's choice

#: The configurations step 9 chooses among (step 9's kernel at three tile sizes).
CANDIDATES = ("shapes", "shapes_128x128x16", "shapes_64x128x16")
#: The aligned square size at which each candidate's own speed is measured (its rate):
#: every SM full, every tile an interior one.
RATE_N = 4096


def tile_of(key: str) -> tuple[int, int]:
    """(BM, BN): the block tile of C of a step or configuration."""
    d = {k: int(v) for k, v in kernel_refs()[key].defines}
    return d["BM"], d["BN"]


def predicted_ms(key: str, m: int, n: int, k: int, sm_count: int, rate_tflops: float) -> float:
    """The wave model of a configuration at M x N x K: the SM with the most tiles sets
    the time, ``ceil(tiles / SMs)`` tiles of ``2 BM BN K`` FLOPs each at the rate one SM
    sustains when all are busy (``rate_tflops``, the configuration's speed measured at an
    aligned size, over the SMs). Partial tiles at the edges cost a whole tile."""
    bm, bn = tile_of(key)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    per_sm = rate_tflops * 1e12 / sm_count
    return math.ceil(tiles / sm_count) * 2.0 * bm * bn * k / per_sm * 1e3


def choose(m: int, n: int, k: int, sm_count: int, rates: Mapping[str, float]) -> str:
    """Step 9's configuration for M x N x K: the candidate the wave model predicts fastest
    (``rates``: each candidate's TFLOP/s at :data:`RATE_N`; ties go to the larger tile)."""
    missing = [c for c in CANDIDATES if not rates.get(c)]
    if missing:
        raise ValueError(f"no rate for {', '.join(missing)}: measure them at N = {RATE_N}")
    return min(CANDIDATES,
               key=lambda c: (predicted_ms(c, m, n, k, sm_count, rates[c]), CANDIDATES.index(c)))
