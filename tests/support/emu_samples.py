"""Reference kernels the emulator's tests and benchmark share (and learners may read)."""

from __future__ import annotations

TILE = 16

# The textbook shared-memory tiled matrix multiply, C (MxN) = A (MxK) @ B (KxN), with
# bounds checks so any shape works. Launch with block=(TILE, TILE) and
# grid=(ceil(N / TILE), ceil(M / TILE)).
TILED_MATMUL = r"""
#define TILE 16
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int a_col = t * TILE + tx, b_row = t * TILE + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;  // store A tile
        Bs[ty][tx] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;  // store B tile
        __syncthreads();  // barrier 1: the tiles are complete
        #pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];  // use the tiles
        __syncthreads();  // barrier 2: everyone is done with the tiles
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
"""


def without_barrier(source: str, which: int) -> str:
    """``source`` with its ``which``-th (1-based) ``__syncthreads();`` removed, lines kept."""
    parts = source.split("__syncthreads();")
    if not 1 <= which < len(parts):
        raise ValueError(f"no barrier #{which}")
    out = parts[0]
    for i, part in enumerate(parts[1:], start=1):
        out += ("" if i == which else "__syncthreads();") + part
    return out


def line_of(source: str, marker: str) -> int:
    """The 1-based line of ``source`` containing ``marker``."""
    for n, text in enumerate(source.split("\n"), start=1):
        if marker in text:
            return n
    raise ValueError(f"{marker!r} not found")
