// Warp divergence: each thread runs `iters` dependent FMAs on one of `paths` code paths.
// by_lane = 1: the path is the thread's lane modulo `paths`, so the 32 threads of a warp
// take `paths` different branches and the warp runs them one after the other.
// by_lane = 0: the path is the warp's index modulo `paths`: as many branches in the
// kernel, the same work per thread, but every warp takes one path (no divergence).
__global__ void divergence(float* __restrict__ out, int paths, int by_lane, int iters)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int path = (by_lane ? lane : warp) % paths;
    float x = (float)threadIdx.x;
    for (int p = 0; p < paths; ++p) {
        if (path == p) {
            float a = 1.0f - 1e-6f * (float)(p + 1);
            for (int i = 0; i < iters; ++i)
                x = fmaf(x, a, 1e-3f);
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
