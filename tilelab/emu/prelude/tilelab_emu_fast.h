// tilelab CPU emulator: CUDA's fast single-precision intrinsics as a GPU computes them, and
// the flush to zero of -ftz=true (and --use_fast_math).
//
// The intrinsics run on a GPU's special function unit (MUFU) after a single-precision step
// that the compiler emits before it, and that step is where most of their documented error
// comes from; it is done here as the GPU does it, and the unit's own approximation (at most
// 2^-21.41 absolute for sin and cos on [-pi, pi], 2 ulp for ex2 and lg2) is computed exactly:
// - __sinf, __cosf, __sincosf: the argument in turns, x * (float)(1/(2 pi)) rounded toward
//   zero (FMUL.RZ), then the sine of its fraction: the error grows with |x| as on a GPU
//   (about |x| * 2^-22 absolute), e.g. 3e-4 at x = 2000;
// - __expf, __exp10f: 2 to the power of x * (float)log2(e) (or log2(10)) rounded to float:
//   the documented 2 + floor(|1.173 x|) ulp (2 + floor(|2.97 x|) for __exp10f);
// - __logf, __log10f: the float log2 of x times (float)ln(2) (or log10(2)); __log2f: the
//   float log2; __powf: 2 to the power of y * __log2f(x); __tanf: __sinf / __cosf;
// - __fdividef(x, y): x * (1/y), 0 for 2^126 < |y| < 2^128 (infinity / y: NaN), as
//   div.approx.f32 documents.
// With -ftz=true a launch runs with the CPU's flush-to-zero and denormals-are-zero modes:
// single-precision subnormal inputs and results are zero, as on a GPU; on the CPU the modes
// flush double precision too (a GPU keeps double subnormals, below 2.3e-308).
#pragma once

namespace tl_emu {

TL_DEF bool g_ftz TL_INIT(false);  // set by the kernel's unit when built with -ftz=true

// The kernel's unit of a -ftz=true build holds one (a static object: set when it loads).
struct FtzMode {
  explicit FtzMode(bool on) { g_ftz = on; }
};

// The CPU's flush-to-zero (FTZ) and denormals-are-zero (DAZ) modes, for the launch's threads
// (fibers switch without touching the floating-point control register).
inline void enter_float_mode() {
  if (!g_ftz) return;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | 0x8040u);
#elif defined(__aarch64__)
  __builtin_aarch64_set_fpcr(__builtin_aarch64_get_fpcr() | (1u << 24));
#endif
}

inline float fmul_rz(float a, float b) {  // a * b rounded toward zero (exact in double)
  double p = (double)a * (double)b;
  float r = (float)p;
  if (std::fabs((double)r) > std::fabs(p)) r = std::nextafter(r, 0.0f);
  return r;
}
inline float sin_turns(float x, bool cosine) {
  const float t = fmul_rz(x, 0.15915493667125701904f);  // (float)(1 / (2 pi))
  const double f = (double)t - std::trunc((double)t);   // the fraction of a turn
  const double a = 6.283185307179586476925 * f;
  return (float)(cosine ? std::cos(a) : std::sin(a));
}
inline float fast_sinf(float x) { return sin_turns(x, false); }
inline float fast_cosf(float x) { return sin_turns(x, true); }
inline float fast_exp2(float t) { return (float)std::exp2((double)t); }
inline float fast_expf(float x) { return fast_exp2(x * 1.4426950216293334961f); }
inline float fast_exp10f(float x) { return fast_exp2(x * 3.3219280242919921875f); }
inline float fast_log2f(float x) { return (float)std::log2((double)x); }
inline float fast_logf(float x) { return fast_log2f(x) * 0.69314718246459960938f; }
inline float fast_log10f(float x) { return fast_log2f(x) * 0.30102999508380889893f; }
inline float fast_powf(float x, float y) { return fast_exp2(y * fast_log2f(x)); }
inline float fast_fdividef(float x, float y) {
  const float ay = std::fabs(y);
  if (ay > 8.507059173023462e37f && ay <= 3.4028234663852886e38f)  // 2^126 < |y| < 2^128
    return std::isinf(x) ? NAN : x * std::copysign(0.0f, y);
  const float r = 1.0f / y;
  return x * r;
}
inline float fast_tanf(float x) { return fast_fdividef(fast_sinf(x), fast_cosf(x)); }
inline void fast_sincosf(float x, float* s, float* c) {
  *s = fast_sinf(x);
  *c = fast_cosf(x);
}

}  // namespace tl_emu

static inline float __fdividef(float a, float b) { return tl_emu::fast_fdividef(a, b); }
static inline float fdividef(float a, float b) { return a / b; }  // __fdividef with fast math
