"""Kernels that place the speed gates: correct ones that must pass, lesson-skipping ones
that must fail.

A gate placed from the reference solution alone cannot know how fast other correct
kernels are (a source article's tiled kernel with both tiles padded runs slower than the
course's). So each exercise lists its variants, every one correct and written under the
exercise's kernel name, signature and launch: ``must="pass"`` (the reference, other tile
shapes, padding, other loop forms, the source articles' kernels adapted to M x N x K) and
``must="fail"`` (the baseline resubmitted, the uncoalesced walk). ``tilelab calibrate``
times them all on the grading GPU and places each gate between the slowest must-pass and
the fastest must-fail (:mod:`tilelab.experiments.calibration`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, slow_but_right


@dataclass(frozen=True)
class Variant:
    """One kernel for one exercise, and whether the speed gate must pass it."""

    exercise: str
    key: str
    label: str
    must: str  # "pass" or "fail"
    origin: str
    make: Callable[[], str]

    def source(self) -> str:
        return self.make()


def only_kernel(source: str, name: str) -> str:
    """``source`` with only the kernel ``name`` kept (with the file's head: #defines)."""
    found = [(source.rfind("\n\n", 0, m.start()) + 2, m.group(1))
             for m in re.finditer(r"__global__ void (\w+)\(", source)]
    if len(found) <= 1:
        return source
    ends = [b for b, _ in found[1:]] + [len(source)]
    mine = next(source[b:e] for (b, n), e in zip(found, ends, strict=True) if n == name)
    return source[: found[0][0]] + mine


def renamed(key: str, name: str) -> str:
    """The course kernel ``key``, alone, under the kernel name ``name``."""
    ref = KERNELS[key]
    return re.sub(rf"\b{ref.name}\b", name, only_kernel(ref.source(), ref.name))


_NAIVE_UNROLLED = """\
// The naive kernel with its k loop unrolled by hand, four terms at a time.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4)
        acc += A[row * K + k] * B[k * N + col] + A[row * K + k + 1] * B[(k + 1) * N + col]
             + A[row * K + k + 2] * B[(k + 2) * N + col]
             + A[row * K + k + 3] * B[(k + 3) * N + col];
    for (; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
"""

_NAIVE_POINTERS = """\
// The naive kernel walking a row of A and a column of B with pointers.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        const float* a = A + row * K;
        const float* b = B + col;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k, b += N)
            acc += a[k] * *b;
        C[row * N + col] = acc;
    }
}
"""

_SEED_NAIVE = """\
// matmulNaive from the source article "Shared memory and tiling: the key to fast matrix
// operations", adapted from N x N to M x N x K.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;

    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++) {
            sum += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = sum;
    }
}
"""

_SEED_OPTIMIZED = """\
// matmulOptimized from the source article "Shared memory and tiling: the key to fast
// matrix operations" (both tiles padded [TILE][TILE + 1], #pragma unroll), adapted from
// N x N to M x N x K.
#define TILE 32
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float sA[TILE][TILE + 1];
    __shared__ float sB[TILE][TILE + 1];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;

    int numTiles = (K + TILE - 1) / TILE;

    for (int t = 0; t < numTiles; t++) {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;

        sA[threadIdx.y][threadIdx.x] = (row < M && aCol < K)
            ? A[row * K + aCol] : 0.0f;
        sB[threadIdx.y][threadIdx.x] = (bRow < K && col < N)
            ? B[bRow * N + col] : 0.0f;

        __syncthreads();

        #pragma unroll
        for (int k = 0; k < TILE; k++) {
            sum += sA[threadIdx.y][k] * sB[k][threadIdx.x];
        }

        __syncthreads();
    }

    if (row < M && col < N) {
        C[row * N + col] = sum;
    }
}
"""

_SEED_SIMPLE = """\
// matmul_optimized_simple from the source article "GPUs Are Lazy", adapted from N x N
// (which it assumed a multiple of the tile) to M x N x K with zero-filled edges.
#define TILE_WIDTH 32
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float ds_A[TILE_WIDTH][TILE_WIDTH];
    __shared__ float ds_B[TILE_WIDTH][TILE_WIDTH];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE_WIDTH + ty;
    int col = blockIdx.x * TILE_WIDTH + tx;
    float p_value = 0;
    for (int m = 0; m < (K + TILE_WIDTH - 1) / TILE_WIDTH; ++m) {
        int a = m * TILE_WIDTH + tx, b = m * TILE_WIDTH + ty;
        ds_A[ty][tx] = (row < M && a < K) ? A[row * K + a] : 0.0f;
        ds_B[ty][tx] = (b < K && col < N) ? B[b * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k)
            p_value += ds_A[ty][k] * ds_B[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = p_value;
}
"""

_TILED_K16 = """\
// 32 x 32 threads, each computing one element of C, but the K dimension is walked in
// tiles of 16: a 32 x 16 tile of A and a 16 x 32 tile of B per phase.
#define TILE 32
#define TK 16
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TK];
    __shared__ float Bs[TK][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TK) {
        if (tx < TK) As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        if (ty < TK) Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TK; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
"""

_TRANSPOSE_SWIZZLED = """\
// Through a 32 x 32 tile without padding: column c of row r is stored at c ^ r (an XOR
// swizzle), so a warp's row write and its column read both touch 32 different banks.
#define TILE_DIM 32
#define BLOCK_ROWS 8
__global__ void NAME(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x ^ (threadIdx.y + j)] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][(threadIdx.y + j) ^ threadIdx.x];
}
"""

_REGBLOCK_NAIVE = """\
// Sixteen elements of C per thread, as the launch asks (rows ty + 16 i, columns tx + 16 j),
// each a dot product read straight from global memory: no tile, no registers reused.
__global__ void matmul_regblock(const float* A, const float* B, float* C, int M, int N, int K)
{
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            int row = blockIdx.y * 64 + threadIdx.y + 16 * i;
            int col = blockIdx.x * 64 + threadIdx.x + 16 * j;
            if (row < M && col < N) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k)
                    acc += A[row * K + k] * B[k * N + col];
                C[row * N + col] = acc;
            }
        }
}
"""


def _edited(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"variant edit does not apply: {old!r}")
    return source.replace(old, new)


def _v(exercise: str, key: str, label: str, must: str, origin: str,
       make: Callable[[], str]) -> Variant:
    return Variant(exercise, key, label, must, origin, make)


_VARIANTS: tuple[Variant, ...] = (
    _v("naive", "reference", "reference (16x16, x along columns)", "pass", "course",
       lambda: KERNELS["naive"].source()),
    _v("naive", "unrolled", "k loop unrolled by 4", "pass", "course",
       lambda: _NAIVE_UNROLLED),
    _v("naive", "pointers", "row and column walked with pointers", "pass", "course",
       lambda: _NAIVE_POINTERS),
    _v("naive", "seed_naive", "matmulNaive, adapted to M x N x K", "pass",
       "source article: Shared memory and tiling, the key to fast matrix operations",
       lambda: _SEED_NAIVE),
    _v("naive", "tiled16", "tiled through shared memory, TILE 16", "pass", "course",
       lambda: renamed("tiled16", "matmul_naive")),
    _v("naive", "xrow", "baseline resubmitted: threadIdx.x along rows (uncoalesced)", "fail",
       "course", lambda: slow_but_right("naive")),
    _v("tiled", "reference", "reference (TILE 32)", "pass", "course",
       lambda: KERNELS["tiled32"].source()),
    _v("tiled", "k16", "K walked in tiles of 16", "pass", "course", lambda: _TILED_K16),
    _v("tiled", "seed_padded", "both tiles padded [32][33] (matmulOptimized, adapted)", "pass",
       "source article: Shared memory and tiling, the key to fast matrix operations",
       lambda: _SEED_OPTIMIZED),
    _v("tiled", "seed_simple", "matmul_optimized_simple, adapted with zero-filled edges",
       "pass", "source article: GPUs Are Lazy", lambda: _SEED_SIMPLE),
    _v("tiled", "at_padded", "A's tile stored transposed, padded", "pass", "course",
       lambda: renamed("tiled32_at_padded", "matmul_tiled")),
    _v("tiled", "naive", "baseline resubmitted: the naive kernel (no tiles)", "fail", "course",
       lambda: slow_but_right("tiled")),
    _v("tiled", "naive_xrow", "the naive kernel, threadIdx.x along rows (uncoalesced)", "fail",
       "course", lambda: slow_but_right("naive").replace("matmul_naive", "matmul_tiled")),
    _v("transpose_shared", "reference", "reference ([32][32] tile)", "pass", "course",
       lambda: only_kernel(KERNELS["transpose_shared"].source(), "transpose_shared")),
    _v("transpose_shared", "padded", "padded [32][33] tile", "pass", "course",
       lambda: renamed("transpose_padded", "transpose_shared")),
    _v("transpose_shared", "swizzled", "XOR-swizzled [32][32] tile", "pass", "course",
       lambda: _TRANSPOSE_SWIZZLED.replace("NAME", "transpose_shared")),
    _v("transpose_shared", "naive", "baseline resubmitted: strided writes", "fail", "course",
       lambda: slow_but_right("transpose_shared")),
    _v("transpose_shared", "strided_reads", "no tile: strided reads, coalesced writes", "fail",
       "course", lambda: renamed("transpose_reads", "transpose_shared")),
    _v("transpose_padded", "reference", "reference (padded [32][33] tile)", "pass", "course",
       lambda: only_kernel(KERNELS["transpose_padded"].source(), "transpose_padded")),
    _v("transpose_padded", "swizzled", "XOR-swizzled [32][32] tile", "pass", "course",
       lambda: _TRANSPOSE_SWIZZLED.replace("NAME", "transpose_padded")),
    _v("transpose_padded", "unpadded", "baseline resubmitted: the [32][32] tile", "fail",
       "course", lambda: slow_but_right("transpose_padded")),
    _v("transpose_padded", "naive", "no tile: strided writes", "fail", "course",
       lambda: renamed("transpose_naive", "transpose_padded")),
    _v("matmul_at_padded", "reference", "reference (A's tile transposed, [32][33])", "pass",
       "course", lambda: KERNELS["tiled32_at_padded"].source()),
    _v("matmul_at_padded", "untransposed", "A's tile not transposed (the textbook kernel)",
       "pass", "course", lambda: renamed("tiled32", "matmul_tiled_at")),
    _v("matmul_at_padded", "both_padded", "A's tile not transposed, both tiles padded",
       "pass", "course", lambda: renamed("tiled32_padded", "matmul_tiled_at")),
    _v("matmul_at_padded", "unpadded", "baseline resubmitted: A's tile transposed, [32][32]",
       "fail", "course", lambda: slow_but_right("matmul_at_padded")),
    _v("matmul_at_padded", "naive", "the naive kernel (no tiles)", "fail", "course",
       lambda: renamed("naive", "matmul_tiled_at")),
    _v("regblock", "reference", "reference (64x64x16 tile, 4x4 per thread)", "pass", "course",
       lambda: KERNELS["regblock64"].source()),
    _v("regblock", "bk8", "K walked 8 at a time (64x64x8 tile)", "pass", "course",
       lambda: _edited(KERNELS["regblock64"].source(), "#define BK 16", "#define BK 8")),
    _v("regblock", "subtiles", "baseline resubmitted: the tiled kernel, 16x16 sub-tiles",
       "fail", "course", lambda: slow_but_right("regblock")),
    _v("regblock", "naive", "16 naive dot products per thread (no tiles)", "fail", "course",
       lambda: _REGBLOCK_NAIVE),
    _v("regblock_1d", "reference", "reference (64x64x8 tile, 8 per thread)", "pass", "course",
       lambda: KERNELS["regblock_1d"].source()),
    _v("regblock_1d", "bk16", "K walked 16 at a time (64x64x16 tile)", "pass", "course",
       lambda: _edited(KERNELS["regblock_1d"].source(), "#define BK 8", "#define BK 16")),
    _v("regblock_1d", "global", "baseline skipped: 8 dot products per thread from global "
       "memory (no tiles)", "fail", "course", lambda: slow_but_right("regblock_1d")),
)

#: the variants of every step with a speed gate (a correctness-only step has none)
VARIANTS: dict[str, tuple[Variant, ...]] = {
    e.id: tuple(v for v in _VARIANTS if v.exercise == e.id)
    for e in exercises.EXERCISES.values() if e.speed_graded
}
