// Shared-memory bandwidth: every warp reads 16-byte words (LDS.128) of a shared array,
// 32 threads on 32 consecutive float4 (512 bytes, conflict-free), `iters` times.
__global__ void shared_bw(float* __restrict__ out, int iters)
{
    __shared__ float4 s[1024];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x)
        s[i] = make_float4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    int idx = threadIdx.x & 1023;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int it = 0; it < iters; ++it) {
        float4 v = s[idx];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        idx = (idx + 32) & 1023;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}
