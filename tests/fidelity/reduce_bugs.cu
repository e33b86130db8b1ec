// Bugs a GPU shows: the barrier outside the reduction loop; reading past a static array.
__global__ void barrier_outside_loop(const float* x, float* out)
{
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
    }
    __syncthreads();
    if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void read_past_static(const float* x, float* out)
{
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 128 + t];
    __syncthreads();
    out[blockIdx.x * 128 + t] = s[t] + s[t + 1];   // t + 1 == 128 reads past the array
}
