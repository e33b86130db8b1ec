// Wave quantization: every block of 1024 threads does the same fixed work (`iters`
// rounds of 4 independent FMA chains per thread). Two such blocks fit on an SM at once,
// so 2 x (number of SMs) blocks make one full wave; one block more starts a second wave.
__global__ void waves(float* __restrict__ out, int iters)
{
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;
    for (int i = 0; i < iters; ++i) {
        x0 = fmaf(x0, 0.999f, 1e-3f); x1 = fmaf(x1, 0.999f, 1e-3f);
        x2 = fmaf(x2, 0.999f, 1e-3f); x3 = fmaf(x3, 0.999f, 1e-3f);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3;
}
