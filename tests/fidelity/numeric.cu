// CUDA's numeric semantics: conversions to integers (saturating, NaN to 0), contraction of
// a * b + c into a fused multiply-add (nvcc's --fmad), arithmetic in a named rounding mode.

// C casts, static_cast and functional casts of float and double to the integer types.
__global__ void casts(const float* x, const double* xd, int n, int* i32, unsigned int* u32,
                      long long* i64, unsigned long long* u64, int* di32, unsigned int* du32,
                      long long* di64, unsigned long long* du64)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float v = x[t];
    double w = xd[t];
    i32[t] = (int)v;
    u32[t] = (unsigned int)v;
    i64[t] = (long long)v;
    u64[t] = (unsigned long long)(v);
    di32[t] = static_cast<int>(w);
    du32[t] = unsigned(w);
    di64[t] = (long long)w;
    du64[t] = (unsigned long long)w;
}

// The conversion intrinsics in each rounding mode: [mode][n], modes rn, rz, ru, rd.
#define CONVERT(m)                                       \
    i32[k * n + t] = __float2int_##m(v);                 \
    u32[k * n + t] = __float2uint_##m(v);                \
    i64[k * n + t] = __float2ll_##m(v);                  \
    u64[k * n + t] = __float2ull_##m(v);                 \
    di32[k * n + t] = __double2int_##m(w);               \
    du32[k * n + t] = __double2uint_##m(w);              \
    di64[k * n + t] = __double2ll_##m(w);                \
    du64[k * n + t] = __double2ull_##m(w);               \
    ++k;
__global__ void convert_modes(const float* x, const double* xd, int n, int* i32,
                              unsigned int* u32, long long* i64, unsigned long long* u64,
                              int* di32, unsigned int* du32, long long* di64,
                              unsigned long long* du64)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float v = x[t];
    double w = xd[t];
    int k = 0;
    CONVERT(rn) CONVERT(rz) CONVERT(ru) CONVERT(rd)
}

// A histogram that clamps its bin: NaN and out-of-range values land where a GPU puts them.
__global__ void histogram_clamp(const float* x, int n, unsigned int* bins)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        int b = min(max((int)(x[t] * 10), 0), 9);
        atomicAdd(&bins[b], 1u);
    }
}

// a * b + c: one rounding with --fmad=true (the default), two with --fmad=false.
__global__ void fmad(const float* a, const float* b, const float* c, const double* da,
                     const double* db, const double* dc, float* out, double* dout, int n,
                     float* dot)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        out[t] = a[t] * b[t] + c[t];
        dout[t] = da[t] * db[t] - dc[t];
    }
    if (t == 0) {
        float acc = 0.0f;
        for (int i = 0; i < n; ++i)
            acc += a[i] * b[i];
        dot[0] = acc;
    }
}

// Rounding-mode arithmetic and conversions: f[op][n] and d[op][n], in the order listed.
#define ROUNDED(m)                                                  \
    f[k++ * n + t] = __fadd_##m(x, y);                              \
    f[k++ * n + t] = __fsub_##m(x, y);                              \
    f[k++ * n + t] = __fmul_##m(x, y);                              \
    f[k++ * n + t] = __fdiv_##m(x, y);                              \
    f[k++ * n + t] = __fmaf_##m(x, y, z);                           \
    f[k++ * n + t] = __frcp_##m(y);                                 \
    f[k++ * n + t] = __fsqrt_##m(fabsf(x));                         \
    f[k++ * n + t] = __int2float_##m(i);                            \
    f[k++ * n + t] = __uint2float_##m((unsigned int)i * 3u);        \
    f[k++ * n + t] = __ll2float_##m(l);                             \
    f[k++ * n + t] = __ull2float_##m((unsigned long long)l * 3ull); \
    f[k++ * n + t] = __double2float_##m(dx);                        \
    d[j++ * n + t] = __dadd_##m(dx, dy);                            \
    d[j++ * n + t] = __dsub_##m(dx, dy);                            \
    d[j++ * n + t] = __dmul_##m(dx, dy);                            \
    d[j++ * n + t] = __ddiv_##m(dx, dy);                            \
    d[j++ * n + t] = __fma_##m(dx, dy, dz);                         \
    d[j++ * n + t] = __drcp_##m(dy);                                \
    d[j++ * n + t] = __dsqrt_##m(fabs(dx));                         \
    d[j++ * n + t] = __ll2double_##m(l);                            \
    d[j++ * n + t] = __ull2double_##m((unsigned long long)l * 3ull);
__global__ void rounding(const float* xs, const float* ys, const float* zs, const double* dxs,
                         const double* dys, const double* dzs, const long long* ls, int n,
                         float* f, double* d)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float x = xs[t], y = ys[t], z = zs[t];
    double dx = dxs[t], dy = dys[t], dz = dzs[t];
    long long l = ls[t];
    int i = (int)(l >> 33);
    int k = 0, j = 0;
    ROUNDED(rn) ROUNDED(rz) ROUNDED(ru) ROUNDED(rd)
}

// Implicit conversions: initialisation, assignment, argument, return value, a macro.
#define TENTHS(v) ((v) * 10)
__device__ int truncate_arg(int v) { return v; }
__device__ long long as_long(double v) { return v; }
__global__ void implicit(const float* x, const double* xd, int n, int* i32, unsigned int* u32,
                         long long* i64, unsigned long long* u64, int* args, int* tenths)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int i = x[t];
    i32[t] = i;
    u32[t] = x[t];
    i64[t] = as_long(xd[t]);
    size_t s = xd[t];
    u64[t] = s;
    args[t] = truncate_arg(x[t]);
    tenths[t] = TENTHS(x[t]);
}
