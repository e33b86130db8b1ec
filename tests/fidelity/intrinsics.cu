// Integer intrinsics and CUDA-only math functions, one output row per function.

#define ROW(expr) out[k++ * n + t] = (unsigned int)(expr);
#define SIMD(name) ROW(name##2(a, b)) ROW(name##4(a, b))
__global__ void integer_ops(const unsigned int* as, const unsigned int* bs,
                            const unsigned int* cs, int n, unsigned int* out,
                            unsigned long long* wide)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned int a = as[t], b = bs[t], c = cs[t];
    int k = 0;
    ROW(__byte_perm(a, b, c & 0x7777))
    ROW(__funnelshift_l(a, b, c)) ROW(__funnelshift_lc(a, b, c & 63))
    ROW(__funnelshift_r(a, b, c)) ROW(__funnelshift_rc(a, b, c & 63))
    ROW(__dp4a((int)a, (int)b, (int)c)) ROW(__dp4a(a, b, c))
    ROW(__dp2a_lo((int)a, (int)b, (int)c)) ROW(__dp2a_hi((int)a, (int)b, (int)c))
    ROW(__dp2a_lo(a, b, c)) ROW(__dp2a_hi(a, b, c))
    ROW(__sad((int)a, (int)b, c)) ROW(__usad(a, b, c))
    ROW(__mulhi((int)a, (int)b)) ROW(__umulhi(a, b))
    ROW(__hadd((int)a, (int)b)) ROW(__rhadd((int)a, (int)b)) ROW(__uhadd(a, b)) ROW(__urhadd(a, b))
    ROW(__brev(a)) ROW(__clz((int)a)) ROW(__ffs((int)a)) ROW(__popc(a))
    ROW(__fns(a, c & 31, (int)(b % 7) - 3))
    SIMD(__vadd) SIMD(__vsub) SIMD(__vaddss) SIMD(__vsubss) SIMD(__vaddus) SIMD(__vsubus)
    SIMD(__vabsdiffs) SIMD(__vabsdiffu) SIMD(__vavgs) SIMD(__vavgu) SIMD(__vhaddu)
    SIMD(__vmaxs) SIMD(__vmaxu) SIMD(__vmins) SIMD(__vminu) SIMD(__vcmpeq) SIMD(__vcmpne)
    SIMD(__vcmpges) SIMD(__vcmpgeu) SIMD(__vcmpgts) SIMD(__vcmpgtu) SIMD(__vcmples)
    SIMD(__vcmpleu) SIMD(__vcmplts) SIMD(__vcmpltu) SIMD(__vseteq) SIMD(__vsetne)
    SIMD(__vsetges) SIMD(__vsetgeu) SIMD(__vsetgts) SIMD(__vsetgtu) SIMD(__vsetles)
    SIMD(__vsetleu) SIMD(__vsetlts) SIMD(__vsetltu) SIMD(__vsads) SIMD(__vsadu)
    ROW(__vabs2(a)) ROW(__vabs4(a)) ROW(__vabsss2(a)) ROW(__vabsss4(a))
    ROW(__vneg2(a)) ROW(__vneg4(a)) ROW(__vnegss2(a)) ROW(__vnegss4(a))
    unsigned long long x = ((unsigned long long)a << 32) | b, y = ((unsigned long long)c << 32) | a;
    int j = 0;
    wide[j++ * n + t] = (unsigned long long)__mul64hi((long long)x, (long long)y);
    wide[j++ * n + t] = __umul64hi(x, y);
    wide[j++ * n + t] = __brevll(x);
    wide[j++ * n + t] = (unsigned long long)__clzll((long long)(x >> (c & 63)));
    wide[j++ * n + t] = (unsigned long long)__ffsll((long long)(x << (c & 63)));
    wide[j++ * n + t] = (unsigned long long)__popcll(x);
}

#define FN(expr) out[k++ * n + t] = (expr);
#define DN(expr) dout[j++ * n + t] = (expr);
__global__ void cuda_math(const float* xs, int n, float* out, double* dout)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float x = xs[t];             // in (-4, 4)
    float p = 0.5f + x / 8.1f;   // in (0, 1)
    double dx = x, dp = p;
    int k = 0, j = 0;
    float s, c;
    double ds, dc;
    sincospif(x, &s, &c);
    sincospi(dx, &ds, &dc);
    float v[3] = {x, p, 1.5f};
    double dv[3] = {dx, dp, 1.5};
    FN(sinpif(x)) FN(cospif(x)) FN(s) FN(c) FN(rcbrtf(x)) FN(normcdff(x)) FN(normcdfinvf(p))
    FN(erfinvf(2.0f * p - 1.0f)) FN(erfcinvf(2.0f * p)) FN(erfcxf(x)) FN(exp10f(x))
    FN(rhypotf(x, p)) FN(norm3df(x, p, 1.5f)) FN(rnorm3df(x, p, 1.5f))
    FN(norm4df(x, p, 1.5f, -2.0f)) FN(rnorm4df(x, p, 1.5f, -2.0f)) FN(normf(3, v))
    FN(rnormf(3, v)) FN(cyl_bessel_i0f(x)) FN(cyl_bessel_i1f(x)) FN(fdividef(x, p))
    DN(sinpi(dx)) DN(cospi(dx)) DN(ds) DN(dc) DN(rcbrt(dx)) DN(normcdf(dx)) DN(normcdfinv(dp))
    DN(erfinv(2.0 * dp - 1.0)) DN(erfcinv(2.0 * dp)) DN(erfcx(dx)) DN(exp10(dx))
    DN(rhypot(dx, dp)) DN(norm3d(dx, dp, 1.5)) DN(rnorm3d(dx, dp, 1.5))
    DN(norm4d(dx, dp, 1.5, -2.0)) DN(rnorm4d(dx, dp, 1.5, -2.0)) DN(norm(3, dv))
    DN(rnorm(3, dv)) DN(cyl_bessel_i0(dx)) DN(cyl_bessel_i1(dx))
}
