// Transposes of a rows x cols float32 matrix: out[c][r] = in[r][c].
// Launch with 32 x 8 threads per block and one block per 32 x 32 tile; each thread
// moves TILE_DIM / BLOCK_ROWS = 4 elements.
#define TILE_DIM 32
#define BLOCK_ROWS 8

// The reference: a plain copy with the same access pattern (reads and writes coalesced).
__global__ void copy_tile(const float* __restrict__ in, float* __restrict__ out,
                          int rows, int cols)
{
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            out[(y + j) * cols + x] = in[(y + j) * cols + x];
}

// Reads coalesced, writes strided by `rows` floats: every store touches its own segment.
__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                int rows, int cols)
{
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            out[x * rows + (y + j)] = in[(y + j) * cols + x];
}

// Through a shared tile: both global accesses coalesced, but the read tile[threadIdx.x][..]
// walks a column of a 32 x 32 array: 32 threads, one bank, a 32-way conflict.
__global__ void transpose_shared(const float* __restrict__ in, float* __restrict__ out,
                                 int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;  // column of out = row of in
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// The same with one word of padding per row: a column now spans all 32 banks.
__global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out,
                                 int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// The other naive transpose: writes coalesced, reads walk down columns of `in`, strided by
// `cols` floats. No tile, no shared memory; on the GPUs of this course it is faster than
// the [32][32] shared tile, because a strided read's sectors stay in L1 and L2 for the
// next threads of the column while a strided write leaves a partial sector behind.
__global__ void transpose_reads(const float* __restrict__ in, float* __restrict__ out,
                                int rows, int cols)
{
    int x = blockIdx.y * TILE_DIM + threadIdx.x;  // a row of in, a column of out
    int y = blockIdx.x * TILE_DIM + threadIdx.y;  // a column of in, a row of out
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = in[x * cols + (y + j)];
}
