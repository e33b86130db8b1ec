// Step 6 of the road to cuBLAS: asynchronous copies and a deeper pipeline.
// What it changes in step 5: the tiles no longer pass through registers. From compute
// capability 8.0 on (Ampere, Hopper), `cp.async` copies global memory straight into
// shared memory: the thread issues the copy and goes on with its FMAs, and
// `cp.async.wait_group` later waits for the copies it issued. Without the registers
// that held the next tile in flight (step 5's ra and rb), the pipeline can be STAGES
// tiles deep instead of two: while the block computes on tile t, the copies of tiles
// t + 1 .. t + STAGES - 1 are in flight.
// One barrier per tile hands the stages over: at the top of iteration t every thread
// has finished computing on tile t - 1, so that tile's stage may be refilled (with tile
// t + STAGES - 1), and every thread has waited for its own copies of tile t, so after
// the barrier the whole tile is in shared memory.
// B's rows are copied 16 bytes at a time. A's tile is stored transposed (as in steps
// 3-5), which a 16-byte copy cannot do: its four floats take four 4-byte copies.
// Edge tiles (the right and bottom blocks, a last partial tile of K) take step 5's
// checked loads through registers and plain stores. Where `cp.async` does not exist
// (before sm_80, and on the CPU emulator) every copy is a plain load and store: the
// same kernel, synchronous, which the emulator checks for races and bank conflicts.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 8
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
#ifndef STAGES
#define STAGES 4  // tiles in shared memory: the one computed on, STAGES - 1 in flight
#endif
#ifndef MINB
#define MINB 1  // blocks per SM the compiler must leave registers for
#endif
#ifndef ASYNC  // 1: cp.async (sm_80 and later); 0: plain loads and stores
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ASYNC 1
#else
#define ASYNC 0
#endif
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
#if STAGES < 2 || STAGES * BK * (BM + BN) * 4 > 49152
#error "STAGES tiles must fit the 48 KiB of static shared memory"
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

// [async-copy-begin]
// 16 bytes (global, 16-byte aligned) into shared memory, without registers.
__device__ __forceinline__ void copy16(float* dst, const float* src)
{
#if ASYNC
    unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
#endif
}

// 4 bytes into shared memory, without registers (cached in L1: the neighbours follow).
__device__ __forceinline__ void copy4(float* dst, const float* src)
{
#if ASYNC
    unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
#else
    *dst = *src;
#endif
}

// Closes the group of copies this thread issued since the last commit.
__device__ __forceinline__ void commit_copies()
{
#if ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most STAGES - 2 of this thread's groups are still in flight.
__device__ __forceinline__ void wait_copies()
{
#if ASYNC
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
#endif
}
// [async-copy-end]

__global__ void __launch_bounds__(NT, MINB)
matmul_async(const float* __restrict__ A, const float* __restrict__ B,
             float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[STAGES][BK][BM];  // transposed: As[.][k][m] = A[m][k]
    __shared__ __align__(16) float Bs[STAGES][BK][BN];

    // [core-begin]
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
    float a[WMITER * TM], b[WNITER * TN];

    // The tile at k = t into stage p: four threads read one row's BK floats of A
    // (coalesced) and store them down a column of As; B's rows go straight across.
#define LOAD_TILE(t, p)                                                                 \
    if (interior && (t) + BK <= K) {                                                    \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;             \
            const float* src = &A[(row0 + r) * K + (t) + c];                            \
            copy4(&As[p][c][r], src);                                                   \
            copy4(&As[p][c + 1][r], src + 1);                                           \
            copy4(&As[p][c + 2][r], src + 2);                                           \
            copy4(&As[p][c + 3][r], src + 3);                                           \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;             \
            copy16(&Bs[p][r][c], &B[((t) + r) * N + col0 + c]);                         \
        }                                                                               \
    } else {                                                                            \
        _Pragma("unroll") for (int s = 0; s < BM * BK / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;             \
            float4 v = load4(A, row0 + r, (t) + c, M, K, wide);                         \
            As[p][c][r] = v.x;                                                          \
            As[p][c + 1][r] = v.y;                                                      \
            As[p][c + 2][r] = v.z;                                                      \
            As[p][c + 3][r] = v.w;                                                      \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;             \
            *reinterpret_cast<float4*>(&Bs[p][r][c]) =                                  \
                load4(B, (t) + r, col0 + c, K, N, wide);                                \
        }                                                                               \
    }

    const int tiles = (K + BK - 1) / BK;
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {  // the first STAGES - 1 tiles, in flight
        if (st < tiles) {
            LOAD_TILE(st * BK, st)
        }
        commit_copies();  // one group per tile, empty or not: wait_copies counts groups
    }
    int p = 0, q = STAGES - 1;  // the stage computed on, the stage refilled
    for (int kt = 0; kt < tiles; ++kt) {
        wait_copies();  // this thread's copies of tile kt have landed
        __syncthreads();  // everyone's have, and nobody still reads stage q
        if (kt + STAGES - 1 < tiles) {
            LOAD_TILE((kt + STAGES - 1) * BK, q)
        }
        commit_copies();
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
        p = p + 1 == STAGES ? 0 : p + 1;
        q = q + 1 == STAGES ? 0 : q + 1;
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
