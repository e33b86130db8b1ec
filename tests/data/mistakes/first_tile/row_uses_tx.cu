// Tiled multiply, stage 2: the barrier and the partial product of one tile. The block
// loads the first tile pair, waits until every thread has stored its element, then each
// thread sums As[ty][k] * Bs[k][tx] over the tile: C = A[:, 0:32] B[0:32, :].
#define TILE 32

__global__ void first_tile(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + tx;
    int col = blockIdx.x * TILE + tx;
    As[ty][tx] = (row < M && tx < K) ? A[row * K + tx] : 0.0f;
    Bs[ty][tx] = (ty < K && col < N) ? B[ty * N + col] : 0.0f;
    __syncthreads();  // the tile pair is complete before anyone reads another's element
    float acc = 0.0f;
    for (int k = 0; k < TILE; ++k)
        acc += As[ty][k] * Bs[k][tx];
    if (row < M && col < N)
        C[row * N + col] = acc;
}
