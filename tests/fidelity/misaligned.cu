// Wide accesses at addresses off their alignment: a GPU stops each with "misaligned address".

// A vec4 kernel without its alignment test: row r of a K-column matrix starts at r * K
// floats, a multiple of 4 only when K is.
__global__ void rows_vec4(const float* A, float* out, int K)
{
    int r = blockIdx.x, q = threadIdx.x;
    if (4 * q + 3 < K) {
        float4 v = reinterpret_cast<const float4*>(&A[r * K])[q];   // row load
        out[r * K + 4 * q] = v.x + v.y + v.z + v.w;
    }
}

// A double carved after a char[100] from dynamic shared memory: byte 100 is not a
// multiple of 8.
__global__ void carved_double(const float* x, float* out)
{
    extern __shared__ char smem[];
    char* flags = smem;
    double* sums = reinterpret_cast<double*>(smem + 100);
    int t = threadIdx.x;
    flags[t] = 1;
    sums[t] = x[t];                                                 // carved store
    __syncthreads();
    out[t] = (float)sums[(t + 1) % blockDim.x] + flags[t];
}

// A tile padded by one float, read by float4: row r starts at r * 33 floats.
__global__ void padded_tile_vec4(const float* x, float* out)
{
    __shared__ float tile[8][33];
    int t = threadIdx.x;
    for (int j = t; j < 8 * 33; j += blockDim.x) tile[j / 33][j % 33] = x[j];
    __syncthreads();
    int r = t / 8, c = (t % 8) * 4;
    float4 v = *reinterpret_cast<const float4*>(&tile[r][c]);        // tile load
    out[t] = v.x + v.y + v.z + v.w;
}
