// Naive matrix product C[M,N] = A[M,K] * B[K,N], row-major float32.
// One thread per element of C; threadIdx.x walks the columns of C, so the 32 threads
// of a warp read 32 consecutive floats of B and write 32 consecutive floats of C.
__global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
