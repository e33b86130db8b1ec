// Shared memory reached through vectors, pointers, swapped buffers and carved dynamic memory.
#define BM 64
#define BN 64
#define BK 16

// C = A @ B (N x N, N a multiple of 64): a 64x64 tile per block of 16x16 threads, a 4x4
// micro-tile per thread, float4 loads from global and shared memory.
__global__ void matmul_regblock(const float* A, const float* B, float* C, int N)
{
    __shared__ __align__(16) float As[BK][BM];  // A's tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {{0.0f}};
    for (int k0 = 0; k0 < N; k0 += BK) {
        int ar = tid / 4, ac = (tid % 4) * 4;
        float4 a = *reinterpret_cast<const float4*>(&A[(row0 + ar) * N + k0 + ac]);
        As[ac + 0][ar] = a.x;
        As[ac + 1][ar] = a.y;
        As[ac + 2][ar] = a.z;
        As[ac + 3][ar] = a.w;
        int br = tid / 16, bc = (tid % 16) * 4;
        *reinterpret_cast<float4*>(&Bs[br][bc]) =
            *reinterpret_cast<const float4*>(&B[(k0 + br) * N + col0 + bc]);
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            float4 av = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            float4 bv = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            float ar4[4] = {av.x, av.y, av.z, av.w}, br4[4] = {bv.x, bv.y, bv.z, bv.w};
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += ar4[i] * br4[j];
        }
#ifndef NO_TRAILING_BARRIER
        __syncthreads();
#endif
    }
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(&C[(row0 + ty * 4 + i) * N + col0 + tx * 4]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// A 3-point smoothing repeated `steps` times in shared memory, double-buffered by swapping
// two pointers.
__global__ void smooth_swap(const float* x, float* out, int steps)
{
    __shared__ float buf_a[258], buf_b[258];
    float* cur = buf_a;
    float* nxt = buf_b;
    int t = threadIdx.x;
    cur[t + 1] = x[blockIdx.x * 256 + t];
    if (t == 0) { cur[0] = cur[257] = 0.0f; nxt[0] = nxt[257] = 0.0f; }
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        nxt[t + 1] = (cur[t] + cur[t + 1] + cur[t + 2]) * (1.0f / 3.0f);
#ifndef NO_SWAP_BARRIER
        __syncthreads();
#endif
        float* tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    out[blockIdx.x * 256 + t] = cur[t + 1];
}

// Dynamic shared memory carved into two arrays by pointers.
__global__ void carved(const float* a, const float* b, float* out)
{
    extern __shared__ float smem[];
    float* sa = smem;
    float* sb = smem + blockDim.x;
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    sa[t] = a[i];
    sb[t] = b[i];
#ifndef NO_BARRIER
    __syncthreads();
#endif
    int j = (t + 1) % blockDim.x;
    out[i] = sa[j] * sb[j];
}

// Accesses 64 and 128 bits wide, each on its own line, for the bank analysis.
__global__ void widths(float* out)
{
    __shared__ __align__(16) float s[256];
    int t = threadIdx.x;
    for (int k = t; k < 256; k += 32) s[k] = k;
    __syncthreads();
    float2 a = reinterpret_cast<const float2*>(s)[t];               // F2_CONSECUTIVE
    float4 b = reinterpret_cast<const float4*>(s)[t];               // F4_CONSECUTIVE
    float4 c = reinterpret_cast<const float4*>(s)[(2 * t) % 64];    // F4_STRIDE2
    double d = reinterpret_cast<const double*>(s)[2 * t];           // D_STRIDE2
    out[t] = a.x + a.y + b.x + b.w + c.y + c.z + (float)(d == d);
}

// A histogram in shared memory with atomics (no race), and a counter without them (a race).
__global__ void histogram(const int* x, unsigned* bins, unsigned* total, int n)
{
    __shared__ unsigned local[16];
    __shared__ unsigned count;
    int t = threadIdx.x;
    if (t < 16) local[t] = 0;
    if (t == 0) count = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + t;
    if (i < n) atomicAdd(&local[x[i] & 15], 1u);
#ifdef RACY_COUNT
    if (i < n) count += 1;
#else
    if (i < n) atomicAdd(&count, 1u);
#endif
    __syncthreads();
    if (t < 16) atomicAdd(&bins[t], local[t]);
    if (t == 0) atomicAdd(total, count);
}
