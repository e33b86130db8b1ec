// tilelab CPU emulator: warp-level primitives (shuffles, votes, __syncwarp, reductions).
//
// A thread calling one of them stops (state F_WARP) with its mask and value; after each pass
// of the block scheduler resolve_warps() finds, warp by warp, the waiting lanes whose mask
// names only lanes that wait too (or have exited), computes every such lane's result from
// the values of that snapshot, and lets them run on. As on Volta and later GPUs the lanes
// named in the mask meet at an operation of the same kind with the same mask (exited lanes
// count as arrived), a lane that is not waiting there gives no value (a shuffle from it
// returns the caller's own value, PTX's rule for an out-of-range source), and a mask
// naming a lane that never arrives is reported instead of hanging.
#pragma once

namespace tl_emu {

enum : int {
  W_IDX = 1, W_UP, W_DOWN, W_XOR, W_BALLOT, W_ANY, W_ALL, W_SYNC, W_ACTIVE,
  W_RADD, W_RMIN, W_RMAX, W_RUMIN, W_RUMAX, W_RAND, W_ROR, W_RXOR, W_MATCH_ANY, W_MATCH_ALL
};

inline const char* warp_op_name(int op) {
  static const char* names[] = {"?", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                "__syncwarp", "__activemask", "__reduce_add_sync",
                                "__reduce_min_sync", "__reduce_max_sync", "__reduce_min_sync",
                                "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
                                "__reduce_xor_sync", "__match_any_sync", "__match_all_sync"};
  return op > 0 && op <= W_MATCH_ALL ? names[op] : "?";
}

TL_NOINLINE inline uint64_t warp_wait(int op, int line, unsigned mask, uint64_t val, int arg,
                                      int width) {
  Fiber* f = g_cur;
  if (!f) return val;
  f->state = F_WARP;
  f->wop = op, f->line = line, f->wmask = mask, f->wval = val, f->warg = arg;
  f->wwidth = width;
  to_sched(f);
  asm volatile("" ::: "memory");
  return f->wres;
}

template <class T> inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  return b;
}
template <class T> inline T from_bits(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof v);
  return v;
}
template <class T> inline auto shfl_value(T v) {
  if constexpr (std::is_class_v<T>) return tl_emu::value(v);
  else return v;
}

template <class T> inline auto shuffle(int op, int line, unsigned mask, T var, int arg,
                                       int width) {
  auto v = shfl_value(var);
  using V = decltype(v);
  return from_bits<V>(warp_wait(op, line, mask, to_bits(v), arg, width));
}

inline unsigned lane_of(int i) { return (unsigned)i & 31u; }

// The source lane of a shuffle by `lane`, or -1 when the lane keeps its own value, as
// PTX's shfl.sync computes it from CUDA's c operand ((32 - width) << 8 | clamp, clamp 0 for
// up and 31 otherwise): a segment of `width` lanes starts at lane & segmask; up may not go
// below it, down/xor/idx not above it (a butterfly partner below the segment, lane ^ mask
// with mask >= width, is read). The lane or offset operand counts modulo 32 (PTX's b[4:0]).
inline int shuffle_source(const Fiber& F, unsigned lane) {
  const int segmask = (32 - F.wwidth) & 31, clamp = F.wop == W_UP ? 0 : 31;
  const int l = (int)lane, b = F.warg & 31;
  const int max_lane = (l & segmask) | (clamp & ~segmask), min_lane = l & segmask;
  int src;
  switch (F.wop) {
    case W_IDX: src = min_lane | (b & ~segmask); return src <= max_lane ? src : -1;
    case W_UP: src = l - b; return src >= max_lane ? src : -1;
    case W_DOWN: src = l + b; return src <= max_lane ? src : -1;
    default: src = l ^ b; return src <= max_lane ? src : -1;
  }
}

#ifdef TILELAB_ANALYSIS
void an_warp_sync(int warp, unsigned lanes);
#else
inline void an_warp_sync(int, unsigned) {}
#endif

#ifndef TILELAB_SPLIT
bool resolve_warps() {
  bool released = false;
  const int n = g_nfib;
  for (int w0 = 0; w0 < n; w0 += 32) {
    Fiber* W = &g_fibers[w0];
    int nl = n - w0 < 32 ? n - w0 : 32;
    unsigned waiting = 0, gone = nl == 32 ? 0u : ~((1u << nl) - 1), running = 0;
    for (int l = 0; l < nl; ++l) {
      if (W[l].state == F_WARP) waiting |= 1u << l;
      else if (W[l].state == F_EXIT) gone |= 1u << l;
      else if (W[l].state == F_RUN) running |= 1u << l;
    }
    if (!waiting) continue;
    unsigned ready = 0;
    for (int l = 0; l < nl; ++l) {
      if (!(waiting >> l & 1)) continue;
      if (W[l].wop == W_ACTIVE) {
        if (!running) ready |= 1u << l;  // every lane has gone as far as it can
      } else if ((W[l].wmask & ~(waiting | gone)) == 0) {
        // As PTX's *.sync instructions: the lanes named meet at an operation of the same
        // kind with the same mask (not necessarily at the same call).
        bool same = true;
        for (int k = 0; k < nl && same; ++k)
          same = !(W[l].wmask >> k & 1 & waiting >> k) ||
                 (W[k].wop == W[l].wop && W[k].wmask == W[l].wmask);
        if (same) ready |= 1u << l;
      }
    }
    if (!ready) continue;
    for (int l = 0; l < nl; ++l) {
      if (!(ready >> l & 1)) continue;
      Fiber& F = W[l];
      unsigned group = F.wmask & waiting;
      uint64_t r = 0;
      switch (F.wop) {
        case W_IDX: case W_UP: case W_DOWN: case W_XOR: {
          int src = shuffle_source(F, (unsigned)l);
          r = src >= 0 && src < nl && (waiting >> src & 1) ? W[src].wval : F.wval;
          break;
        }
        case W_BALLOT: case W_ANY: case W_ALL: {
          unsigned yes = 0;
          for (int k = 0; k < nl; ++k)
            if ((group >> k & 1) && W[k].wval) yes |= 1u << k;
          r = F.wop == W_BALLOT ? yes : F.wop == W_ANY ? yes != 0 : yes == group;
          break;
        }
        case W_ACTIVE: {
          unsigned same = 0;
          for (int k = 0; k < nl; ++k)
            if ((waiting >> k & 1) && W[k].wop == W_ACTIVE && W[k].warg == F.warg)
              same |= 1u << k;
          r = same;
          break;
        }
        case W_MATCH_ANY: case W_MATCH_ALL: {
          unsigned same = 0;
          for (int k = 0; k < nl; ++k)
            if ((group >> k & 1) && W[k].wval == F.wval) same |= 1u << k;
          r = F.wop == W_MATCH_ANY ? same : (same == group ? group : 0);
          F.warg = same == group;  // the predicate __match_all_sync writes
          break;
        }
        case W_SYNC: break;
        default: {  // __reduce_*_sync on 32-bit values
          uint32_t acc = F.wop == W_RUMIN ? 0xffffffffu : F.wop == W_RAND ? 0xffffffffu : 0;
          int32_t sacc = F.wop == W_RMIN ? INT32_MAX : F.wop == W_RMAX ? INT32_MIN : 0;
          for (int k = 0; k < nl; ++k) {
            if (!(group >> k & 1)) continue;
            uint32_t u = (uint32_t)W[k].wval;
            int32_t s = (int32_t)u;
            switch (F.wop) {
              case W_RADD: acc += u; break;
              case W_RMIN: sacc = s < sacc ? s : sacc; break;
              case W_RMAX: sacc = s > sacc ? s : sacc; break;
              case W_RUMIN: acc = u < acc ? u : acc; break;
              case W_RUMAX: acc = u > acc ? u : acc; break;
              case W_RAND: acc &= u; break;
              case W_ROR: acc |= u; break;
              default: acc ^= u;
            }
          }
          r = (F.wop == W_RMIN || F.wop == W_RMAX) ? (uint64_t)(uint32_t)sacc : acc;
        }
      }
      F.wres = r;
    }
    for (int l = 0; l < nl; ++l)
      if (ready >> l & 1) W[l].state = F_RUN;
    an_warp_sync(w0 / 32, ready);
    released = true;
  }
  return released;
}
#endif

#ifndef TILELAB_SPLIT
[[noreturn]] void warp_deadlock() {
  Out o{};
  o.s("{\"status\":\"warp\"");
  const int n = g_nfib;
  for (int i = 0; i < n; ++i) {
    Fiber& F = g_fibers[i];
    if (F.state != F_WARP) continue;
    int w0 = i & ~31;
    o.f(",\"op\":\"%s\",\"line\":%d,\"mask\":%u,\"lane\":%d", warp_op_name(F.wop), F.line,
        F.wmask, i - w0);
    o.s(",\"example\":");
    o.xyz(F.tid);
    for (int l = 0; l < 32 && w0 + l < n; ++l) {
      Fiber& M = g_fibers[w0 + l];
      if (!(F.wmask >> l & 1) || M.state == F_WARP || M.state == F_EXIT) continue;
      o.f(",\"missing_lane\":%d,\"missing_line\":%d,\"missing_state\":\"%s\"", l, M.line,
          M.state == F_WAIT ? "barrier" : "running");
      o.s(",\"missing\":");
      o.xyz(M.tid);
      break;
    }
    break;
  }
  g_cur = nullptr;
  where(o);
  fatal(o);
}
#endif

// A point where the lanes of a warp keep in step (a volatile shared-memory access in a
// warp-synchronous kernel): the thread lets the others of its pass run first.
TL_NOSAN inline void lockstep_point() {
  if (g_cur && g_in_block) to_sched(g_cur);
}

template <class T> inline auto shfl_sync(int line, unsigned m, T v, int src, int w = 32) {
  return shuffle(W_IDX, line, m, v, src, w);
}
template <class T> inline auto shfl_up_sync(int line, unsigned m, T v, unsigned d, int w = 32) {
  return shuffle(W_UP, line, m, v, (int)d, w);
}
template <class T> inline auto shfl_down_sync(int line, unsigned m, T v, unsigned d,
                                              int w = 32) {
  return shuffle(W_DOWN, line, m, v, (int)d, w);
}
template <class T> inline auto shfl_xor_sync(int line, unsigned m, T v, int x, int w = 32) {
  return shuffle(W_XOR, line, m, v, x, w);
}
inline unsigned vote(int op, int line, unsigned m, int pred) {
  return (unsigned)warp_wait(op, line, m, pred != 0, 0, 32);
}
inline unsigned activemask(int site) { return (unsigned)warp_wait(W_ACTIVE, 0, ~0u, 0, site, 32); }
struct SyncWarp {  // __syncwarp() or __syncwarp(mask), with the caller's line
  int line;
  void operator()(unsigned m = 0xffffffffu) const { warp_wait(W_SYNC, line, m, 0, 0, 32); }
};
template <class T> inline unsigned reduce32(int op, int line, unsigned m, T v) {
  return (unsigned)warp_wait(op, line, m, (uint32_t)shfl_value(v), 0, 32);
}
template <class T> inline unsigned match_any(int line, unsigned m, T v) {
  return (unsigned)warp_wait(W_MATCH_ANY, line, m, to_bits(shfl_value(v)), 0, 32);
}
template <class T> inline unsigned match_all(int line, unsigned m, T v, int* pred) {
  unsigned r = (unsigned)warp_wait(W_MATCH_ALL, line, m, to_bits(shfl_value(v)), 0, 32);
  if (pred) *pred = g_cur ? g_cur->warg : 1;
  return r;
}

// CUDA's overloads of the warp intrinsics, as the CUDA C++ Programming Guide declares them
// (warp shuffle and match functions: "T can be int, unsigned int, long, unsigned long, long
// long, unsigned long long, float or double"; __reduce_add/min/max_sync: unsigned and int;
// __reduce_and/or/xor_sync: unsigned), as function objects of their names: C++ picks among
// them as nvcc does, promoting a bool, char or short to int, converting a float to the one
// unsigned of __reduce_and_sync, and refusing what nvcc refuses (a float2 or a struct: no
// overload matches; a float or a 64-bit value given to __reduce_add_sync: two fit, neither
// better), at the learner's line.
namespace ov {
#define TL_SHFL_T(NAME, OP, T, LANE) \
  T operator()(unsigned m, T v, LANE a, int w = 32) const { return shuffle(OP, line, m, v, (int)a, w); }
#define TL_SHFL(NAME, OP, LANE)                                                       \
  struct NAME {                                                                       \
    int line;                                                                         \
    TL_SHFL_T(NAME, OP, int, LANE) TL_SHFL_T(NAME, OP, unsigned int, LANE)            \
    TL_SHFL_T(NAME, OP, long, LANE) TL_SHFL_T(NAME, OP, unsigned long, LANE)          \
    TL_SHFL_T(NAME, OP, long long, LANE) TL_SHFL_T(NAME, OP, unsigned long long, LANE) \
    TL_SHFL_T(NAME, OP, float, LANE) TL_SHFL_T(NAME, OP, double, LANE)                \
  };
TL_SHFL(__shfl_sync, W_IDX, int)
TL_SHFL(__shfl_up_sync, W_UP, unsigned int)
TL_SHFL(__shfl_down_sync, W_DOWN, unsigned int)
TL_SHFL(__shfl_xor_sync, W_XOR, int)
#undef TL_SHFL
#undef TL_SHFL_T
#define TL_MATCH_T(T, ...) \
  unsigned operator()(unsigned m, T v __VA_OPT__(, ) __VA_ARGS__) const
#define TL_MATCH(NAME, CALL, ...)                                                           \
  struct NAME {                                                                             \
    int line;                                                                               \
    TL_MATCH_T(int, __VA_ARGS__) CALL TL_MATCH_T(unsigned int, __VA_ARGS__) CALL            \
    TL_MATCH_T(long, __VA_ARGS__) CALL TL_MATCH_T(unsigned long, __VA_ARGS__) CALL          \
    TL_MATCH_T(long long, __VA_ARGS__) CALL TL_MATCH_T(unsigned long long, __VA_ARGS__) CALL \
    TL_MATCH_T(float, __VA_ARGS__) CALL TL_MATCH_T(double, __VA_ARGS__) CALL                \
  };
TL_MATCH(__match_any_sync, { return tl_emu::match_any(line, m, v); })
TL_MATCH(__match_all_sync, { return tl_emu::match_all(line, m, v, p); }, int* p)
#undef TL_MATCH
#undef TL_MATCH_T
#define TL_REDUCE_S(NAME, OP, SOP)                                                          \
  struct NAME {                                                                             \
    int line;                                                                               \
    unsigned operator()(unsigned m, unsigned v) const { return reduce32(OP, line, m, v); } \
    int operator()(unsigned m, int v) const { return (int)reduce32(SOP, line, m, v); }     \
  };
#define TL_REDUCE_U(NAME, OP)                                                               \
  struct NAME {                                                                             \
    int line;                                                                               \
    unsigned operator()(unsigned m, unsigned v) const { return reduce32(OP, line, m, v); } \
  };
TL_REDUCE_S(__reduce_add_sync, W_RADD, W_RADD)
TL_REDUCE_S(__reduce_min_sync, W_RUMIN, W_RMIN)
TL_REDUCE_S(__reduce_max_sync, W_RUMAX, W_RMAX)
TL_REDUCE_U(__reduce_and_sync, W_RAND)
TL_REDUCE_U(__reduce_or_sync, W_ROR)
TL_REDUCE_U(__reduce_xor_sync, W_RXOR)
#undef TL_REDUCE_S
#undef TL_REDUCE_U
}  // namespace ov

}  // namespace tl_emu

#define __shfl_sync(...) tl_emu::ov::__shfl_sync{__LINE__}(__VA_ARGS__)
#define __shfl_up_sync(...) tl_emu::ov::__shfl_up_sync{__LINE__}(__VA_ARGS__)
#define __shfl_down_sync(...) tl_emu::ov::__shfl_down_sync{__LINE__}(__VA_ARGS__)
#define __shfl_xor_sync(...) tl_emu::ov::__shfl_xor_sync{__LINE__}(__VA_ARGS__)
#define __ballot_sync(m, p) tl_emu::vote(tl_emu::W_BALLOT, __LINE__, (m), (p))
#define __any_sync(m, p) ((int)tl_emu::vote(tl_emu::W_ANY, __LINE__, (m), (p)))
#define __all_sync(m, p) ((int)tl_emu::vote(tl_emu::W_ALL, __LINE__, (m), (p)))
#define __activemask() tl_emu::activemask(__COUNTER__)
#define __syncwarp(...) tl_emu::SyncWarp{__LINE__}(__VA_ARGS__)
#define __reduce_add_sync(...) tl_emu::ov::__reduce_add_sync{__LINE__}(__VA_ARGS__)
#define __reduce_min_sync(...) tl_emu::ov::__reduce_min_sync{__LINE__}(__VA_ARGS__)
#define __reduce_max_sync(...) tl_emu::ov::__reduce_max_sync{__LINE__}(__VA_ARGS__)
#define __reduce_and_sync(...) tl_emu::ov::__reduce_and_sync{__LINE__}(__VA_ARGS__)
#define __reduce_or_sync(...) tl_emu::ov::__reduce_or_sync{__LINE__}(__VA_ARGS__)
#define __reduce_xor_sync(...) tl_emu::ov::__reduce_xor_sync{__LINE__}(__VA_ARGS__)
#define __match_any_sync(...) tl_emu::ov::__match_any_sync{__LINE__}(__VA_ARGS__)
#define __match_all_sync(...) tl_emu::ov::__match_all_sync{__LINE__}(__VA_ARGS__)
