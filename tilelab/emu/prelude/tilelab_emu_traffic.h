// tilelab CPU emulator, analysis mode: global-memory traffic.
//
// The translator rewrites `P[` on a kernel's parameter P into `tl_emu::gl(P, __LINE__, i)[`
// (i: the parameter's position); for a pointer parameter the proxy below records each element
// read and written, with its address and size. The lanes of a warp that execute the k-th
// access of (line, parameter, read/write) in one barrier epoch make one warp-wide request,
// grouped by the bank analysis's machinery (tilelab_emu_analysis.h); for each request we
// count the distinct 32-byte sectors its lanes touch: 4 for 32 consecutive aligned floats,
// 32 for 32 floats a row apart.
// Included by tilelab_emu_analysis.h inside namespace tl_emu, before finish_warp().
#pragma once

enum : int { TL_GLOBAL_BASE = 1 << 20 };  // array ids at or above this are kernel parameters

TL_NOINLINE void g_record(const volatile void* p, unsigned size, int line, int param, int kind);

// A pointer parameter, with or without const/__restrict__ qualifiers.
template <class T> struct GPtrOf : std::false_type {};
template <class T> struct GPtrOf<T*> : std::true_type { using E = T; };
template <class T> struct GPtrOf<T* const> : std::true_type { using E = T; };
template <class T> struct GPtrOf<T* __restrict__> : std::true_type { using E = T; };
template <class T> struct GPtrOf<T* const __restrict__> : std::true_type { using E = T; };

template <class E> struct GElem {
  using V = std::remove_cv_t<E>;
  E* p;
  int line, param;
  void rec(int kind) const { g_record(p, sizeof(E), line, param, kind); }
  operator V() const {
    rec(K_R);
    return *p;
  }
  GElem& operator=(V v) {
    rec(K_W);
    *p = v;
    return *this;
  }
  GElem& operator=(const GElem& o) { return *this = (V)o; }
#define TL_COMPOUND(OP)                                                                  \
  GElem& operator OP(V v) {                                                              \
    rec(K_R | K_W);                                                                      \
    *p OP v;                                                                             \
    return *this;                                                                        \
  }
  TL_COMPOUND(+=)
  TL_COMPOUND(-=)
  TL_COMPOUND(*=)
  TL_COMPOUND(/=)
  TL_COMPOUND(%=)
  TL_COMPOUND(&=)
  TL_COMPOUND(|=)
  TL_COMPOUND(^=)
  TL_COMPOUND(<<=)
  TL_COMPOUND(>>=)
#undef TL_COMPOUND
  GElem& operator++() { return *this += 1; }
  GElem& operator--() { return *this -= 1; }
  V operator++(int) {
    rec(K_R | K_W);
    return (*p)++;
  }
  V operator--(int) {
    rec(K_R | K_W);
    return (*p)--;
  }
  E* operator&() const { return p; }  // address taken (atomics, pointers): not counted
};
template <class E> struct Value<GElem<E>> { using type = std::remove_cv_t<E>; };

template <class E> struct GPtr {
  E* p;
  int line, param;
  template <class I> decltype(auto) operator[](I i) const {
    E* q = p + (long long)i;
    if constexpr (std::is_arithmetic_v<std::remove_cv_t<E>>) {
      return GElem<E>{q, line, param};
    } else {
      g_record(q, sizeof(E), line, param, K_R);  // vectors and structs: a read of the element
      return (*q);
    }
  }
};

TL_NOINLINE void g_record(const volatile void* p, unsigned size, int line, int param, int kind) {
  if (kind & K_R) bank_add((uintptr_t)p, size, line, TL_GLOBAL_BASE + param, 0);
  if (kind & K_W) bank_add((uintptr_t)p, size, line, TL_GLOBAL_BASE + param, 1);
}

template <class P> inline decltype(auto) gl(P& x, int line, int param) {
  if constexpr (GPtrOf<P>::value) return GPtr<typename GPtrOf<P>::E>{x, line, param};
  else return (x);  // not a pointer: untouched
}

// ---- per (line, parameter, kind): requests and sectors -----------------------------------------
struct TrafficStat {
  uint64_t key;
  long long requests, sectors, lanes, bytes;
  int max_sectors;
};
TrafficStat g_traffic[512];
int g_ntraffic;
long long g_traffic_dropped;

inline int sectors(const Group& g) {
  uintptr_t seen[128];
  int n = 0;
  for (int l = 0; l < 32; ++l) {
    if (!(g.mask >> l & 1)) continue;
    for (uintptr_t s = g.addr[l] / 32; s <= (g.addr[l] + g.size[l] - 1) / 32; ++s) {
      int j = 0;
      while (j < n && seen[j] != s) ++j;
      if (j == n && n < 128) seen[n++] = s;
    }
  }
  return n;
}

// Called by finish_warp for a group whose array id is a kernel parameter.
inline void traffic_finish(const Group& g) {
  int i = 0;
  while (i < g_ntraffic && g_traffic[i].key != g.key) ++i;
  if (i == g_ntraffic) {
    if (g_ntraffic == 512) {
      ++g_traffic_dropped;
      return;
    }
    g_traffic[g_ntraffic++] = TrafficStat{g.key, 0, 0, 0, 0, 0};
  }
  TrafficStat& t = g_traffic[i];
  int s = sectors(g);
  ++t.requests, t.sectors += s;
  for (int l = 0; l < 32; ++l)
    if (g.mask >> l & 1) ++t.lanes, t.bytes += g.size[l];
  if (s > t.max_sectors) t.max_sectors = s;
}

void traffic_write(Out& o) {
  o.s(",\"traffic\":[");
  for (int i = 0; i < g_ntraffic; ++i) {
    const TrafficStat& t = g_traffic[i];
    o.f("%s{\"line\":%d,\"param\":%d,\"kind\":\"%s\",\"requests\":%lld,\"sectors\":%lld,"
        "\"lanes\":%lld,\"bytes\":%lld,\"max_sectors\":%d}",
        i ? "," : "", (int)(t.key >> 32), (int)((t.key >> 1) & 0x7fffffff) - TL_GLOBAL_BASE,
        (t.key & 1) ? "write" : "read", t.requests, t.sectors, t.lanes, t.bytes, t.max_sectors);
  }
  o.f("],\"traffic_dropped\":%lld", g_traffic_dropped);
}
