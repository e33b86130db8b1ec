// tilelab CPU emulator: CUDA's numeric semantics and intrinsic families, computed exactly.
//
// - Conversions to integers as a GPU's cvt.*i instructions do them: NaN gives 0 from a float
//   to a 32-bit integer and the "integer indefinite" otherwise (the type's lowest value if
//   signed, its top bit alone if unsigned: measured on an H100), a value out of range gives
//   the nearest end of the range (the translator sends C casts of
//   floating values to integer types through tl_emu::cvt).
// - Arithmetic in a named rounding mode (__fadd_rz, __dmul_ru, __int2float_rd, ...): the
//   exact result's error sign, found with error-free transformations, picks the neighbour.
// - The _rn intrinsics are never fused with a neighbouring multiply or add (as on a GPU),
//   whereas plain a * b + c is, with --fmad=true (the compiler's -ffp-contract).
// - Integer intrinsics (__byte_perm, __funnelshift_*, __dp4a, the SIMD __v*2/__v*4, ...)
//   and the CUDA-only math functions (sinpif, rcbrtf, normcdff, erfinvf, ...).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define TL_OPAQUE(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__)
#define TL_OPAQUE(v) __asm__("" : "+w"(v))
#else
#define TL_OPAQUE(v) __asm__("" : "+m"(v))
#endif

namespace tl_emu {

enum Rnd : int { RN = 0, RZ = 1, RU = 2, RD = 3 };

// ---- conversions to integers: NaN (see above), saturation at the ends ---------------------------
template <class F> constexpr F round_int(F x, Rnd m) {
  switch (m) {
    case RN: return sizeof(F) == 4 ? __builtin_nearbyintf(x) : __builtin_nearbyint(x);  // ties to even
    case RZ: return sizeof(F) == 4 ? __builtin_truncf(x) : __builtin_trunc(x);
    case RU: return sizeof(F) == 4 ? __builtin_ceilf(x) : __builtin_ceil(x);
    default: return sizeof(F) == 4 ? __builtin_floorf(x) : __builtin_floor(x);
  }
}
template <class I, class F> constexpr I to_int(F x, Rnd m) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>, "float to integer");
  if (x != x) {  // as measured on an H100: 0 from a float to 32 bits, else the indefinite value
    if (sizeof(F) == 4 && sizeof(I) == 4) return 0;
    return std::is_signed_v<I> ? std::numeric_limits<I>::min() : (I)((I)1 << (sizeof(I) * 8 - 1));
  }
  const F r = round_int(x, m);
  const F top = (F)((long double)(std::numeric_limits<I>::max() / 2 + 1) * 2);  // 2^digits
  const F bottom = std::is_signed_v<I> ? -top : (F)0;
  if (r < bottom) return std::numeric_limits<I>::min();
  if (r >= top) return std::numeric_limits<I>::max();
  return (I)r;
}
// A C cast, static_cast or functional cast to an integer type, as nvcc compiles it.
template <class T> struct Cvt {
  template <class V> static constexpr T from(V v) {
    using U = std::remove_cv_t<V>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                  std::is_floating_point_v<typename Value<U>::type>) {
      if constexpr (sizeof(T) >= 4) return to_int<T>((typename Value<U>::type)v, RZ);
      // nvcc converts to 32 bits (cvt.rzi.s32 or .u32) and keeps the low bytes
      using Wide = std::conditional_t<std::is_signed_v<T>, int, unsigned int>;
      return (T)to_int<Wide>((typename Value<U>::type)v, RZ);
    } else {
      return (T)v;
    }
  }
};

// `i += x` with i an integer and x floating: the result converts as a cast does.
template <class T> struct CvtRef {
  T& r;
  template <class V> T& operator+=(V v) { return r = Cvt<T>::from(r + v); }
  template <class V> T& operator-=(V v) { return r = Cvt<T>::from(r - v); }
  template <class V> T& operator*=(V v) { return r = Cvt<T>::from(r * v); }
  template <class V> T& operator/=(V v) { return r = Cvt<T>::from(r / v); }
};
template <class T> inline CvtRef<T> cvt_ref(T& r) { return CvtRef<T>{r}; }

// ---- rounding an exact value given as (nearest, sign of the rest) ------------------------
template <class F> inline F next_up(F x) {
  if (x != x || x == (F)INFINITY) return x;
  if (x == 0) return std::numeric_limits<F>::denorm_min();
  using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  U u = tl_bits<U>(x);
  u = x > 0 ? u + 1 : u - 1;
  return tl_bits<F>(u);
}
template <class F> inline F next_down(F x) { return -next_up(-x); }
// f is a neighbour of the exact value v; `s` is the sign of v - f. The result in mode m.
template <class F> inline F step(F f, int s, Rnd m) {
  if (s > 0 && (m == RU || (m == RZ && f < 0))) return next_up(f);
  if (s < 0 && (m == RD || (m == RZ && f > 0))) return next_down(f);
  return f;
}
inline int sgn(double v) { return (v > 0) - (v < 0); }
// The float in mode m of the exact value hi + rest (|rest| well under an ulp of hi,
// `rest` given by its sign).
inline float round_f(double hi, int rest, Rnd m) {
  float f = (float)hi;
  if (m == RN || f != f) return f;
  int s = (double)f < hi ? 1 : (double)f > hi ? -1 : rest;
  return step(f, s, m);
}
inline double round_d(double hi, int rest, Rnd m) { return hi != hi ? hi : step(hi, rest, m); }
// Overflow of a finite operation to infinity, in a mode that stops at the largest finite.
template <class F> inline F overflow(F r, Rnd m) {
  if (m == RZ || (m == RD && r > 0) || (m == RU && r < 0))
    return r > 0 ? std::numeric_limits<F>::max() : -std::numeric_limits<F>::max();
  return r;
}
inline double two_sum_err(double a, double b, double s) {
  double bb = s - a;
  return (a - (s - bb)) + (b - bb);
}

inline float fadd(float a, float b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  if (m == RN) { float r = a + b; TL_OPAQUE(r); return r; }
  double s = (double)a + (double)b;
  return round_f(s, sgn(two_sum_err(a, b, s)), m);
}
inline float fmul(float a, float b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  if (m == RN) { float r = a * b; TL_OPAQUE(r); return r; }
  return round_f((double)a * (double)b, 0, m);  // exact in double
}
inline float fdiv(float a, float b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  if (m == RN) { float r = a / b; TL_OPAQUE(r); return r; }
  double q = (double)a / (double)b, r = __builtin_fma(-q, (double)b, (double)a);
  return round_f(q, __builtin_isfinite(q) && q != 0 ? sgn(r) * sgn(b) : 0, m);
}
inline float fsqrt(float a, Rnd m) {
  TL_OPAQUE(a);
  double q = __builtin_sqrt((double)a);
  if (m == RN) return (float)q;  // double rounding is innocuous for sqrt
  return round_f(q, __builtin_isfinite(q) ? -sgn(__builtin_fma(q, q, -(double)a)) : 0, m);
}
inline float ffma(float a, float b, float c, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b); TL_OPAQUE(c);
  if (m == RN) return __builtin_fmaf(a, b, c);
  double p = (double)a * (double)b, s = p + (double)c;  // p exact
  return round_f(s, sgn(two_sum_err(p, c, s)), m);
}
#if defined(__x86_64__)
// Double arithmetic in a directed mode on SSE's own rounding (MXCSR's RC field), with
// flush-to-zero and denormals-are-zero off (-ftz=true leaves doubles alone on a GPU): exact
// at denormal results too, where an error-free transformation's residual underflows. One
// asm statement sets the mode, computes and restores it, so nothing moves across.
#define TL_DOUBLE_IN_MODE(NAME, INSN)                                                      \
  inline double NAME(double a, double b, Rnd m) {                                         \
    static const unsigned rc[4] = {0u, 3u, 2u, 1u};  /* RN, RZ, RU, RD */                 \
    unsigned saved, want;                                                                  \
    __asm__ volatile("stmxcsr %0" : "=m"(saved));                                          \
    want = (saved & ~0xE040u) | (rc[m] << 13);                                             \
    __asm__ volatile("ldmxcsr %2\n\t" INSN " %1, %0\n\tldmxcsr %3"                         \
                     : "+x"(a) : "x"(b), "m"(want), "m"(saved));                            \
    return a;                                                                              \
  }
TL_DOUBLE_IN_MODE(dadd, "addsd")
TL_DOUBLE_IN_MODE(dmul, "mulsd")
TL_DOUBLE_IN_MODE(ddiv, "divsd")
TL_DOUBLE_IN_MODE(dsqrt_of, "sqrtsd")  // sqrt of b (a is overwritten)
inline double dsqrt(double a, Rnd m) { return dsqrt_of(0.0, a, m); }
#else
inline double dadd(double a, double b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  double s = a + b;
  TL_OPAQUE(s);
  if (m == RN) return s;
  if (__builtin_isinf(s) && __builtin_isfinite(a) && __builtin_isfinite(b)) return overflow(s, m);
  return round_d(s, sgn(two_sum_err(a, b, s)), m);
}
inline double dmul(double a, double b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  double p = a * b;
  TL_OPAQUE(p);
  if (m == RN) return p;
  if (__builtin_isinf(p) && __builtin_isfinite(a) && __builtin_isfinite(b)) return overflow(p, m);
  return round_d(p, __builtin_isfinite(p) ? sgn(__builtin_fma(a, b, -p)) : 0, m);
}
inline double ddiv(double a, double b, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b);
  double q = a / b;
  TL_OPAQUE(q);
  if (m == RN) return q;
  if (__builtin_isinf(q) && __builtin_isfinite(a) && b != 0) return overflow(q, m);
  return round_d(q, __builtin_isfinite(q) && q != 0 ? sgn(__builtin_fma(-q, b, a)) * sgn(b) : 0,
                 m);
}
inline double dsqrt(double a, Rnd m) {
  TL_OPAQUE(a);
  double q = __builtin_sqrt(a);
  if (m == RN) return q;
  return round_d(q, __builtin_isfinite(q) ? -sgn(__builtin_fma(q, q, -a)) : 0, m);
}
#endif
inline double dfma(double a, double b, double c, Rnd m) {
  TL_OPAQUE(a); TL_OPAQUE(b); TL_OPAQUE(c);
  double r = __builtin_fma(a, b, c);
  if (m == RN) return r;
  if (!__builtin_isfinite(r))
    return __builtin_isinf(r) && __builtin_isfinite(a) && __builtin_isfinite(b) &&
           __builtin_isfinite(c) ? overflow(r, m) : r;
  double p = a * b;
  TL_OPAQUE(p);  // not contracted with the add below
  double pe = __builtin_fma(a, b, -p), s = p + c, se = two_sum_err(p, c, s);
  double d = s - r, rest = (d + se) + pe;  // a*b + c - r
  return round_d(r, sgn(rest), m);
}
// Integers to floating point in mode m (the value is exact in 128 bits).
template <class F, class I> inline F from_int(I x, Rnd m) {
  F f = (F)x;
  if (m == RN) return f;
  using W = std::conditional_t<std::is_signed_v<I>, __int128, unsigned __int128>;
  W back = f >= (F)__builtin_ldexpl(1.0L, 127) ? (W)-1 : (W)f;
  int s = (W)x > back ? 1 : (W)x < back ? -1 : 0;
  if (f >= (F)__builtin_ldexpl(1.0L, 64)) s = -1;  // rounded up to 2^64: above any I
  return step(f, s, m);
}

}  // namespace tl_emu

// ---- rounding-mode arithmetic ----------------------------------------------------------------
#define TL_RND4(DEF) DEF(rn, tl_emu::RN) DEF(rz, tl_emu::RZ) DEF(ru, tl_emu::RU) DEF(rd, tl_emu::RD)
#define TL_ARITH(S, M)                                                                     \
  static inline float __fadd_##S(float a, float b) { return tl_emu::fadd(a, b, M); }      \
  static inline float __fsub_##S(float a, float b) { return tl_emu::fadd(a, -b, M); }     \
  static inline float __fmul_##S(float a, float b) { return tl_emu::fmul(a, b, M); }      \
  static inline float __fdiv_##S(float a, float b) { return tl_emu::fdiv(a, b, M); }      \
  static inline float __frcp_##S(float a) { return tl_emu::fdiv(1.0f, a, M); }            \
  static inline float __fsqrt_##S(float a) { return tl_emu::fsqrt(a, M); }                \
  static inline float __fmaf_##S(float a, float b, float c) { return tl_emu::ffma(a, b, c, M); } \
  static inline double __dadd_##S(double a, double b) { return tl_emu::dadd(a, b, M); }   \
  static inline double __dsub_##S(double a, double b) { return tl_emu::dadd(a, -b, M); }  \
  static inline double __dmul_##S(double a, double b) { return tl_emu::dmul(a, b, M); }   \
  static inline double __ddiv_##S(double a, double b) { return tl_emu::ddiv(a, b, M); }   \
  static inline double __drcp_##S(double a) { return tl_emu::ddiv(1.0, a, M); }           \
  static inline double __dsqrt_##S(double a) { return tl_emu::dsqrt(a, M); }              \
  static inline double __fma_##S(double a, double b, double c) { return tl_emu::dfma(a, b, c, M); }
TL_RND4(TL_ARITH)
static inline float __frsqrt_rn(float a) { return (float)(1.0 / __builtin_sqrt((double)a)); }

// ---- conversions -------------------------------------------------------------------------------
#define TL_CONV(S, M)                                                                      \
  static inline int __float2int_##S(float x) { return tl_emu::to_int<int>(x, M); }        \
  static inline unsigned int __float2uint_##S(float x) {                                  \
    return tl_emu::to_int<unsigned int>(x, M);                                           \
  }                                                                                        \
  static inline long long __float2ll_##S(float x) { return tl_emu::to_int<long long>(x, M); } \
  static inline unsigned long long __float2ull_##S(float x) {                             \
    return tl_emu::to_int<unsigned long long>(x, M);                                     \
  }                                                                                        \
  static inline int __double2int_##S(double x) { return tl_emu::to_int<int>(x, M); }      \
  static inline unsigned int __double2uint_##S(double x) {                                \
    return tl_emu::to_int<unsigned int>(x, M);                                           \
  }                                                                                        \
  static inline long long __double2ll_##S(double x) {                                     \
    return tl_emu::to_int<long long>(x, M);                                              \
  }                                                                                        \
  static inline unsigned long long __double2ull_##S(double x) {                           \
    return tl_emu::to_int<unsigned long long>(x, M);                                     \
  }                                                                                        \
  static inline float __int2float_##S(int x) { return tl_emu::from_int<float>(x, M); }    \
  static inline float __uint2float_##S(unsigned int x) { return tl_emu::from_int<float>(x, M); } \
  static inline float __ll2float_##S(long long x) { return tl_emu::from_int<float>(x, M); } \
  static inline float __ull2float_##S(unsigned long long x) {                             \
    return tl_emu::from_int<float>(x, M);                                                \
  }                                                                                        \
  static inline double __ll2double_##S(long long x) { return tl_emu::from_int<double>(x, M); } \
  static inline double __ull2double_##S(unsigned long long x) {                           \
    return tl_emu::from_int<double>(x, M);                                               \
  }                                                                                        \
  static inline float __double2float_##S(double x) { return tl_emu::round_f(x, 0, M); }
TL_RND4(TL_CONV)
static inline double __int2double_rn(int x) { return x; }
static inline double __uint2double_rn(unsigned int x) { return x; }
static inline int __double2hiint(double x) { return (int)(tl_bits<uint64_t>(x) >> 32); }
static inline int __double2loint(double x) { return (int)tl_bits<uint64_t>(x); }
static inline double __hiloint2double(int hi, int lo) {
  return tl_bits<double>(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

// ---- integer intrinsics ------------------------------------------------------------------------
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned int)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
  unsigned int r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
// The low 32 bits of the product of the operands' low 24 bits (sign-extended for __mul24).
static inline int __mul24(int a, int b) {
  return (int)((unsigned)(((int)((unsigned)a << 8) >> 8) * (long long)((int)((unsigned)b << 8) >> 8)));
}
static inline unsigned int __umul24(unsigned int a, unsigned int b) {
  return (a & 0xffffffu) * (b & 0xffffffu);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) {
  return (long long)(((__int128)a * b) >> 64);
}
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned int __uhadd(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a + b) >> 1);
}
static inline unsigned int __urhadd(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a + b + 1) >> 1);
}
static inline unsigned int __sad(int x, int y, unsigned int z) {
  return z + (unsigned int)(x > y ? (long long)x - y : (long long)y - x);
}
static inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) {
  return z + (x > y ? x - y : y - x);
}
// Byte s of the 8 bytes {y, x}; selector nibbles pick bytes; mode 0 only (as CUDA's).
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned int)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (s & 31)) >> 32);
}
static inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (s > 32 ? 32 : s)) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (s & 31));
}
static inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (s > 32 ? 32 : s));
}
static inline unsigned int __fns(unsigned int mask, unsigned int base, int offset) {
  if (offset == 0) return base < 32 && (mask >> base & 1) ? base : 0xffffffffu;
  int pos = (int)base, count = (offset < 0 ? -offset : offset) - 1, inc = offset > 0 ? 1 : -1;
  for (; pos >= 0 && pos < 32; pos += inc)
    if (mask >> pos & 1) {
      if (count == 0) return (unsigned int)pos;
      --count;
    }
  return 0xffffffffu;
}
namespace tl_emu {
inline int lane_s(unsigned v, int i, int w) {  // signed lane i of width w bits
  return (int)(v << (32 - w * (i + 1))) >> (32 - w);
}
inline unsigned lane_u(unsigned v, int i, int w) { return (v >> (w * i)) & ((1u << w) - 1); }
template <bool SA, bool SB> inline long long dot(unsigned a, unsigned b, int wa, int wb, int n,
                                                  int b0) {
  long long acc = 0;
  for (int i = 0; i < n; ++i)
    acc += (long long)(SA ? lane_s(a, i, wa) : (int)lane_u(a, i, wa)) *
           (SB ? lane_s(b, b0 + i, wb) : (int)lane_u(b, b0 + i, wb));
  return acc;
}
}  // namespace tl_emu
static inline int __dp4a(int a, int b, int c) {
  return (int)(unsigned)(c + tl_emu::dot<true, true>(a, b, 8, 8, 4, 0));
}
static inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  return (unsigned)(c + tl_emu::dot<false, false>(a, b, 8, 8, 4, 0));
}
static inline int __dp4a(char4 a, char4 b, int c) { return __dp4a(tl_bits<int>(a), tl_bits<int>(b), c); }
static inline unsigned int __dp4a(uchar4 a, uchar4 b, unsigned int c) {
  return __dp4a(tl_bits<unsigned>(a), tl_bits<unsigned>(b), c);
}
static inline int __dp2a_lo(int a, int b, int c) {
  return (int)(unsigned)(c + tl_emu::dot<true, true>(a, b, 16, 8, 2, 0));
}
static inline int __dp2a_hi(int a, int b, int c) {
  return (int)(unsigned)(c + tl_emu::dot<true, true>(a, b, 16, 8, 2, 2));
}
static inline unsigned int __dp2a_lo(unsigned int a, unsigned int b, unsigned int c) {
  return (unsigned)(c + tl_emu::dot<false, false>(a, b, 16, 8, 2, 0));
}
static inline unsigned int __dp2a_hi(unsigned int a, unsigned int b, unsigned int c) {
  return (unsigned)(c + tl_emu::dot<false, false>(a, b, 16, 8, 2, 2));
}

// SIMD within a word: 2 lanes of 16 bits (__v*2) or 4 of 8 (__v*4). In each lane ua, ub are
// the unsigned values, sa, sb the signed ones; SMIN, SMAX, UMAX the lane's limits.
namespace tl_emu {
template <int N, class Op> inline unsigned simd(unsigned a, unsigned b, Op op) {
  const int w = 32 / N;
  unsigned r = 0;
  for (int i = 0; i < N; ++i) {
    long long v = op((long long)lane_u(a, i, w), (long long)lane_u(b, i, w),
                     (long long)lane_s(a, i, w), (long long)lane_s(b, i, w),
                     -(1LL << (w - 1)), (1LL << (w - 1)) - 1, (1LL << w) - 1);
    r |= ((unsigned)v & ((1u << w) - 1)) << (w * i);
  }
  return r;
}
template <int N, bool S> inline unsigned sad(unsigned a, unsigned b) {
  const int w = 32 / N;
  unsigned r = 0;
  for (int i = 0; i < N; ++i) {
    long long x = S ? (long long)lane_s(a, i, w) : (long long)lane_u(a, i, w);
    long long y = S ? (long long)lane_s(b, i, w) : (long long)lane_u(b, i, w);
    r += (unsigned)(x > y ? x - y : y - x);
  }
  return r;
}
inline long long clampll(long long v, long long lo, long long hi) { return v < lo ? lo : v > hi ? hi : v; }
}  // namespace tl_emu
#define TL_SIMD(NAME, EXPR)                                                                 \
  static inline unsigned int NAME##2(unsigned int a, unsigned int b) {                     \
    return tl_emu::simd<2>(a, b, [](long long ua, long long ub, long long sa, long long sb, \
                                    long long SMIN, long long SMAX, long long UMAX) {       \
      (void)ua, (void)ub, (void)sa, (void)sb, (void)SMIN, (void)SMAX, (void)UMAX;           \
      return (long long)(EXPR);                                                             \
    });                                                                                     \
  }                                                                                         \
  static inline unsigned int NAME##4(unsigned int a, unsigned int b) {                     \
    return tl_emu::simd<4>(a, b, [](long long ua, long long ub, long long sa, long long sb, \
                                    long long SMIN, long long SMAX, long long UMAX) {       \
      (void)ua, (void)ub, (void)sa, (void)sb, (void)SMIN, (void)SMAX, (void)UMAX;           \
      return (long long)(EXPR);                                                             \
    });                                                                                     \
  }
#define TL_SIMD1(NAME, EXPR)                                                                \
  TL_SIMD(tl_simd1##NAME, EXPR)                                                             \
  static inline unsigned int NAME##2(unsigned int a) { return tl_simd1##NAME##2(a, 0); }   \
  static inline unsigned int NAME##4(unsigned int a) { return tl_simd1##NAME##4(a, 0); }
TL_SIMD(__vadd, ua + ub)
TL_SIMD(__vsub, ua - ub)
TL_SIMD(__vaddss, tl_emu::clampll(sa + sb, SMIN, SMAX))
TL_SIMD(__vsubss, tl_emu::clampll(sa - sb, SMIN, SMAX))
TL_SIMD(__vaddus, tl_emu::clampll(ua + ub, 0, UMAX))
TL_SIMD(__vsubus, tl_emu::clampll(ua - ub, 0, UMAX))
TL_SIMD(__vabsdiffs, sa > sb ? sa - sb : sb - sa)
TL_SIMD(__vabsdiffu, ua > ub ? ua - ub : ub - ua)
TL_SIMD(__vavgs, (sa + sb) < 0 ? (sa + sb) >> 1 : (sa + sb + 1) >> 1)
TL_SIMD(__vavgu, (ua + ub + 1) >> 1)
TL_SIMD(__vhaddu, (ua + ub) >> 1)
TL_SIMD(__vmaxs, sa > sb ? sa : sb)
TL_SIMD(__vmaxu, ua > ub ? ua : ub)
TL_SIMD(__vmins, sa < sb ? sa : sb)
TL_SIMD(__vminu, ua < ub ? ua : ub)
TL_SIMD(__vcmpeq, ua == ub ? -1 : 0)
TL_SIMD(__vcmpne, ua != ub ? -1 : 0)
TL_SIMD(__vcmpges, sa >= sb ? -1 : 0)
TL_SIMD(__vcmpgeu, ua >= ub ? -1 : 0)
TL_SIMD(__vcmpgts, sa > sb ? -1 : 0)
TL_SIMD(__vcmpgtu, ua > ub ? -1 : 0)
TL_SIMD(__vcmples, sa <= sb ? -1 : 0)
TL_SIMD(__vcmpleu, ua <= ub ? -1 : 0)
TL_SIMD(__vcmplts, sa < sb ? -1 : 0)
TL_SIMD(__vcmpltu, ua < ub ? -1 : 0)
TL_SIMD(__vseteq, ua == ub)
TL_SIMD(__vsetne, ua != ub)
TL_SIMD(__vsetges, sa >= sb)
TL_SIMD(__vsetgeu, ua >= ub)
TL_SIMD(__vsetgts, sa > sb)
TL_SIMD(__vsetgtu, ua > ub)
TL_SIMD(__vsetles, sa <= sb)
TL_SIMD(__vsetleu, ua <= ub)
TL_SIMD(__vsetlts, sa < sb)
TL_SIMD(__vsetltu, ua < ub)
TL_SIMD1(__vabs, sa < 0 ? -sa : sa)
TL_SIMD1(__vabsss, tl_emu::clampll(sa < 0 ? -sa : sa, SMIN, SMAX))
TL_SIMD1(__vneg, -sa)
TL_SIMD1(__vnegss, tl_emu::clampll(-sa, SMIN, SMAX))
static inline unsigned int __vsads2(unsigned int a, unsigned int b) { return tl_emu::sad<2, true>(a, b); }
static inline unsigned int __vsads4(unsigned int a, unsigned int b) { return tl_emu::sad<4, true>(a, b); }
static inline unsigned int __vsadu2(unsigned int a, unsigned int b) { return tl_emu::sad<2, false>(a, b); }
static inline unsigned int __vsadu4(unsigned int a, unsigned int b) { return tl_emu::sad<4, false>(a, b); }

// min/max of CUDA's integer overloads with their own names
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// ---- CUDA-only math functions (computed in a wider type, then rounded once) -------------------
namespace tl_emu {
// sin(pi x), cos(pi x): the argument is reduced exactly, so integers and halves are exact.
inline long double sinpi_l(long double x) {
  if (!__builtin_isfinite(x)) return x - x;
  long double r = __builtin_remainderl(x, 2.0L);  // exact, in [-1, 1]
  if (r > 0.5L) r = 1.0L - r;
  else if (r < -0.5L) r = -1.0L - r;
  long double s = __builtin_fabsl(r) <= 0.25L ? __builtin_sinl(3.14159265358979323846264338327950288L * r)
                  : __builtin_copysignl(__builtin_cosl(3.14159265358979323846264338327950288L *
                                                       (0.5L - __builtin_fabsl(r))), r);
  return s == 0 ? __builtin_copysignl(0.0L, x) : s;
}
inline long double cospi_l(long double x) {
  if (!__builtin_isfinite(x)) return x - x;
  long double r = __builtin_fabsl(__builtin_remainderl(x, 2.0L)), sign = 1.0L;
  if (r > 0.5L) r = 1.0L - r, sign = -1.0L;
  if (r == 0.5L) return 0.0L;
  long double c = r <= 0.25L ? __builtin_cosl(3.14159265358979323846264338327950288L * r)
                  : __builtin_sinl(3.14159265358979323846264338327950288L * (0.5L - r));
  return sign * c;
}
inline double erfinv_d(double y) {
  if (y != y || y < -1 || y > 1) return __builtin_nan("");
  if (y == 1) return __builtin_inf();
  if (y == -1) return -__builtin_inf();
  if (y == 0) return y;
  // Giles' single-precision approximation, then Newton steps on erf in long double.
  double w = -__builtin_log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = __builtin_sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w; p = 2.83297682 + p * w;
    x = p * y;
  }
  long double xl = x;
  for (int i = 0; i < 3; ++i) {
    long double e = __builtin_erfl(xl) - (long double)y;
    xl -= e / (1.1283791670955125738961589031215452L * __builtin_expl(-xl * xl));
  }
  return (double)xl;
}
inline double erfcinv_d(double y) {
  if (y != y || y < 0 || y > 2) return __builtin_nan("");
  if (y == 0) return __builtin_inf();
  if (y == 2) return -__builtin_inf();
  if (y > 0.0625 && y < 1.9375) {
    long double x = erfinv_d(1.0 - y);
    for (int i = 0; i < 2; ++i)
      x += (__builtin_erfcl(x) - (long double)y) /
           (1.1283791670955125738961589031215452L * __builtin_expl(-x * x));
    return (double)x;
  }
  // Tails: Newton on log(erfc(x)) = log(y), from x = sqrt(-log(y)).
  bool upper = y > 1;
  long double t = upper ? 2.0L - y : (long double)y;
  long double x = __builtin_sqrtl(-__builtin_logl(t));
  for (int i = 0; i < 40; ++i) {
    long double c = __builtin_erfcl(x);
    if (c <= 0) break;
    long double f = __builtin_logl(c) - __builtin_logl(t);
    long double d = -1.1283791670955125738961589031215452L * __builtin_expl(-x * x) / c;
    long double nx = x - f / d;
    if (__builtin_fabsl(nx - x) <= 1e-19L * __builtin_fabsl(x)) { x = nx; break; }
    x = nx;
  }
  return (double)(upper ? -x : x);
}
inline long double erfcx_l(long double x) {
  if (x != x) return x;
  if (x < 50.0L) {
    if (x < -106.0L) return __builtin_infl();
    return __builtin_expl(x * x) * __builtin_erfcl(x);
  }
  long double z = 1.0L / (x * x);
  return 0.56418958354775628694807945156077259L / x *
         (1.0L - z * (0.5L - z * (0.75L - z * (1.875L - z * 6.5625L))));
}
}  // namespace tl_emu
static inline float sinpif(float x) { return (float)tl_emu::sinpi_l(x); }
static inline double sinpi(double x) { return (double)tl_emu::sinpi_l(x); }
static inline float cospif(float x) { return (float)tl_emu::cospi_l(x); }
static inline double cospi(double x) { return (double)tl_emu::cospi_l(x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x), *c = cospif(x); }
static inline void sincospi(double x, double* s, double* c) { *s = sinpi(x), *c = cospi(x); }
static inline float rcbrtf(float x) { return (float)(1.0L / __builtin_cbrtl(x)); }
static inline double rcbrt(double x) { return (double)(1.0L / __builtin_cbrtl(x)); }
static inline float rhypotf(float x, float y) { return (float)(1.0L / __builtin_hypotl(x, y)); }
static inline double rhypot(double x, double y) { return (double)(1.0L / __builtin_hypotl(x, y)); }
namespace tl_emu {
template <class T> inline long double norm_l(int n, const T* p) {
  long double s = 0;
  bool inf = false;
  for (int i = 0; i < n; ++i) {
    inf = inf || __builtin_isinf(p[i]);
    s += (long double)p[i] * p[i];
  }
  return inf ? __builtin_infl() : __builtin_sqrtl(s);
}
}  // namespace tl_emu
static inline float norm3df(float a, float b, float c) {
  float p[3] = {a, b, c};
  return (float)tl_emu::norm_l(3, p);
}
static inline double norm3d(double a, double b, double c) {
  double p[3] = {a, b, c};
  return (double)tl_emu::norm_l(3, p);
}
static inline float rnorm3df(float a, float b, float c) { return (float)(1.0L / norm3d(a, b, c)); }
static inline double rnorm3d(double a, double b, double c) {
  double p[3] = {a, b, c};
  return (double)(1.0L / tl_emu::norm_l(3, p));
}
static inline float norm4df(float a, float b, float c, float d) {
  float p[4] = {a, b, c, d};
  return (float)tl_emu::norm_l(4, p);
}
static inline double norm4d(double a, double b, double c, double d) {
  double p[4] = {a, b, c, d};
  return (double)tl_emu::norm_l(4, p);
}
static inline float rnorm4df(float a, float b, float c, float d) {
  float p[4] = {a, b, c, d};
  return (float)(1.0L / tl_emu::norm_l(4, p));
}
static inline double rnorm4d(double a, double b, double c, double d) {
  double p[4] = {a, b, c, d};
  return (double)(1.0L / tl_emu::norm_l(4, p));
}
static inline float normf(int n, const float* p) { return (float)tl_emu::norm_l(n, p); }
static inline double norm(int n, const double* p) { return (double)tl_emu::norm_l(n, p); }
static inline float rnormf(int n, const float* p) { return (float)(1.0L / tl_emu::norm_l(n, p)); }
static inline double rnorm(int n, const double* p) { return (double)(1.0L / tl_emu::norm_l(n, p)); }
static inline float normcdff(float x) {
  return (float)(0.5L * __builtin_erfcl(-(long double)x * 0.70710678118654752440084436210484904L));
}
static inline double normcdf(double x) {
  return (double)(0.5L * __builtin_erfcl(-(long double)x * 0.70710678118654752440084436210484904L));
}
static inline float erfinvf(float y) { return (float)tl_emu::erfinv_d(y); }
static inline double erfinv(double y) { return tl_emu::erfinv_d(y); }
static inline float erfcinvf(float y) { return (float)tl_emu::erfcinv_d(y); }
static inline double erfcinv(double y) { return tl_emu::erfcinv_d(y); }
static inline float normcdfinvf(float p) {
  return (float)(-1.41421356237309504880168872420969808L * (long double)tl_emu::erfcinv_d(2.0 * p));
}
static inline double normcdfinv(double p) {
  return (double)(-1.41421356237309504880168872420969808L * (long double)tl_emu::erfcinv_d(2.0 * p));
}
static inline float erfcxf(float x) { return (float)tl_emu::erfcx_l(x); }
static inline double erfcx(double x) { return (double)tl_emu::erfcx_l(x); }
namespace tl_emu {
// I_nu(x) for nu = 0, 1 by its power series (all terms of one sign: no cancellation).
inline long double bessel_i(int nu, long double x) {
  if (x != x) return x;
  if (__builtin_isinf(x)) return nu ? x : __builtin_infl();
  long double h = x / 2, term = nu ? h : 1.0L, sum = term, h2 = h * h;
  for (int k = 1; k < 2000; ++k) {
    term *= h2 / ((long double)k * (long double)(k + nu));
    sum += term;
    if (__builtin_fabsl(term) <= __builtin_fabsl(sum) * 1e-21L || __builtin_isinf(sum)) break;
  }
  return sum;
}
}  // namespace tl_emu
static inline float cyl_bessel_i0f(float x) { return (float)tl_emu::bessel_i(0, x); }
static inline double cyl_bessel_i0(double x) { return (double)tl_emu::bessel_i(0, x); }
static inline float cyl_bessel_i1f(float x) { return (float)tl_emu::bessel_i(1, x); }
static inline double cyl_bessel_i1(double x) { return (double)tl_emu::bessel_i(1, x); }

static inline void __nanosleep(unsigned int) {}
