// Elementwise c = a + b, straight from global memory and staged through shared memory.
// Each value is used once, so shared memory has no reuse to offer here.
__global__ void add_global(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void add_shared(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n)
{
    __shared__ float sa[256];
    __shared__ float sb[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        sa[threadIdx.x] = a[i];
        sb[threadIdx.x] = b[i];
    }
    __syncthreads();
    if (i < n)
        c[i] = sa[threadIdx.x] + sb[threadIdx.x];
}
