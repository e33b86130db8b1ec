// Launches a GPU refuses. STATIC_64K: 64 KiB of static shared memory (nvcc refuses it).
// Otherwise an 8x8 micro-tile per thread, which needs far more than 64 registers: a block
// of 32x32 threads exceeds the 65536 registers of a multiprocessor.
#ifdef STATIC_64K
__global__ void too_much_static(float* out)
{
    __shared__ float big[16384];
    big[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = big[16383 - threadIdx.x];
}
#else
__global__ void micro8x8(const float* A, const float* B, float* C, int N)
{
    float acc[8][8];
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    int r0 = (blockIdx.y * blockDim.y + threadIdx.y) * 8;
    int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    for (int k = 0; k < N; ++k) {
        float a[8], b[8];
        for (int i = 0; i < 8; ++i) a[i] = A[(r0 + i) * N + k];
        for (int j = 0; j < 8; ++j) b[j] = B[k * N + c0 + j];
        for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) C[(r0 + i) * N + c0 + j] = acc[i][j];
}
#endif

#ifdef BOUNDED
// A block larger than the kernel's __launch_bounds__.
__global__ void __launch_bounds__(128) bounded(float* out)
{
    out[threadIdx.x] = threadIdx.x;
}
#endif
