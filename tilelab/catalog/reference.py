"""The course's reference kernels (``tilelab/kernels/*.cu``), named and ready to launch."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from tilelab.catalog.problems import (
    ADD2D,
    BLOCK_1D,
    BLOCK_SUM,
    COPY,
    FIRST_TILE,
    MATMUL,
    ONE,
    STENCIL,
    TILE_PAIR,
    TRANSPOSE,
    Launch,
    Problem,
)


def kernel_file(name: str) -> str:
    """The text of a shipped ``.cu`` file."""
    return resources.files("tilelab").joinpath("kernels", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class KernelRef:
    """A reference kernel: where its source is, its name, launch geometry and problem."""

    key: str
    file: str
    name: str
    problem: Problem
    launch: Launch
    label: str
    defines: tuple[tuple[str, str], ...] = ()

    def source(self) -> str:
        """The kernel file with its tunables set: each ``#define NAME default`` line of the
        file's defaults is rewritten in place, so every line keeps its number in the file
        (the line numbers the emulator, nvcc and compute-sanitizer report are the file's)."""
        text = kernel_file(self.file)
        for name, value in self.defines:
            pattern = re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{name})[ \t]+\S.*$", re.M)
            if len(pattern.findall(text)) != 1:
                raise ValueError(
                    f"{self.file} must define {name} with a default exactly once "
                    f"(#ifndef {name} / #define {name} ... / #endif) for {self.key} to set it"
                )
            text = pattern.sub(lambda m, v=value: f"{m.group(1)} {v}", text)
        return text


def _sq(b: int) -> Launch:
    return Launch(block=(b, b, 1), grid_dims=("N", "M"), tile=(b, b))


_LINE = Launch(block=(BLOCK_1D, 1, 1), grid_dims=("n", ONE), tile=(BLOCK_1D, 1))

_T32x8 = Launch(block=(32, 8, 1), grid_dims=("cols", "rows"), tile=(32, 32))

_WARPTILE = (("BM", "128"), ("BN", "128"), ("BK", "16"), ("WM", "64"), ("WN", "32"),
             ("WNITER", "2"), ("TM", "4"), ("TN", "4"))

KERNELS: dict[str, KernelRef] = {
    k.key: k
    for k in (
        KernelRef(
            "naive",
            "matmul_naive.cu",
            "matmul_naive",
            MATMUL,
            _sq(16),
            "naive, threadIdx.x along columns (coalesced)",
        ),
        KernelRef(
            "naive_xrow",
            "matmul_naive_xrow.cu",
            "matmul_naive_xrow",
            MATMUL,
            Launch(block=(16, 16, 1), grid_dims=("M", "N"), tile=(16, 16)),
            "naive, threadIdx.x along rows (uncoalesced)",
        ),
        KernelRef(
            "tiled16",
            "matmul_tiled.cu",
            "matmul_tiled",
            MATMUL,
            _sq(16),
            "tiled, TILE 16",
            (("TILE", "16"),),
        ),
        KernelRef(
            "tiled32",
            "matmul_tiled.cu",
            "matmul_tiled",
            MATMUL,
            _sq(32),
            "tiled, TILE 32",
            (("TILE", "32"),),
        ),
        KernelRef(
            "tiled32_padded",
            "matmul_tiled_padded.cu",
            "matmul_tiled_padded",
            MATMUL,
            _sq(32),
            "tiled 32, both tiles padded [32][33]",
            (("TILE", "32"),),
        ),
        KernelRef(
            "tiled32_at",
            "matmul_tiled_at.cu",
            "matmul_tiled_at",
            MATMUL,
            _sq(32),
            "tiled 32, A tile stored transposed [32][32]",
            (("TILE", "32"), ("PAD", "0")),
        ),
        KernelRef(
            "tiled32_at_padded",
            "matmul_tiled_at.cu",
            "matmul_tiled_at",
            MATMUL,
            _sq(32),
            "tiled 32, A tile transposed, padded [32][33]",
            (("TILE", "32"), ("PAD", "1")),
        ),
        # The road to cuBLAS (book/06-cublas): register blocking and what follows it.
        KernelRef(
            "regblock_1d",
            "sgemm_01_regblock_1d.cu",
            "matmul_regblock_1d",
            MATMUL,
            Launch(block=(64, 8, 1), grid_dims=("N", "M"), tile=(64, 64)),
            "1-D register blocking, 64x64x8 tile, 8 outputs per thread",
            (("BM", "64"), ("BN", "64"), ("BK", "8"), ("TM", "8")),
        ),
        KernelRef(
            "regblock",
            "sgemm_02_regblock_2d.cu",
            "matmul_regblock",
            MATMUL,
            Launch(block=(16, 16, 1), grid_dims=("N", "M"), tile=(128, 128)),
            "2-D register blocking, 128x128x8 tile, 8x8 outputs per thread",
            (("BM", "128"), ("BN", "128"), ("BK", "8"), ("TM", "8"), ("TN", "8")),
        ),
        KernelRef(
            "regblock64",
            "sgemm_02_regblock_2d.cu",
            "matmul_regblock",
            MATMUL,
            Launch(block=(16, 16, 1), grid_dims=("N", "M"), tile=(64, 64)),
            "2-D register blocking, 64x64x16 tile, 4x4 outputs per thread",
            (("BM", "64"), ("BN", "64"), ("BK", "16"), ("TM", "4"), ("TN", "4")),
        ),
        KernelRef(
            "vec4",
            "sgemm_03_vectorized.cu",
            "matmul_vec4",
            MATMUL,
            Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(128, 128)),
            "float4 loads, A tile transposed, 128x128x8, 8x8 per thread",
            (("BM", "128"), ("BN", "128"), ("BK", "8"), ("TM", "8"), ("TN", "8")),
        ),
        KernelRef(
            "warptile",
            "sgemm_04_warptile.cu",
            "matmul_warptile",
            MATMUL,
            Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(128, 128)),
            "warp tiling, 128x128x16, warp 64x32, 2x2 sub-tiles of 4x4 per thread",
            _WARPTILE,
        ),
        KernelRef(
            "dbuf",
            "sgemm_05_double_buffer.cu",
            "matmul_dbuf",
            MATMUL,
            Launch(block=(256, 1, 1), grid_dims=("N", "M"), tile=(128, 128)),
            "double buffering, 128x128x16, warp 64x32, 2x2 sub-tiles of 4x4 per thread",
            (*_WARPTILE, ("MINB", "2")),
        ),
        # The small steps before and between the course's kernels (one idea each).
        KernelRef("add2d", "step_add2d.cu", "add2d", ADD2D, _sq(16),
                  "2-D elementwise add, one thread per element"),
        KernelRef("block_sum", "step_block_sum.cu", "block_sum", BLOCK_SUM, _LINE,
                  "block reduction in shared memory, 256 threads"),
        KernelRef("stencil", "step_stencil.cu", "stencil", STENCIL, _LINE,
                  "5-point 1-D stencil, halo staged in shared memory"),
        KernelRef("tile_pair", "step_tile_pair.cu", "tile_pair", TILE_PAIR, _sq(32),
                  "tiled multiply, stage 1: one tile pair loaded"),
        KernelRef("first_tile", "step_first_tile.cu", "first_tile", FIRST_TILE, _sq(32),
                  "tiled multiply, stage 2: the partial product of one tile"),
        KernelRef("tiled_loop", "step_tiled_loop.cu", "matmul_tiled_loop", MATMUL, _sq(32),
                  "tiled multiply, stage 3: the loop over whole tiles"),
        KernelRef(
            "copy", "transpose.cu", "copy_tile", COPY, _T32x8, "copy (same traffic, no transpose)"
        ),
        KernelRef(
            "transpose_naive",
            "transpose.cu",
            "transpose_naive",
            TRANSPOSE,
            _T32x8,
            "naive transpose (strided writes)",
        ),
        KernelRef(
            "transpose_reads",
            "transpose.cu",
            "transpose_reads",
            TRANSPOSE,
            _T32x8,
            "the other naive transpose (strided reads, coalesced writes)",
        ),
        KernelRef(
            "transpose_shared",
            "transpose.cu",
            "transpose_shared",
            TRANSPOSE,
            _T32x8,
            "transpose through a [32][32] shared tile",
        ),
        KernelRef(
            "transpose_padded",
            "transpose.cu",
            "transpose_padded",
            TRANSPOSE,
            _T32x8,
            "transpose through a padded [32][33] shared tile",
        ),
    )
}


BARRIER_MARKS = {1: "__syncthreads();  // 1:", 2: "__syncthreads();  // 2:"}


def tiled_without_barrier(which: int, tile: int = 32) -> str:
    """The reference tiled kernel with its first or second ``__syncthreads()`` removed.

    The line stays (as a comment), so line numbers in reports match the full kernel.
    """
    src = KERNELS[f"tiled{tile}"].source()
    mark = BARRIER_MARKS[which]
    if mark not in src:
        raise ValueError(f"barrier {which} not found in the reference tiled kernel")
    return src.replace(mark, "/* barrier removed */ //")


_REGBLOCK_1D_GLOBAL = """\
// Eight elements of one column of C per thread, as the 1-D launch asks (rows ty + 8 i),
// each a dot product read straight from global memory: no tile, no register reused.
__global__ void matmul_regblock_1d(const float* A, const float* B, float* C, int M, int N,
                                   int K)
{
    int col = blockIdx.x * 64 + threadIdx.x;
    for (int i = 0; i < 8; ++i) {
        int row = blockIdx.y * 64 + threadIdx.y + 8 * i;
        if (row < M && col < N) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k)
                acc += A[row * K + k] * B[k * N + col];
            C[row * N + col] = acc;
        }
    }
}
"""


def slow_but_right(exercise_id: str) -> str:
    """A correct kernel for the exercise, under its name and launch, that skips the
    exercise's lesson: the speed gate must fail it. naive: threadIdx.x walks rows
    (uncoalesced); tiled: the naive kernel (untiled); the padded ones: unpadded;
    regblock: the tiled kernel, one 16x16 sub-tile at a time (no register blocking);
    regblock_1d: eight dot products per thread straight from global memory."""
    if exercise_id == "naive":
        return (
            KERNELS["naive_xrow"].source()
            .replace("matmul_naive_xrow", "matmul_naive")
            .replace("int row = blockIdx.x * blockDim.x + threadIdx.x;",
                     "int row = blockIdx.y * blockDim.y + threadIdx.x;")
            .replace("int col = blockIdx.y * blockDim.y + threadIdx.y;",
                     "int col = blockIdx.x * blockDim.x + threadIdx.y;")
        )
    if exercise_id == "tiled":
        return KERNELS["naive"].source().replace("matmul_naive", "matmul_tiled")
    if exercise_id == "transpose_shared":
        return (
            KERNELS["transpose_naive"].source()
            .replace("transpose_shared", "transpose_unused")
            .replace("transpose_naive", "transpose_shared")
        )
    if exercise_id == "transpose_padded":
        return (
            KERNELS["transpose_shared"].source()
            .replace("transpose_padded", "transpose_unused")
            .replace("transpose_shared", "transpose_padded")
        )
    if exercise_id == "matmul_at_padded":
        return KERNELS["tiled32_at"].source()
    if exercise_id == "regblock":
        return kernel_file("matmul_tiled_subtiles.cu")
    if exercise_id == "regblock_1d":
        return _REGBLOCK_1D_GLOBAL
    raise KeyError(f"no slow-but-right kernel for {exercise_id!r}")
