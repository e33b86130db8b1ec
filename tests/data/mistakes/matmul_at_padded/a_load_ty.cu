#define TILE 32

// C = A * B, row-major float32: A is M x K, B is K x N, C is M x N.
// Launch (fixed by the grader): block=(32, 32, 1), grid=(ceil(N/32), ceil(M/32))
__global__ void matmul_tiled_at(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE + 1];  // As[k][i]: A's tile, transposed; padded
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int t = 0; t < K; t += TILE) {
        As[tx][ty] = (row < M && t + tx < K) ? A[row * K + t + ty] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[k][ty] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
