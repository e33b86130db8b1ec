// Tiled multiply, stage 3: the loop over tiles, for shapes that are whole tiles (M, N
// and K multiples of 32). Each step loads a tile pair, waits, adds its partial product,
// and waits again before the next step's loads overwrite the tiles.
#define TILE 32

__global__ void matmul_tiled_loop(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = A[row * K + t + tx];
        Bs[ty][tx] = B[(t + ty) * N + col];
        __syncthreads();  // 1: the tile pair is loaded before anyone reads it
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // 2: everyone is done reading before the next loads overwrite it
    }
    C[row * N + col] = acc;
}
