// Warp-level primitives: shuffles, votes, __activemask, __syncwarp, warp-synchronous code.
#define FULL 0xffffffffu

__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL, v, offset);
    return v;
}

// Block sum: each warp reduces with shuffles, warp 0 reduces the warps' sums.
__global__ void shuffle_reduce(const float* x, float* out, int n)
{
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(i < n ? x[i] : 0.0f);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < blockDim.x / 32 ? partial[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, v);
    }
}

// Every lane ends with its warp's sum (butterfly), and with its segment's inclusive scan.
__global__ void xor_and_scan(const float* x, float* total, float* scan, float* scan8)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    float v = x[t];
    float s = v;
    for (int m = 1; m < 32; m <<= 1) s += __shfl_xor_sync(FULL, s, m);
    total[t] = s;
    float p = v, p8 = v;
    for (int d = 1; d < 32; d <<= 1) {
        float up = __shfl_up_sync(FULL, p, d);
        if (lane >= d) p += up;
    }
    for (int d = 1; d < 8; d <<= 1) {
        float up = __shfl_up_sync(FULL, p8, d, 8);
        if ((lane & 7) >= d) p8 += up;
    }
    scan[t] = p;
    scan8[t] = p8;
}

// Broadcast from lane 3 of each 16-lane segment; votes; activemask in a divergent branch.
__global__ void votes(const int* x, int* bcast, unsigned* ballot, int* any_all, unsigned* active,
                      unsigned* sums)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    bcast[t] = __shfl_sync(FULL, x[t], 3, 16);
    unsigned b = __ballot_sync(FULL, x[t] > 0);
    int a = __any_sync(FULL, x[t] > 90), l = __all_sync(FULL, x[t] > -100);
    unsigned m = 0;
    if (lane % 3 == 0) m = __activemask();
    active[t] = m;
    ballot[t] = b;
    any_all[t] = a * 2 + l;
    sums[t] = __reduce_add_sync(FULL, (unsigned)(x[t] & 255)) + __popc(__match_any_sync(FULL, x[t] & 3));
}

// Warp reduction through shared memory with __syncwarp after each step (correct on Volta+).
__global__ void syncwarp_reduce(const float* x, float* out)
{
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    if (t < 32) {
        float v = s[t] + s[t + 32];
        __syncwarp();
        s[t] = v;
        __syncwarp();
        for (int off = 16; off > 0; off >>= 1) {
            if (t < off) v += s[t + off];
            __syncwarp();
            if (t < off) s[t] = v;
            __syncwarp();
        }
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// The classic reduction with its last warp unrolled: volatile, no __syncwarp (a race on
// Volta and later that the H100 still computes right when the warp runs converged).
__device__ void warp_reduce(volatile float* sdata, int tid)
{
    sdata[tid] += sdata[tid + 32];
    sdata[tid] += sdata[tid + 16];
    sdata[tid] += sdata[tid + 8];
    sdata[tid] += sdata[tid + 4];
    sdata[tid] += sdata[tid + 2];
    sdata[tid] += sdata[tid + 1];
}

__global__ void unrolled_helper(const float* x, float* out)
{
    __shared__ float sdata[256];
    int tid = threadIdx.x;
    sdata[tid] = x[blockIdx.x * 256 + tid];
    __syncthreads();
    for (int s = 128; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) warp_reduce(sdata, tid);
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

__global__ void unrolled_inline(const float* x, float* out)
{
    __shared__ float sdata[256];
    int tid = threadIdx.x;
    sdata[tid] = x[blockIdx.x * 256 + tid];
    __syncthreads();
    for (int s = 128; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) {
        volatile float* v = sdata;
        v[tid] += v[tid + 32];
        v[tid] += v[tid + 16];
        v[tid] += v[tid + 8];
        v[tid] += v[tid + 4];
        v[tid] += v[tid + 2];
        v[tid] += v[tid + 1];
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// A shuffle whose mask names lanes that wait at a barrier instead: a GPU hangs.
__global__ void divergent_shuffle(float* out)
{
    float v = threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_down_sync(FULL, v, 1);
    __syncthreads();
    out[threadIdx.x] = v;
}

// Shuffles in both branches of an if: on Volta and later the lanes meet at shfl.sync
// instructions of the same kind and mask, each lane giving the value of its own call.
__global__ void branch_shuffles(const float* x, float* out)
{
    int lane = threadIdx.x % 32;
    float a;
    if (lane < 16) a = __shfl_sync(FULL, x[threadIdx.x], lane + 16);
    else a = __shfl_sync(FULL, 10.0f * x[threadIdx.x], lane - 16);
    out[threadIdx.x] = a;
}
