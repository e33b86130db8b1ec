// Step: guards and 2-D indexing. C = A + B for row-major M x N matrices, one thread per
// element. threadIdx.x walks the columns (consecutive addresses for a warp); the grid
// covers the matrix with whole blocks, so the threads past its edges must do nothing.
__global__ void add2d(const float* A, const float* B, float* C, int M, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N)
        C[row * N + col] = A[row * N + col] + B[row * N + col];
}
