// Latency and bytes in flight.
// chase: one thread follows a chain of indices through a large array: every load waits
// for the one before, so the time per step is the memory's latency.
__global__ void chase(const int* __restrict__ next, int steps, int* __restrict__ out)
{
    int i = 0;
    for (int s = 0; s < steps; ++s)
        i = next[i];
    out[0] = i;
}

// stream: each thread reads `per_thread` float4 values, `blocks x 256` threads in all;
// fewer resident threads mean fewer bytes in flight, and the bandwidth drops with them.
__global__ void stream(const float4* __restrict__ in, float* __restrict__ out, int per_thread)
{
    int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    #pragma unroll 1  // one load in flight per thread: the next waits for this one's sum
    for (int k = 0; k < per_thread; ++k) {
        float4 v = in[i + k * stride];
        acc += v.x + v.y + v.z + v.w;
    }
    out[i] = acc;
}
