// Step 9 of the road to cuBLAS: step 8 at any shape, in the configuration chosen for it.
// What it changes in step 8: there, a tile is loaded without bounds checks only where K
// and N are multiples of 4 and the buffers 16-byte aligned (the float4 path); at any
// other shape (N = 4095, say) every tile of every block took the checked path, four
// compares per float. Here an interior tile (entirely inside A and B) is loaded and its
// results stored unchecked at any alignment: as float4 where that is allowed, as four
// scalar loads and stores otherwise (the same coalesced bytes, in more instructions). The
// tile sizes are #defines like step 8's; which of its configurations a shape gets is a
// small model in tilelab/catalog/road.py (choose(): the fewest waves of tiles, at each
// configuration's own measured speed), as a library picks a kernel per shape.
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
#ifndef ANY_ALIGN
#define ANY_ALIGN 1  // 1: interior tiles unchecked at any alignment; 0: only as in step 8
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
#if BK % 2 != 0
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

// Four consecutive floats from X + i, unchecked: one 16-byte load where ``wide``.
__device__ __forceinline__ float4 ld4(const float* __restrict__ X, int i, bool wide)
{
    if (wide)
        return *reinterpret_cast<const float4*>(&X[i]);
    return make_float4(X[i], X[i + 1], X[i + 2], X[i + 3]);
}

// Four consecutive floats into X + i, unchecked: one 16-byte store where ``wide``.
__device__ __forceinline__ void st4(float* __restrict__ X, int i, bool wide, float4 v)
{
    if (wide) {
        *reinterpret_cast<float4*>(&X[i]) = v;
        return;
    }
    X[i] = v.x; X[i + 1] = v.y; X[i + 2] = v.z; X[i + 3] = v.w;
}

__global__ void __launch_bounds__(NT, MINB)
matmul_shapes(const float* __restrict__ A, const float* __restrict__ B,
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
    const bool interior = (ANY_ALIGN || wide) && row0 + BM <= M && col0 + BN <= N;
    float acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
            acc[i][j] = 0.0f;

    // [loads-begin]
    // Global loads of the tile at k = t into registers (step 5's), and their stores
    // into copy p. Four consecutive threads read one row's BK floats of A (coalesced).
#define LOAD_TILE(t)                                                                    \
    if (interior && (t) + BK <= K && wide) {                                            \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = ld4(A, (row0 + e / (BK / 4)) * K + (t) + (e % (BK / 4)) * 4, true); \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = ld4(B, ((t) + e / (BN / 4)) * N + col0 + (e % (BN / 4)) * 4, true); \
        }                                                                               \
    } else if (interior && (t) + BK <= K) { /* inside, but not 16-byte aligned */       \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            ra[s] = ld4(A, (row0 + e / (BK / 4)) * K + (t) + (e % (BK / 4)) * 4, false);\
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT;                                                       \
            rb[s] = ld4(B, ((t) + e / (BN / 4)) * N + col0 + (e % (BN / 4)) * 4, false);\
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
    // [loads-end]
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
    LOAD_OPERANDS(0, 0, 0)
    for (int t = 0; t < K; t += BK) {
        const int p = (t / BK) & 1;
        const bool more = t + BK < K;
        if (more) {
            LOAD_TILE(t + BK)  // issued now, waited for only at the stores below
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
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
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += a[f][i] * b[f][j];
        }
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
                    const int r = row0 + wRow + wm * WSUBM + tRow + i;
                    const int col = col0 + wCol + wn * WSUBN + tCol + j;
                    const float4 v = make_float4(c[0], c[1], c[2], c[3]);
                    if (interior)
                        st4(C, r * N + col, wide, v);
                    else
                        store4(C, r, col, M, N, wide, v);
                }
}
