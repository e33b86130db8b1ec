// tilelab CPU emulator: the CUDA C surface a kernel sees, compiled with g++.
//
// Included once, before the learner's source, by the code tilelab.emu.translate emits.
// Blocks run one at a time; the threads of a block are fibers that switch at
// __syncthreads(), at warp-level operations (tilelab_emu_warp.h), at volatile accesses of
// warp-synchronous code (tilelab_emu_tsan.h) and at exit (see tilelab_emu_rt.h). Define TILELAB_ANALYSIS to
// instrument shared-memory accesses (see tilelab_emu_analysis.h).
#pragma once

// A split build (TILELAB_SPLIT; see tilelab.emu.compile.runtime_object): the kernel's unit
// only declares the runtime's variables and out-of-line functions, and one object compiled
// from this header alone, once per set of flags, defines them. Without it, one unit does both.
#ifdef TILELAB_SPLIT
#define TL_DEF extern
#define TL_INIT(...)
#else
#define TL_DEF
#define TL_INIT(...) = __VA_ARGS__
#endif

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#define TILELAB_EMU 1

// ---- vector types and launch geometry -------------------------------------------------
#define TL_VEC2(T, N, A)                                                                 \
  struct __attribute__((aligned(A))) N { T x, y; };                                      \
  static inline N make_##N(T x, T y) { return N{x, y}; }
#define TL_VEC3(T, N)                                                                    \
  struct N { T x, y, z; };                                                               \
  static inline N make_##N(T x, T y, T z) { return N{x, y, z}; }
#define TL_VEC4(T, N, A)                                                                 \
  struct __attribute__((aligned(A))) N { T x, y, z, w; };                                \
  static inline N make_##N(T x, T y, T z, T w) { return N{x, y, z, w}; }

TL_VEC2(float, float2, 8)
TL_VEC3(float, float3)
TL_VEC4(float, float4, 16)
TL_VEC2(int, int2, 8)
TL_VEC3(int, int3)
TL_VEC4(int, int4, 16)
TL_VEC2(unsigned int, uint2, 8)
TL_VEC3(unsigned int, uint3)
TL_VEC4(unsigned int, uint4, 16)
TL_VEC2(double, double2, 16)
TL_VEC2(long long, longlong2, 16)
TL_VEC4(unsigned char, uchar4, 4)
TL_VEC4(signed char, char4, 4)
#define TL_VEC1(T, N, A)                                                                 \
  struct __attribute__((aligned(A))) N { T x; };                                         \
  static inline N make_##N(T x) { return N{x}; }
TL_VEC1(float, float1, 4)
TL_VEC1(int, int1, 4)
TL_VEC1(unsigned int, uint1, 4)
TL_VEC1(double, double1, 8)
TL_VEC1(signed char, char1, 1)
TL_VEC1(unsigned char, uchar1, 1)
TL_VEC1(short, short1, 2)
TL_VEC1(unsigned short, ushort1, 2)
TL_VEC1(long long, longlong1, 8)
TL_VEC1(unsigned long long, ulonglong1, 8)
TL_VEC2(signed char, char2, 2)
TL_VEC2(unsigned char, uchar2, 2)
TL_VEC2(short, short2, 4)
TL_VEC2(unsigned short, ushort2, 4)
TL_VEC2(unsigned long long, ulonglong2, 16)
TL_VEC3(signed char, char3)
TL_VEC3(unsigned char, uchar3)
TL_VEC3(short, short3)
TL_VEC3(unsigned short, ushort3)
TL_VEC3(double, double3)
TL_VEC3(long long, longlong3)
TL_VEC3(unsigned long long, ulonglong3)
TL_VEC4(short, short4, 8)
TL_VEC4(unsigned short, ushort4, 8)
TL_VEC4(double, double4, 16)
TL_VEC4(long long, longlong4, 16)
TL_VEC4(unsigned long long, ulonglong4, 16)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// The current fiber's indices: the scheduler rewrites them at every switch.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
#ifndef TILELAB_SPLIT
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
#endif
constexpr int warpSize = 32;

// ---- math and intrinsics ---------------------------------------------------------------
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// glibc already declares these names (as its own internals), so they are macros here, for
// the functions of tilelab_emu_fast.h.
#define __expf(x) tl_emu::fast_expf(x)
#define __exp10f(x) tl_emu::fast_exp10f(x)
#define __logf(x) tl_emu::fast_logf(x)
#define __log2f(x) tl_emu::fast_log2f(x)
#define __log10f(x) tl_emu::fast_log10f(x)
#define __powf(x, y) tl_emu::fast_powf((x), (y))
#define __sinf(x) tl_emu::fast_sinf(x)
#define __cosf(x) tl_emu::fast_cosf(x)
#define __tanf(x) tl_emu::fast_tanf(x)
#define __sincosf(x, s, c) tl_emu::fast_sincosf((x), (s), (c))
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <class To, class From> static inline To tl_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "size mismatch");
  To t;
  memcpy(&t, &v, sizeof t);
  return t;
}
static inline float __int_as_float(int x) { return tl_bits<float>(x); }
static inline int __float_as_int(float x) { return tl_bits<int>(x); }
static inline float __uint_as_float(unsigned int x) { return tl_bits<float>(x); }
static inline unsigned int __float_as_uint(float x) { return tl_bits<unsigned int>(x); }
static inline double __longlong_as_double(long long x) { return tl_bits<double>(x); }
static inline long long __double_as_longlong(double x) { return tl_bits<long long>(x); }
static inline long long clock64() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
// Fibers never preempt one another: ordering the compiler's accesses is enough.
static inline void __threadfence() { asm volatile("" ::: "memory"); }
static inline void __threadfence_block() { asm volatile("" ::: "memory"); }
static inline void __threadfence_system() { asm volatile("" ::: "memory"); }
// Loads and stores with cache hints, plain accesses here: CUDA's overloads of each
// (sm_32_intrinsics.h), no more; nvcc refuses another type (float3, int3, a struct) with "no
// instance of overloaded function", g++ with "no matching function for call".
#define TL_CACHED_TYPES(X)                                                                 \
  X(char) X(signed char) X(unsigned char) X(short) X(unsigned short) X(int) X(unsigned int) \
  X(long) X(unsigned long) X(long long) X(unsigned long long) X(float) X(double)            \
  X(char2) X(char4) X(uchar2) X(uchar4) X(short2) X(short4) X(ushort2) X(ushort4) X(int2)   \
  X(int4) X(uint2) X(uint4) X(longlong2) X(ulonglong2) X(float2) X(float4) X(double2)
#define TL_LOAD_AS(NAME, T) static inline T NAME(const T* p) { return *p; }
#define TL_STORE_AS(NAME, T) static inline void NAME(T* p, T v) { *p = v; }
#define TL_LOADS(T)                                                                        \
  TL_LOAD_AS(__ldg, T) TL_LOAD_AS(__ldcg, T) TL_LOAD_AS(__ldca, T) TL_LOAD_AS(__ldcs, T)    \
  TL_LOAD_AS(__ldlu, T) TL_LOAD_AS(__ldcv, T)                                              \
  TL_STORE_AS(__stcg, T) TL_STORE_AS(__stcs, T) TL_STORE_AS(__stwb, T) TL_STORE_AS(__stwt, T)
TL_CACHED_TYPES(TL_LOADS)

// ---- atomics: trivially atomic, since fibers never preempt one another -------------------
// Not instrumented (no_sanitize_thread): two atomics are no race. An analysis build tells the
// race analysis of each one (from a call of its own: the caller's line), since a plain read
// or write of the word in another thread of the same barrier interval races with it.
#ifdef TILELAB_ANALYSIS
namespace tl_emu {
__attribute__((noinline, no_sanitize_thread)) void an_atomic(uintptr_t a, unsigned size,
                                                             uintptr_t ret, bool cas);
}
#define TL_ATOMIC_FN __attribute__((noinline, no_sanitize_thread)) static
#define TL_ATOMIC_SEEN(a, cas)                         \
  tl_emu::an_atomic((uintptr_t)(a), sizeof *(a),        \
                    (uintptr_t)__builtin_return_address(0), cas)
#else
#define TL_ATOMIC_FN __attribute__((no_sanitize_thread)) static inline
#define TL_ATOMIC_SEEN(a, cas) ((void)0)
#endif
#define TL_ATOMIC(NAME, T, EXPR)                                                         \
  TL_ATOMIC_FN T NAME(T* a, T v) {                                                       \
    TL_ATOMIC_SEEN(a, false);                                                            \
    T old = *a;                                                                          \
    *a = (EXPR);                                                                         \
    return old;                                                                          \
  }
// CUDA's overloads, no more (sm_20, sm_32 and sm_60 atomic_functions.h): a type it has none
// for is refused as nvcc refuses it. The _block and _system scopes (sm_60) have the same
// overloads; on one emulated device every scope is the whole device.
#define TL_ATOMIC_SCOPED(NAME, T, EXPR) \
  TL_ATOMIC(NAME, T, EXPR)              \
  TL_ATOMIC(NAME##_block, T, EXPR)      \
  TL_ATOMIC(NAME##_system, T, EXPR)
#define TL_ATOMIC_INT(NAME, EXPR)                 \
  TL_ATOMIC_SCOPED(NAME, int, EXPR)               \
  TL_ATOMIC_SCOPED(NAME, unsigned int, EXPR)      \
  TL_ATOMIC_SCOPED(NAME, unsigned long long, EXPR)
TL_ATOMIC_INT(atomicAdd, old + v)
TL_ATOMIC_SCOPED(atomicAdd, float, old + v)
TL_ATOMIC_SCOPED(atomicAdd, double, old + v)
TL_ATOMIC_SCOPED(atomicSub, int, old - v)
TL_ATOMIC_SCOPED(atomicSub, unsigned int, old - v)
TL_ATOMIC_INT(atomicMax, old > v ? old : v)
TL_ATOMIC_SCOPED(atomicMax, long long, old > v ? old : v)
TL_ATOMIC_INT(atomicMin, old < v ? old : v)
TL_ATOMIC_SCOPED(atomicMin, long long, old < v ? old : v)
TL_ATOMIC_INT(atomicExch, v)
TL_ATOMIC_SCOPED(atomicExch, float, v)
TL_ATOMIC_INT(atomicAnd, old & v)
TL_ATOMIC_SCOPED(atomicAnd, long long, old & v)
TL_ATOMIC_INT(atomicOr, old | v)
TL_ATOMIC_SCOPED(atomicOr, long long, old | v)
TL_ATOMIC_INT(atomicXor, old ^ v)
TL_ATOMIC_SCOPED(atomicXor, long long, old ^ v)
TL_ATOMIC_SCOPED(atomicInc, unsigned int, old >= v ? 0u : old + 1u)
TL_ATOMIC_SCOPED(atomicDec, unsigned int, (old == 0u || old > v) ? v : old - 1u)
#define TL_ATOMIC_CAS(NAME, T)                                                           \
  TL_ATOMIC_FN T NAME(T* a, T cmp, T v) {                                                \
    TL_ATOMIC_SEEN(a, true);                                                             \
    T old = *a;                                                                          \
    if (old == cmp) *a = v;                                                              \
    return old;                                                                          \
  }
#define TL_ATOMIC_CAS_SCOPED(T)     \
  TL_ATOMIC_CAS(atomicCAS, T)       \
  TL_ATOMIC_CAS(atomicCAS_block, T) \
  TL_ATOMIC_CAS(atomicCAS_system, T)
TL_ATOMIC_CAS_SCOPED(int)
TL_ATOMIC_CAS_SCOPED(unsigned int)
TL_ATOMIC_CAS_SCOPED(unsigned long long)
TL_ATOMIC_CAS(atomicCAS, unsigned short)

// Value<T>: the arithmetic value behind T (analysis mode specialises it for its proxies).
namespace tl_emu {
template <class T> struct Value { using type = T; };
template <class A, class B>
using Common = std::common_type_t<typename Value<A>::type, typename Value<B>::type>;
template <class T> inline auto value(const T& v) { return (typename Value<T>::type)v; }
}  // namespace tl_emu

// Shifts as a GPU shifts (tilelab.emu.shifts sends `a << b` here where b is not a number):
// PTX's shl and shr take the count as 32 bits and clamp it, so a count of the width or more
// gives 0, or all sign bits for a right shift of a negative value (x86 masks the count).
// Operands the operator does not take find no overload: g++ says so at the learner's line.
namespace tl_emu {
template <class A, class B>
constexpr auto shl(const A& a, const B& b) -> decltype(a << b) {
  using VA = std::remove_cv_t<typename Value<A>::type>;
  using VB = std::remove_cv_t<typename Value<B>::type>;
  if constexpr (std::is_integral_v<VA> && std::is_integral_v<VB>) {
    using R = decltype(VA() << VB());
    unsigned n = (unsigned)(VB)b;
    return n >= sizeof(R) * 8 ? R(0) : R((std::make_unsigned_t<R>)(R)(VA)a << n);
  } else {
    return a << b;
  }
}
template <class A, class B>
constexpr auto shr(const A& a, const B& b) -> decltype(a >> b) {
  using VA = std::remove_cv_t<typename Value<A>::type>;
  using VB = std::remove_cv_t<typename Value<B>::type>;
  if constexpr (std::is_integral_v<VA> && std::is_integral_v<VB>) {
    using R = decltype(VA() >> VB());
    unsigned n = (unsigned)(VB)b;
    R x = (R)(VA)a;
    if (n >= sizeof(R) * 8) return std::is_signed_v<R> && x < R(0) ? R(-1) : R(0);
    return R(x >> n);
  } else {
    return a >> b;
  }
}
// `a <<= b` and `a >>= b`, a evaluated once (a shared array's element proxy included).
template <class A, class B>
constexpr auto shl_to(A&& a, const B& b) -> decltype(a = shl(a, b)) { return a = shl(a, b); }
template <class A, class B>
constexpr auto shr_to(A&& a, const B& b) -> decltype(a = shr(a, b)) { return a = shr(a, b); }
}  // namespace tl_emu

#include "tilelab_emu_math.h"
#include "tilelab_emu_fast.h"
#include "tilelab_emu_rt.h"
#include "tilelab_emu_bounds.h"
#include "tilelab_emu_align.h"
#ifdef TILELAB_ANALYSIS
#include "tilelab_emu_analysis.h"
#endif
#include "tilelab_emu_warp.h"
#include "tilelab_emu_cg.h"
#ifdef TILELAB_TSAN
#include "tilelab_emu_tsan.h"
#endif

// ---- min/max as CUDA overloads them (usual arithmetic conversions) ------------------------
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<typename tl_emu::Value<A>::type> &&
                                   std::is_arithmetic_v<typename tl_emu::Value<B>::type>>>
static inline tl_emu::Common<A, B> min(A a, B b) {
  tl_emu::Common<A, B> x = tl_emu::value(a), y = tl_emu::value(b);
  return y < x ? y : x;
}
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<typename tl_emu::Value<A>::type> &&
                                   std::is_arithmetic_v<typename tl_emu::Value<B>::type>>>
static inline tl_emu::Common<A, B> max(A a, B b) {
  tl_emu::Common<A, B> x = tl_emu::value(a), y = tl_emu::value(b);
  return x < y ? y : x;
}

// ---- printf and assert --------------------------------------------------------------------
namespace tl_emu {
template <class T> inline auto vararg(const T& v) {
  if constexpr (std::is_class_v<T>) return tl_emu::value(v);
  else return v;
}
// Bytes printed by the launch: past what the parent keeps (1 MiB) and a margin that tells it
// the output was cut, nothing more is formatted (a GPU's printf buffer drops the rest too).
TL_DEF unsigned long long g_printed TL_INIT(0);
constexpr unsigned long long kPrintfKept = (1ull << 20) + (1ull << 16);
template <class... A> inline int kprintf(const char* fmt, A... a) {
  if (g_printed > kPrintfKept) return 0;
  const int k = ::printf(fmt, vararg(a)...);
  if (k > 0) g_printed += (unsigned long long)k;
  return k;
}
}  // namespace tl_emu

// ---- CUDA keywords ------------------------------------------------------------------------
// Kernels are exported under the names PyCUDA's get_function looks up (mangled unless in
// extern "C", as nvcc names them).
#define __global__ __attribute__((visibility("default")))
#define __device__
#define __constant__
#define __host__
#define __inline__ inline
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define TL_SHARED __attribute__((section("tlshared"), aligned(16)))
// A barrier is identified by its call site (__COUNTER__) and reported by its line.
#define __syncthreads() tl_emu::syncthreads(__LINE__, __COUNTER__)
#define __syncthreads_count(p) tl_emu::syncthreads_count(__LINE__, __COUNTER__, (p))
#define __syncthreads_and(p) tl_emu::syncthreads_and(__LINE__, __COUNTER__, (p))
#define __syncthreads_or(p) (tl_emu::syncthreads_count(__LINE__, __COUNTER__, (p)) != 0)
#define __trap() tl_emu::trap(__LINE__)
#define __brkpt() tl_emu::trap(__LINE__)
#undef assert
#define assert(e) ((e) ? (void)0 : tl_emu::assert_fail(#e, __LINE__))
#define printf(...) tl_emu::kprintf(__VA_ARGS__)
