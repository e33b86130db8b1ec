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


# A block sum by warp shuffles (each warp reduces its 32 values, warp 0 the warps' sums),
# accumulated with atomicAdd. Launch with 256 threads per block.
WARP_REDUCE = r"""
__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

__global__ void shuffle_reduce(const float* x, float* out, int n)
{
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(i < n ? x[i] : 0.0f);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < blockDim.x / 32 ? partial[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, v);
    }
}
"""

# C = A @ B for N a multiple of 64: a 64x64 tile per block of 16x16 threads, 4x4 outputs per
# thread (register blocking), float4 loads from global and shared memory.
REGBLOCK_MATMUL = r"""
#define BM 64
#define BN 64
#define BK 16
__global__ void matmul_regblock(const float* A, const float* B, float* C, int N)
{
    __shared__ __align__(16) float As[BK][BM];  // A's tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {{0.0f}};
    for (int k0 = 0; k0 < N; k0 += BK) {
        int ar = tid / 4, ac = (tid % 4) * 4;
        float4 a = *reinterpret_cast<const float4*>(&A[(row0 + ar) * N + k0 + ac]);
        As[ac + 0][ar] = a.x;
        As[ac + 1][ar] = a.y;
        As[ac + 2][ar] = a.z;
        As[ac + 3][ar] = a.w;
        int br = tid / 16, bc = (tid % 16) * 4;
        *reinterpret_cast<float4*>(&Bs[br][bc]) =
            *reinterpret_cast<const float4*>(&B[(k0 + br) * N + col0 + bc]);
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            float4 av = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            float4 bv = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            float ar4[4] = {av.x, av.y, av.z, av.w}, br4[4] = {bv.x, bv.y, bv.z, bv.w};
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += ar4[i] * br4[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(&C[(row0 + ty * 4 + i) * N + col0 + tx * 4]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
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
