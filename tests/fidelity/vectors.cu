// float4 loads with a scalar tail: any n, the buffer as cudaMalloc aligns it.
__global__ void scale_vec4(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n4 = n / 4;
    if (i < n4) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
    if (i < n - 4 * n4) y[4 * n4 + i] = a * x[4 * n4 + i];
}

// Dynamic shared memory: 64 KiB needs the opt-in.
__global__ void big_dynamic(float* out)
{
    extern __shared__ float buf[];
    int t = threadIdx.x;
    for (int k = t; k < 16384; k += blockDim.x) buf[k] = k;
    __syncthreads();
    out[t] = buf[16383 - t];
}
