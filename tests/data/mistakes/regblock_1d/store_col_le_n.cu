// Step 1 of the road to cuBLAS: 1-D register blocking.
// What it adds to the tiled kernel: each thread computes TM elements of one column of C
// instead of one. A block of BN x (BM / TM) threads covers a BM x BN tile of C and walks K
// in steps of BK. For every k, a thread reads one value of B's tile into a register and
// uses it TM times, against TM values of A's tile (the same for the whole warp: a
// broadcast). Shared loads per FMA fall from 2 to 1 + 1/TM, and each block's tile is
// larger, so every float read from global memory is used more often.
// Rows of a thread are strided by BM / TM so that a warp (one value of threadIdx.y)
// reads one row of A's tile and 32 consecutive columns of B's tile: no bank conflicts.
// Out-of-range elements are loaded as zeros and never stored: any M, N, K work.
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#define ROWS (BM / TM)        // threads along y
#define NT (BN * ROWS)        // threads per block
#if (BM * BK) % NT != 0 || (BK * BN) % NT != 0
#error "the tiles must split evenly over the threads"
#endif

__global__ void __launch_bounds__(NT)
matmul_regblock_1d(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * BN + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
        acc[i] = 0.0f;

    for (int t = 0; t < K; t += BK) {
#pragma unroll
        for (int s = 0; s < BM * BK / NT; ++s) {  // A's tile, BM x BK
            int e = tid + s * NT, r = e / BK, c = e % BK;
            As[r][c] = (row0 + r < M && t + c < K) ? A[(row0 + r) * K + t + c] : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < BK * BN / NT; ++s) {  // B's tile, BK x BN
            int e = tid + s * NT, r = e / BN, c = e % BN;
            Bs[r][c] = (t + r < K && col0 + c < N) ? B[(t + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();  // the tiles are complete

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float b = Bs[k][tx];  // one shared load, used TM times
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] += As[ty + i * ROWS][k] * b;
        }
        __syncthreads();  // everyone is done before the tiles are overwritten
    }
    const int col = col0 + tx;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int row = row0 + ty + i * ROWS;
        if (row < M && col <= N)
            C[row * N + col] = acc[i];
    }
}
