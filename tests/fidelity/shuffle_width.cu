// Warp shuffles with a width argument: every width, every offset (even past the segment).
#define FULL 0xffffffffu
__global__ void shfl_widths(int* out)  // one warp
{
    int lane = threadIdx.x, k = 0;
    int v = 10 * lane + 1;
    for (int w = 1; w <= 32; w *= 2)
        for (int d = 0; d < 34; d += d < 8 ? 1 : 5) {
            out[(4 * k + 0) * 32 + lane] = __shfl_sync(FULL, v, d, w);
            out[(4 * k + 1) * 32 + lane] = __shfl_up_sync(FULL, v, d, w);
            out[(4 * k + 2) * 32 + lane] = __shfl_down_sync(FULL, v, d, w);
            out[(4 * k + 3) * 32 + lane] = __shfl_xor_sync(FULL, v, d, w);
            ++k;
        }
}

// Segmented sums over 16 and 8 lanes, each segment with its own mask; a double and a
// negative source lane (counted modulo 32) too.
__global__ void segment_sums(const float* x, float* s16, float* s8, double* d8, float* last)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    float v = x[i], u = v;
    double dv = v;
    unsigned m16 = 0xffffu << (lane & 16), m8 = 0xffu << (lane & 24);
    for (int o = 8; o > 0; o /= 2) v += __shfl_xor_sync(m16, v, o, 16);
    for (int o = 4; o > 0; o /= 2) {
        u += __shfl_down_sync(m8, u, o, 8);
        dv += __shfl_xor_sync(m8, dv, o, 8);
    }
    s16[i] = v;
    s8[i] = __shfl_sync(m8, u, 0, 8);
    d8[i] = dv;
    last[i] = __shfl_sync(FULL, x[i], -1, 8);
}
