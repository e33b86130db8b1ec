#define BM 64   // rows of C per block
#define BN 64   // columns of C per block
#define BK 16   // step along K
#define TM 4    // rows of C per thread
#define TN 4    // columns of C per thread

// C = A * B, row-major float32: A is M x K, B is K x N, C is M x N.
// Launch (fixed by the grader): block=(16, 16, 1), grid=(ceil(N/64), ceil(M/64))
__device__ float As[BM][BK];  // the tiles
__device__ float Bs[BK][BN];

__global__ void matmul_regblock(const float* A, const float* B, float* C, int M, int N, int K)
{

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;
    float a[TM], b[TN];

    for (int t = 0; t < K; t += BK) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {  // 64 x 16 = 1024 elements of A, 4 per thread
            int e = tid + s * 256, r = e / BK, c = e % BK;
            As[r][c] = (row0 + r < M && t + c < K) ? A[(row0 + r) * K + t + c] : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {  // 16 x 64 elements of B
            int e = tid + s * 256, r = e / BN, c = e % BN;
            Bs[r][c] = (t + r < K && col0 + c < N) ? B[(t + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();  // the tiles are complete

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
                a[i] = As[ty + 16 * i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];  // 16 FMAs on 8 loaded values
        }
        __syncthreads();  // everyone is done before the tiles are overwritten
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
}
