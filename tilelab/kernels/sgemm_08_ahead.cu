// Step 8 of the road to cuBLAS: the operands of each step along k loaded one step ahead,
// across the barrier too.
// What it changes in step 5: there, a thread loads the operands of step k from shared
// memory (TM values of A, TN of B) and then does its FMAs on them; the compiler, which
// sees the whole unrolled tile, moves the loads of step k + 1 above the FMAs of step k,
// so that the FMAs hide the loads' latency, but it cannot move a load above the barrier
// that ends the tile. So every tile starts with all warps of the block leaving the
// barrier together and waiting for their first shared loads, with nothing to issue.
// Here the operands live in two register sets, a[2][.] and b[2][.]: the FMAs of step k
// use set k % 2 while the loads of step k + 1 fill the other, and at the last step of a
// tile the thread stores the next tile, passes the barrier, loads the next tile's first
// operands and only then does the tile's last FMAs. The barrier's wait and the first
// loads' latency are hidden behind one step of FMAs (TM x TN per thread), for
// 2 (TM + TN) more registers.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 16
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef WNITER
#define WNITER 4
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef AHEAD
#define AHEAD 1  // 1: operands loaded a step ahead, across the barrier; 0: as in step 5
#endif
#ifndef MINB
#define MINB 1  // blocks per SM the compiler must leave registers for
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
#if AHEAD && BK % 2 != 0
#error "the two register sets alternate: BK must be even"
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
matmul_ahead(const float* __restrict__ A, const float* __restrict__ B,
             float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[2][BK][BM];  // transposed: As[.][k][m] = A[m][k]
    __shared__ __align__(16) float Bs[2][BK][BN];
    float4 ra[BM * BK / 4 / NT], rb[BK * BN / 4 / NT];  // the next tile, in flight

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wRow = (warp / (BN / WN)) * WM, wCol = (warp % (BN / WN)) * WN;
    const int tRow = (lane / (WSUBN / TN)) * TM, tCol = (lane % (WSUBN / TN)) * TN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool wide = ((K | N) & 3) == 0
        && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)
             | reinterpret_cast<size_t>(C)) & 15) == 0;
    const bool interior = wide && row0 + BM <= M && col0 + BN <= N;
    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
            acc[i][j] = 0.0f;

    // Global loads of the tile at k = t into registers (step 5's), and their stores
    // into copy p. Four consecutive threads read one row's BK floats of A (coalesced).
#define LOAD_TILE(t)                                                                    \
    if (interior && (t) + BK <= K) {                                                    \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = *reinterpret_cast<const float4*>(                                   \
                &A[(row0 + e / (BK / 4)) * K + (t) + (e % (BK / 4)) * 4]);              \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = *reinterpret_cast<const float4*>(                                   \
                &B[((t) + e / (BN / 4)) * N + col0 + (e % (BN / 4)) * 4]);              \
        }                                                                               \
    } else {                                                                            \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = load4(A, row0 + e / (BK / 4), (t) + (e % (BK / 4)) * 4, M, K, wide); \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = load4(B, (t) + e / (BN / 4), col0 + (e % (BN / 4)) * 4, K, N, wide);\
        }                                                                               \
    }
#define STORE_TILE(p)                                                                   \
    _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                      \
        int e = tid + s * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;                 \
        As[p][c][r] = ra[s].x;                                                          \
        As[p][c + 1][r] = ra[s].y;                                                      \
        As[p][c + 2][r] = ra[s].z;                                                      \
        As[p][c + 3][r] = ra[s].w;                                                      \
    }                                                                                   \
    _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                      \
        int e = tid + s * NT;                                                           \
        *reinterpret_cast<float4*>(&Bs[p][e / (BN / 4)][(e % (BN / 4)) * 4]) = rb[s];   \
    }

    // [core-begin]
    // The operands of step k of copy p into register set f: TM x WMITER values of A's
    // column k, TN x WNITER of B's row k, 16 bytes at a time.
    float a[2][WMITER * TM], b[2][WNITER * TN];
#define LOAD_OPERANDS(f, p, k)                                                          \
    _Pragma("unroll") for (int wm = 0; wm < WMITER; ++wm)                               \
        _Pragma("unroll") for (int i = 0; i < TM; i += 4) {                             \
            float4 v = *reinterpret_cast<const float4*>(                                \
                &As[p][k][wRow + wm * WSUBM + tRow + i]);                               \
            a[f][wm * TM + i] = v.x; a[f][wm * TM + i + 1] = v.y;                       \
            a[f][wm * TM + i + 2] = v.z; a[f][wm * TM + i + 3] = v.w;                   \
        }                                                                               \
    _Pragma("unroll") for (int wn = 0; wn < WNITER; ++wn)                               \
        _Pragma("unroll") for (int j = 0; j < TN; j += 4) {                             \
            float4 v = *reinterpret_cast<const float4*>(                                \
                &Bs[p][k][wCol + wn * WSUBN + tCol + j]);                               \
            b[f][wn * TN + j] = v.x; b[f][wn * TN + j + 1] = v.y;                       \
            b[f][wn * TN + j + 2] = v.z; b[f][wn * TN + j + 3] = v.w;                   \
        }

    LOAD_TILE(0)
    STORE_TILE(0)
    __syncthreads();  // copy 0 is complete
#if AHEAD
    LOAD_OPERANDS(0, 0, 0)
#endif
    for (int t = 0; t < K; t += BK) {
        const int p = (t / BK) & 1;
        const bool more = t + BK < K;
        if (more) {
            LOAD_TILE(t + BK)  // issued now, waited for only at the stores below
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#if AHEAD
            if (k + 1 < BK) {
                LOAD_OPERANDS((k + 1) & 1, p, k + 1)  // step k + 1's, for later
            } else {  // the tile's last step: first the next tile, then its first operands
                if (more) {
                    STORE_TILE(p ^ 1)
                }
                __syncthreads();  // copy p ^ 1 is complete, and nobody reads copy p any more
                // BK is even: step 0 uses set 0. Loaded after the last tile too (unused
                // there): without a branch, the loads stay above this step's FMAs.
                LOAD_OPERANDS(0, p ^ 1, 0)
            }
            const int f = k & 1;
#else
            LOAD_OPERANDS(0, p, k)
            const int f = 0;
#endif
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += a[f][i] * b[f][j];
        }
#if !AHEAD
        if (more) {
            STORE_TILE(p ^ 1)
        }
        __syncthreads();  // copy p ^ 1 is complete, and nobody reads copy p any more
#endif
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
