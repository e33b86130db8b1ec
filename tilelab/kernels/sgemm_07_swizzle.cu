// Step 7 of the road to cuBLAS: both tiles copied 16 bytes at a time, A's kept as it is
// in global memory and read along k through a swizzled layout.
// What it changes in step 6: step 6 stored A's tile transposed (As[k][m]) so that a
// thread could read four rows of one column with one 16-byte load, and a 16-byte copy
// cannot transpose: each float of A took a 4-byte cp.async of its own. Here A's tile
// keeps A's layout, As[m][k], and is copied like B's, one 16-byte cp.async per four
// floats. A thread now reads four consecutive k of one row with one 16-byte load, so
// it loads its TM rows once per four steps along k (TM loads of four k each: the same
// count of 16-byte loads per FMA as before), and keeps them in 4 * TM registers.
// Bank conflicts. A warp's 16-byte load of A reads one 16-byte chunk from each of
// LROWS consecutive rows. A row of the tile is BK floats, so with BK = 16 two rows
// fill the 128 bytes of the 32 banks and the chunks of rows 0, 2, 4 and 6 would all
// sit in the same 16-byte slot of the banks. The swizzle stores chunk c of row m at
// chunk c ^ ((m / R) % (BK / 4)), R being the rows per 128 bytes: consecutive rows then
// use distinct slots, and a load of LROWS <= 8 rows is conflict-free. SWIZZLE=0 pads
// each row by PAD = 4 floats instead (one more 16-byte slot per row: the same effect,
// 1/4 to 1/2 more shared memory for A); SWIZZLE=0 with PAD=0 is the plain layout, with
// its conflicts.
// Lanes. A warp's 32 lanes are LROWS x LCOLS; a thread computes TM rows, LROWS apart,
// and TN columns, four consecutive ones every 4 * LCOLS. So one load of B serves
// LCOLS consecutive 16-byte chunks (conflict-free), one load of A LROWS rows.
// RASTER > 0 launches the blocks in groups of RASTER block rows, column by column, so
// that blocks running at the same time share their tiles of B in L2.
// Edge tiles (the right and bottom blocks, a last partial tile of K) take step 5's
// checked loads through registers and plain stores, into the same swizzled places.
// Where cp.async does not exist (before sm_80, and on the CPU emulator), every copy is
// a plain load and store: the same kernel, synchronous.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 64
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
#ifndef TM
#define TM 8  // rows of C per thread, LROWS apart
#endif
#ifndef TN
#define TN 8  // columns of C per thread, in runs of four
#endif
#ifndef STAGES
#define STAGES 2  // tiles in shared memory: the one computed on, STAGES - 1 in flight
#endif
#ifndef SWIZZLE
#define SWIZZLE 1  // 1: A's chunks swizzled; 0: A's rows padded by PAD floats
#endif
#ifndef PAD
#define PAD (SWIZZLE ? 0 : 4)  // floats after each row of A's tile
#endif
#ifndef RASTER
#define RASTER 0  // > 0: blocks launched in groups of RASTER block rows
#endif
#ifndef MINB
#define MINB 3  // blocks per SM the compiler must leave registers for
#endif
#ifndef ASYNC  // 1: cp.async (sm_80 and later); 0: plain loads and stores
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ASYNC 1
#else
#define ASYNC 0
#endif
#endif
#define NT ((BM / WM) * (BN / WN) * 32)  // threads per block
#define LROWS (WM / TM)                  // lanes along M
#define LCOLS (WN / TN)                  // lanes along N
#define KC (BK / 4)                      // 16-byte chunks in a row of A's tile
#define RPL (KC >= 8 ? 1 : 8 / KC)       // rows of A's tile per 128 bytes
#define AS_ROW (BK + PAD)  // floats from one row of As to the next
#if LROWS * LCOLS != 32 || WM % TM != 0 || WN % TN != 0 || TN % 4 != 0 || BK % 4 != 0
#error "a warp's 32 lanes must tile its WM x WN outputs in TM x TN pieces, TN by fours"
#endif
#if BM % WM != 0 || BN % WN != 0 || (BM * BK / 4) % NT != 0 || (BK * BN / 4) % NT != 0
#error "the tiles must split evenly into warps and into 16-byte copies over the threads"
#endif
#if SWIZZLE && ((KC & (KC - 1)) != 0 || PAD != 0)
#error "the swizzle needs BK / 4 to be a power of two, and no padding"
#endif
#if PAD % 4 != 0
#error "a padded row must keep its 16-byte chunks aligned"
#endif
#if STAGES < 2 || STAGES * (BM * AS_ROW + BK * BN) * 4 > 49152
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

// [swizzle-begin]
// Where chunk c (floats 4c..4c+3) of row m of A's tile lives in As: an offset in floats.
__device__ __forceinline__ int a_at(int m, int c)
{
#if SWIZZLE
    return m * AS_ROW + 4 * (c ^ ((m / RPL) % KC));
#else
    return m * AS_ROW + 4 * c;
#endif
}
// [swizzle-end]

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

__global__ void __launch_bounds__(NT, MINB)
matmul_swizzle(const float* __restrict__ A, const float* __restrict__ B,
               float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[STAGES][BM * AS_ROW];  // As[.][a_at(m, c)]: A[m][4c..]
    __shared__ __align__(16) float Bs[STAGES][BK * BN];      // Bs[.][k * BN + n] = B[k][n]

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wRow = (warp / (BN / WN)) * WM, wCol = (warp % (BN / WN)) * WN;
    const int lr = lane / LCOLS, lc = lane % LCOLS;
#if RASTER
    const int lin = blockIdx.y * gridDim.x + blockIdx.x, group = RASTER * gridDim.x;
    const int first = (lin / group) * RASTER, rows = min((int)gridDim.y - first, RASTER);
    const int row0 = (first + (lin % group) % rows) * BM, col0 = ((lin % group) / rows) * BN;
#else
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
#endif
    const bool wide = ((K | N) & 3) == 0
        && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)
             | reinterpret_cast<size_t>(C)) & 15) == 0;
    const bool interior = wide && row0 + BM <= M && col0 + BN <= N;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;

    // Where a thread's row i, chunk kc of A lies in a stage. When LROWS rows span whole
    // periods of the swizzle, each of a thread's rows has the same swizzle: KC offsets
    // computed once, and the TM loads of one chunk differ by a constant.
#if !SWIZZLE || (LROWS % RPL == 0 && (LROWS / RPL) % KC == 0)
    int aoff[KC];
#pragma unroll
    for (int kc = 0; kc < KC; ++kc)
        aoff[kc] = a_at(wRow + lr, kc);
#define A_AT(i, kc) (aoff[kc] + (i) * LROWS * AS_ROW)
#else
#define A_AT(i, kc) a_at(wRow + lr + (i) * LROWS, kc)
#endif

    // [core-begin]
    // The tile at k = t into stage p: consecutive threads copy consecutive 16-byte
    // chunks of A's rows and of B's rows, A's into their swizzled places.
#define LOAD_TILE(t, p)                                                                 \
    if (interior && (t) + BK <= K) {                                                    \
        _Pragma("unroll") for (int s = 0; s < BM * KC / NT; ++s) {                      \
            int e = tid + s * NT, r = e / KC, c = e % KC;                               \
            copy16(&As[p][a_at(r, c)], &A[(row0 + r) * K + (t) + 4 * c]);               \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;             \
            copy16(&Bs[p][r * BN + c], &B[((t) + r) * N + col0 + c]);                   \
        }                                                                               \
    } else {                                                                            \
        _Pragma("unroll") for (int s = 0; s < BM * KC / NT; ++s) {                      \
            int e = tid + s * NT, r = e / KC, c = e % KC;                               \
            *reinterpret_cast<float4*>(&As[p][a_at(r, c)]) =                            \
                load4(A, row0 + r, (t) + 4 * c, M, K, wide);                            \
        }                                                                               \
        _Pragma("unroll") for (int s = 0; s < BK * BN / 4 / NT; ++s) {                  \
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;             \
            *reinterpret_cast<float4*>(&Bs[p][r * BN + c]) =                            \
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
        wait_copies();    // this thread's copies of tile kt have landed
        __syncthreads();  // everyone's have, and nobody still reads stage q
        if (kt + STAGES - 1 < tiles) {
            LOAD_TILE((kt + STAGES - 1) * BK, q)
        }
        commit_copies();
        const float* as = As[p];
        const float* bs = Bs[p];
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {  // four steps along k per load of A
            float a[TM][4], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                float4 v = *reinterpret_cast<const float4*>(
                    &as[A_AT(i, kc)]);
                a[i][0] = v.x; a[i][1] = v.y; a[i][2] = v.z; a[i][3] = v.w;
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    float4 v = *reinterpret_cast<const float4*>(
                        &bs[(4 * kc + kk) * BN + wCol + 4 * lc + j * LCOLS]);
                    b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j)
                        acc[i][j] += a[i][kk] * b[j];
            }
        }
        p = p + 1 == STAGES ? 0 : p + 1;
        q = q + 1 == STAGES ? 0 : q + 1;
    }
    // [core-end]
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, row0 + wRow + lr + i * LROWS, col0 + wCol + 4 * lc + j * LCOLS, M, N,
                   wide, make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}
