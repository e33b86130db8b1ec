// Step 4 of the road to cuBLAS: warp tiling.
// What it adds to step 3: a level of tiling between the block and the thread. Each warp
// owns a WM x WN tile of the block's tile of C, and its 32 threads tile that warp tile
// with WMITER x WNITER sub-tiles of TM x TN per thread. The micro-tile of a thread is no
// longer one contiguous block but WMITER x WNITER blocks of TM x TN, spaced so that for
// each k the warp's LDS.128 loads read one contiguous run of A's tile and one of B's:
// 8 x 16 bytes of A and 4 x 16 bytes of B with the defaults, all in different banks or
// broadcast. In step 3, the 16 threads of a row of the block read B's tile 32 bytes
// apart, a 2-way bank conflict on every load of B. The warp's footprint in C is also
// compact (WM x WN), so its loads hit fewer shared-memory lines.
// Any M, N, K: as in step 3, the wide path only where K and N are multiples of 4.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef WNITER
#define WNITER 2
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define NT ((BM / WM) * (BN / WN) * 32)               // threads per block
#define WMITER ((WM * WN) / (32 * TM * TN * WNITER))  // sub-tiles along M per thread
#define WSUBM (WM / WMITER)
#define WSUBN (WN / WNITER)
#if (BM * BK / 4) % NT != 0 || (BK * BN / 4) % NT != 0 || TM % 4 != 0 || TN % 4 != 0
#error "the tiles must split evenly into float4 loads over the threads"
#endif
#if (WSUBM / TM) * (WSUBN / TN) != 32 || BM % WM != 0 || BN % WN != 0
#error "a warp's sub-tile must hold exactly 32 micro-tiles"
#endif

// Four consecutive floats X[r][c..c+3] of a rows x cols matrix; zeros outside it.
__device__ __forceinline__ float4 load4(const float* __restrict__ X, int r, int c,
                                        int rows, int cols, bool wide)
{
    if (wide && r < rows && c + 3 < cols)
        return *reinterpret_cast<const float4*>(&X[r * cols + c]);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows) {
        if (c < cols) v.x = X[r * cols + c];
        if (c + 1 < cols) v.y = X[r * cols + c + 1];
        if (c + 2 < cols) v.z = X[r * cols + c + 2];
        if (c + 3 < cols) v.w = X[r * cols + c + 3];
    }
    return v;
}

// Stores v into X[r][c..c+3], only the elements inside the matrix.
__device__ __forceinline__ void store4(float* __restrict__ X, int r, int c, int rows,
                                       int cols, bool wide, float4 v)
{
    if (r >= rows)
        return;
    if (wide && c + 3 < cols) {
        *reinterpret_cast<float4*>(&X[r * cols + c]) = v;
        return;
    }
    if (c < cols) X[r * cols + c] = v.x;
    if (c + 1 < cols) X[r * cols + c + 1] = v.y;
    if (c + 2 < cols) X[r * cols + c + 2] = v.z;
    if (c + 3 < cols) X[r * cols + c + 3] = v.w;
}

__global__ void __launch_bounds__(NT)
matmul_warptile(const float* __restrict__ A, const float* __restrict__ B,
                float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[m][k]
    __shared__ __align__(16) float Bs[BK][BN];

    // [core-begin]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wRow = (warp / (BN / WN)) * WM, wCol = (warp % (BN / WN)) * WN;
    const int tRow = (lane / (WSUBN / TN)) * TM, tCol = (lane % (WSUBN / TN)) * TN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool wide = ((K | N) & 3) == 0
        && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)
             | reinterpret_cast<size_t>(C)) & 15) == 0;
    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
            acc[i][j] = 0.0f;
    float a[WMITER * TM], b[WNITER * TN];

    for (int t = 0; t < K; t += BK) {
#pragma unroll
        for (int s = 0; s < BM * BK / 4 / NT; ++s) {
            int e = tid + s * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;
            float4 v = load4(A, row0 + r, t + c, M, K, wide);
            As[c][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
#pragma unroll
        for (int s = 0; s < BK * BN / 4 / NT; ++s) {
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = load4(B, t + r, col0 + c, K, N, wide);
        }
        __syncthreads();  // the tiles are complete

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    float4 v = *reinterpret_cast<const float4*>(
                        &As[k][wRow + wm * WSUBM + tRow + i]);
                    a[wm * TM + i] = v.x; a[wm * TM + i + 1] = v.y;
                    a[wm * TM + i + 2] = v.z; a[wm * TM + i + 3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    float4 v = *reinterpret_cast<const float4*>(
                        &Bs[k][wCol + wn * WSUBN + tCol + j]);
                    b[wn * TN + j] = v.x; b[wn * TN + j + 1] = v.y;
                    b[wn * TN + j + 2] = v.z; b[wn * TN + j + 3] = v.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // everyone is done before the tiles are overwritten
    }
    // [core-end]
#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    float* c = &acc[wm * TM + i][wn * TN + j];
                    store4(C, row0 + wRow + wm * WSUBM + tRow + i,
                           col0 + wCol + wn * WSUBN + tCol + j, M, N, wide,
                           make_float4(c[0], c[1], c[2], c[3]));
                }
}
