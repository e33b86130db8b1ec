// Tiled product that stores the tile of A transposed: As[k][i] holds A[i][t + k].
// The store As[tx][ty] walks down a column of the shared array: the 32 threads of a
// warp (consecutive tx) write words TILE apart, which all fall in one bank when TILE is
// 32. Define PAD as 1 to give each row one extra word and spread them over 32 banks.
#ifndef TILE
#define TILE 32
#endif
#ifndef PAD
#define PAD 0
#endif

__global__ void matmul_tiled_at(const float* __restrict__ A, const float* __restrict__ B,
                                float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE + PAD];  // As[k][i]: A's tile, transposed
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[k][ty] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
