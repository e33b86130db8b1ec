// Microbenchmark of shared-memory bank conflicts: each warp repeatedly reads the words
// lane * stride (mod 4096) of a shared array. Stride 1 touches 32 banks; stride 2, 16
// banks twice over (2-way); stride 32, one bank 32 times (32-way).
__global__ void bank_stride(float* __restrict__ out, int stride, int iters)
{
    __shared__ float s[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x)
        s[i] = (float)i;
    __syncthreads();
    int lane = threadIdx.x & 31;
    int idx = (lane * stride + (threadIdx.x >> 5)) & 4095;
    float acc = 0.0f;
    for (int it = 0; it < iters; ++it) {
        acc += s[idx];
        idx = (idx + 32 * stride) & 4095;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
