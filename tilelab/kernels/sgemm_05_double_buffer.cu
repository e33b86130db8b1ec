// Step 5 of the road to cuBLAS: double buffering (software pipelining).
// What it adds to step 4: two copies of each shared tile. While the block computes on
// one copy, each thread has already issued the global loads of the next tile into
// registers; it stores them into the other copy after its FMAs, and one barrier per
// tile (instead of two) hands the copies over. The long latency of global memory is
// hidden behind the BK * 64 FMAs of the current tile instead of being waited out at a
// barrier, at the price of twice the shared memory and the registers that hold the
// next tile in flight.
// Why one barrier is enough: in iteration t every thread reads copy t % 2 and writes
// copy (t + 1) % 2; the barrier at the end of iteration t - 1 guarantees that nobody
// still reads copy (t + 1) % 2 from iteration t - 1, and the barrier at the end of
// iteration t that the copy is complete before iteration t + 1 reads it.
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
#ifndef A_BY_ROW
#define A_BY_ROW 0  // 1: consecutive threads load consecutive rows of A (see A_ROW)
#endif
#ifndef CHECK_ALL
#define CHECK_ALL 0  // 1: every tile through the bounds-checked loads (see interior)
#endif
#ifndef MINB
#define MINB 2  // blocks per SM the compiler must leave registers for
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

__global__ void __launch_bounds__(NT, MINB)
matmul_dbuf(const float* __restrict__ A, const float* __restrict__ B,
                float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[2][BK][BM];  // transposed: As[.][k][m] = A[m][k]
    __shared__ __align__(16) float Bs[2][BK][BN];
    float4 ra[BM * BK / 4 / NT], rb[BK * BN / 4 / NT];  // the next tile, in flight

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

    // Which float4 of A's tile slot e loads. By default four consecutive threads read one
    // row's BK floats (coalesced), and their transposed stores As[c][r] land 4 threads to
    // a bank. With A_BY_ROW, consecutive threads take consecutive rows: the stores hit
    // 32 different banks, and each global load uses half of every 32-byte sector it
    // touches (the other half is read by the same thread's next slot, from L1).
#if A_BY_ROW
#define A_ROW(e) ((e) % BM)
#define A_COL(e) (((e) / BM) * 4)
#else
#define A_ROW(e) ((e) / (BK / 4))
#define A_COL(e) (((e) % (BK / 4)) * 4)
#endif
    // Global loads of the tile at k = t into registers, and their stores into copy p.
    // Interior tiles (the whole tile inside A and B, wide loads allowed) skip the bounds
    // checks: plain 16-byte loads, no branches between them. Only the blocks on the right
    // and bottom edges, and the last tile of a K that is not a multiple of BK, take
    // load4's checked path. (CHECK_ALL=1 sends every tile through it, to measure the cost.)
    const bool interior = !CHECK_ALL && wide && row0 + BM <= M && col0 + BN <= N;
#define LOAD_TILE(t)                                                                    \
    if (interior && (t) + BK <= K) {                                                    \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = *reinterpret_cast<const float4*>(                                   \
                &A[(row0 + A_ROW(e)) * K + (t) + A_COL(e)]);                            \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = *reinterpret_cast<const float4*>(                                   \
                &B[((t) + e / (BN / 4)) * N + col0 + (e % (BN / 4)) * 4]);              \
        }                                                                               \
    } else {                                                                            \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = load4(A, row0 + A_ROW(e), (t) + A_COL(e), M, K, wide);              \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = load4(B, (t) + e / (BN / 4), col0 + (e % (BN / 4)) * 4, K, N, wide);\
        }                                                                               \
    }
#define STORE_TILE(p)                                                                   \
    _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                      \
        int e = tid + s * NT, r = A_ROW(e), c = A_COL(e);                               \
        As[p][c][r] = ra[s].x;                                                          \
        As[p][c + 1][r] = ra[s].y;                                                      \
        As[p][c + 2][r] = ra[s].z;                                                      \
        As[p][c + 3][r] = ra[s].w;                                                      \
    }                                                                                   \
    _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                      \
        int e = tid + s * NT;                                                           \
        *reinterpret_cast<float4*>(&Bs[p][e / (BN / 4)][(e % (BN / 4)) * 4]) = rb[s];   \
    }

    LOAD_TILE(0)
    STORE_TILE(0)
    __syncthreads();  // copy 0 is complete

    for (int t = 0; t < K; t += BK) {
        const int p = (t / BK) & 1;
        const bool more = t + BK < K;
        if (more) {
            LOAD_TILE(t + BK)  // issued now, waited for only at the stores below
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    float4 v = *reinterpret_cast<const float4*>(
                        &As[p][k][wRow + wm * WSUBM + tRow + i]);
                    a[wm * TM + i] = v.x; a[wm * TM + i + 1] = v.y;
                    a[wm * TM + i + 2] = v.z; a[wm * TM + i + 3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    float4 v = *reinterpret_cast<const float4*>(
                        &Bs[p][k][wCol + wn * WSUBN + tCol + j]);
                    b[wn * TN + j] = v.x; b[wn * TN + j + 1] = v.y;
                    b[wn * TN + j + 2] = v.z; b[wn * TN + j + 3] = v.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        if (more) {
            STORE_TILE(p ^ 1)
        }
        __syncthreads();  // copy p ^ 1 is complete, and nobody reads copy p any more
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
