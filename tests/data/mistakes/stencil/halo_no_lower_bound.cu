// Step: a 1-D stencil with a halo in shared memory. y[i] = x[i-2] + x[i-1] + x[i] +
// x[i+1] + x[i+2], zeros outside x. A block of 256 threads loads its 256 values and the
// 2 neighbours on each side (the halo) into shared memory once; then every thread reads
// its 5 values from there.
#define BLOCK 256
#define R 2

__global__ void stencil(const float* x, float* y, int n)
{
    __shared__ float s[BLOCK + 2 * R];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    s[tid + R] = (i < n) ? x[i] : 0.0f;
    if (tid < R) {
        int left = i - R, right = i + BLOCK;
        s[tid] = (left < n) ? x[left] : 0.0f;
        s[tid + BLOCK + R] = (right < n) ? x[right] : 0.0f;
    }
    __syncthreads();
    if (i < n) {
        float acc = 0.0f;
        for (int d = -R; d <= R; ++d)
            acc += s[tid + R + d];
        y[i] = acc;
    }
}
