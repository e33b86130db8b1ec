// The same naive product with the roles of x and y swapped: threadIdx.x walks the rows
// of C. Neighbouring threads of a warp now read B at the same address (a broadcast) but
// A and C with a stride of K and N floats: every load of A and store of C is uncoalesced.
__global__ void matmul_naive_xrow(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
