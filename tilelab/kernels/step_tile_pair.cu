// Tiled multiply, stage 1: load one tile pair into shared memory. A block of 32 x 32
// threads loads the first tile of A (its rows, columns 0..31) and the first tile of B
// (rows 0..31, its columns), zeros outside the matrices, then each thread writes
// C[row][col] = As[ty][tx] + Bs[ty][tx]: the tiles as loaded, checked element by element.
#define TILE 32

__global__ void tile_pair(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    As[ty][tx] = (row < M && tx < K) ? A[row * K + tx] : 0.0f;
    Bs[ty][tx] = (ty < K && col < N) ? B[ty * N + col] : 0.0f;
    if (row < M && col < N)
        C[row * N + col] = As[ty][tx] + Bs[ty][tx];
}
