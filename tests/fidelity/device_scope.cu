// A static __shared__ array inside __device__ functions (blockReduceSum with warp shuffles),
// and constant memory set from the host (PMPP's 2-D convolutions).
#define FULL_MASK 0xffffffff

__inline__ __device__ float warpReduceSum(float val)
{
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        val += __shfl_down_sync(FULL_MASK, val, offset);
    return val;
}

__inline__ __device__ float blockReduceSum(float val)
{
    static __shared__ float shared[32];  // one partial sum per warp
    int lane = threadIdx.x % warpSize;
    int wid = threadIdx.x / warpSize;
    val = warpReduceSum(val);
    if (lane == 0) shared[wid] = val;
    __syncthreads();
    val = (threadIdx.x < blockDim.x / warpSize) ? shared[lane] : 0;
    if (wid == 0) val = warpReduceSum(val);
    return val;
}

__device__ int blockCount(int pred)
{
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    if (pred) atomicAdd(&count, 1);
    __syncthreads();
    return count;
}

__global__ void deviceReduceKernel(const float* in, float* out, int* positive, int N)
{
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x)
        sum += in[i];
    int pos = blockCount(blockIdx.x * blockDim.x + threadIdx.x < N &&
                         in[blockIdx.x * blockDim.x + threadIdx.x] > 0.0f);
    sum = blockReduceSum(sum);
    if (threadIdx.x == 0) {
        out[blockIdx.x] = sum;
        positive[blockIdx.x] = pos;
    }
}

#define MASK_DIM 5
#define MASK_OFFSET (MASK_DIM / 2)
__constant__ int mask[MASK_DIM * MASK_DIM];

__global__ void convolution_2d(const int* matrix, int* result, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int start_r = row - MASK_OFFSET;
    int start_c = col - MASK_OFFSET;
    int temp = 0;
    for (int i = 0; i < MASK_DIM; i++)
        for (int j = 0; j < MASK_DIM; j++)
            if (start_r + i >= 0 && start_r + i < N && start_c + j >= 0 && start_c + j < N)
                temp += matrix[(start_r + i) * N + (start_c + j)] * mask[i * MASK_DIM + j];
    if (row < N && col < N) result[row * N + col] = temp;
}

#define FILTER_RADIUS 2
#define IN_TILE_DIM 32
#define OUT_TILE_DIM ((IN_TILE_DIM) - 2 * (FILTER_RADIUS))
__constant__ float F_c[2 * FILTER_RADIUS + 1][2 * FILTER_RADIUS + 1];

__global__ void convolution_tiled_2D_const_mem_kernel(const float* N, float* P, int width,
                                                      int height)
{
    int col = blockIdx.x * OUT_TILE_DIM + threadIdx.x - FILTER_RADIUS;
    int row = blockIdx.y * OUT_TILE_DIM + threadIdx.y - FILTER_RADIUS;
    __shared__ float N_s[IN_TILE_DIM][IN_TILE_DIM];
    if (row >= 0 && row < height && col >= 0 && col < width)
        N_s[threadIdx.y][threadIdx.x] = N[row * width + col];
    else
        N_s[threadIdx.y][threadIdx.x] = 0.0f;
    __syncthreads();
    int tileCol = threadIdx.x - FILTER_RADIUS;
    int tileRow = threadIdx.y - FILTER_RADIUS;
    if (col >= 0 && col < width && row >= 0 && row < height && tileCol >= 0 &&
        tileCol < OUT_TILE_DIM && tileRow >= 0 && tileRow < OUT_TILE_DIM) {
        float Pvalue = 0.0f;
        for (int fRow = 0; fRow < 2 * FILTER_RADIUS + 1; fRow++)
            for (int fCol = 0; fCol < 2 * FILTER_RADIUS + 1; fCol++)
                Pvalue += F_c[fRow][fCol] * N_s[tileRow + fRow][tileCol + fCol];
        P[row * width + col] = Pvalue;
    }
}
