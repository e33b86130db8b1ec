#define TILE_DIM 32
#define BLOCK_ROWS 8

// out = in transposed: in is rows x cols, out is cols x rows, row-major float32.
__global__ void transpose_shared(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < rows)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
