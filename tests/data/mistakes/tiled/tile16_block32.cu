#define TILE 16

// C = A * B, row-major float32: A is M x K, B is K x N, C is M x N.
// Launch (fixed by the grader): block=(32, 32, 1), grid=(ceil(N/32), ceil(M/32))
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();  // the whole tile is loaded before anyone reads it
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // everyone is done reading before the next loads overwrite it
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
