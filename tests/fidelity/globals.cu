// __constant__ filter weights set from the host; a __device__ counter kept across launches.
__constant__ float weights[5];
__constant__ int radius = 2;
__device__ unsigned int launches_seen;

__global__ void conv1d(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = -radius; k <= radius; ++k) {
        int j = i + k;
        if (j >= 0 && j < n) acc += weights[k + radius] * x[j];
    }
    y[i] = acc;
    if (i == 0) launches_seen += 1;
}

__global__ void mul24(const int* a, const int* b, int* c, unsigned* uc)
{
    int t = threadIdx.x;
    c[t] = __mul24(a[t], b[t]);
    uc[t] = __umul24((unsigned)a[t], (unsigned)b[t]);
}
