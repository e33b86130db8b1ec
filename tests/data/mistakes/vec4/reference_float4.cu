// Step 3 of the road to cuBLAS: 16-byte (float4) loads, A's tile stored transposed.
// What it adds to step 2: every load moves four floats. From global memory, each thread
// reads its share of both tiles as float4 (one LDG.128 instead of four LDG.32). In shared
// memory, A's tile is stored transposed, As[k][m], so that the TM values of A a thread
// needs for one k are consecutive, like the TN values of B: the micro-tile's operands
// arrive in (TM + TN) / 4 LDS.128 instead of TM + TN LDS.32. To make them consecutive,
// a thread's micro-tile is now a contiguous TM x TN block of C.
// float4 needs 16-byte alignment: the wide path is taken only when K and N are
// multiples of 4 and the buffers are 16-byte aligned (PyCUDA's allocations are); any
// other shape, and the edge of every shape, goes through scalar loads that load zeros
// outside the matrices. Block: NT = (BM / TM) * (BN / TN) threads along x.
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
#ifndef GLOBAL_WIDE
#define GLOBAL_WIDE 1  // 0: every global load and store four bytes at a time
#endif
#define NT ((BM / TM) * (BN / TN))
#if (BM * BK / 4) % NT != 0 || (BK * BN / 4) % NT != 0 || TM % 4 != 0 || TN % 4 != 0
#error "the tiles must split evenly into float4 loads over the threads"
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
matmul_vec4(const float* __restrict__ A, const float* __restrict__ B,
            float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[m][k]
    __shared__ __align__(16) float Bs[BK][BN];

    // [core-begin]
    const int tid = threadIdx.x;
    const int tRow = tid / (BN / TN), tCol = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool wide = GLOBAL_WIDE && ((K | N) & 3) == 0
        && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)
             | reinterpret_cast<size_t>(C)) & 15) == 0;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;
    float a[TM], b[TN];

    for (int t = 0; t < K; t += BK) {
#pragma unroll
        for (int s = 0; s < BM * BK / 4 / NT; ++s) {  // A: four k of one row, stored down a column
            int e = tid + s * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;
            float4 v = load4(A, row0 + r, t + c, M, K, wide);
            As[c][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
#pragma unroll
        for (int s = 0; s < BK * BN / 4 / NT; ++s) {  // B: four columns of one row
            int e = tid + s * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = load4(B, t + r, col0 + c, K, N, wide);
        }
        __syncthreads();  // the tiles are complete

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                float4 v = *reinterpret_cast<const float4*>(&As[k][tRow * TM + i]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                float4 v = *reinterpret_cast<const float4*>(&Bs[k][tCol * TN + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // everyone is done before the tiles are overwritten
    }
    // [core-end]
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, row0 + tRow * TM + i, col0 + tCol * TN + j, M, N, wide,
                   make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}
