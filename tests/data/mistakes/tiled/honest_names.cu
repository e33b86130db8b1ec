// Tiled matrix product through shared memory. A block of TILE x TILE threads computes a
// TILE x TILE tile of C; it walks the K dimension one tile at a time, staging a tile of
// A and a tile of B in shared memory so that each value read from global memory is
// used TILE times. Out-of-range elements are loaded as zeros, so any M, N, K work.
#ifndef TILE
#define TILE 32
#endif

__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();  // 1: the whole tile is loaded before anyone reads it

#pragma unroll
        for (int kk = 0; kk < TILE; ++kk)
            sum += As[ty][kk] * Bs[kk][tx];
        __syncthreads();  // 2: everyone is done reading before the next tile overwrites it
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
