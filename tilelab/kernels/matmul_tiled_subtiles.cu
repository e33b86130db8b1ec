// The tiled kernel of chapter 3 (TILE 16) resubmitted for exercise 4's launch: a block of
// 16 x 16 threads that must cover a 64 x 64 tile of C computes it as 16 separate
// 16 x 16 tiles, one after the other, each the textbook way (one output per thread, two
// shared loads per FMA). Correct, but with no register blocking: the speed gate of
// exercise 4 must fail it.
#define TILE 16
#define SUB 4  // 64 / TILE sub-tiles along each side

__global__ void matmul_regblock(const float* __restrict__ A, const float* __restrict__ B,
                                float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    for (int sub = 0; sub < SUB * SUB; ++sub) {
        int row = blockIdx.y * TILE * SUB + (sub / SUB) * TILE + ty;
        int col = blockIdx.x * TILE * SUB + (sub % SUB) * TILE + tx;
        float acc = 0.0f;
        for (int t = 0; t < K; t += TILE) {
            As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
            Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
            __syncthreads();
#pragma unroll
            for (int k = 0; k < TILE; ++k)
                acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
        if (row < M && col < N)
            C[row * N + col] = acc;
    }
}
