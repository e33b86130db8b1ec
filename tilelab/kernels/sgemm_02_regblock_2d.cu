// Step 2 of the road to cuBLAS: 2-D register blocking (a micro-tile of C per thread).
// What it adds to step 1: each thread computes a TM x TN micro-tile of C. For every k it
// loads TM values of A's tile and TN values of B's tile into registers and does all
// TM * TN multiply-adds between them (an outer product): (TM + TN) shared loads for
// TM * TN FMAs, 16 loads for 64 FMAs at 8 x 8. A block of (BN / TN) x (BM / TM) threads
// covers a BM x BN tile of C, so each float read from global memory is used BM or BN
// times. The cost is registers: TM * TN accumulators plus TM + TN operands per thread.
// Thread (tx, ty) owns rows ty + i * (BM / TM) and columns tx + j * (BN / TN): a warp
// reads consecutive columns of B's tile (no bank conflicts) and stores consecutive
// columns of C (coalesced). Any M, N, K: out-of-range elements are zeros, never stored.
// Exercise 4 asks for this kernel at BM = BN = 64, BK = 16, TM = TN = 4.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef MINB
#define MINB 1  // blocks per SM the compiler must leave registers for
#endif
#define ROWS (BM / TM)        // threads along y
#define COLS (BN / TN)        // threads along x
#define NT (ROWS * COLS)      // threads per block
#if (BM * BK) % NT != 0 || (BK * BN) % NT != 0
#error "the tiles must split evenly over the threads"
#endif

__launch_bounds__(NT, MINB)  // NT threads per block, MINB blocks per SM: registers to fit
__global__ void matmul_regblock(const float* __restrict__ A, const float* __restrict__ B,
                                float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * COLS + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;
    float a[TM], b[TN];

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
#pragma unroll
            for (int i = 0; i < TM; ++i)
                a[i] = As[ty + i * ROWS][k];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][tx + j * COLS];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];  // TM * TN FMAs on TM + TN loaded values
        }
        __syncthreads();  // everyone is done before the tiles are overwritten
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int row = row0 + ty + i * ROWS;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int col = col0 + tx + j * COLS;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
    }
}
