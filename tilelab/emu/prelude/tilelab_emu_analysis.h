// tilelab CPU emulator, analysis mode: shared-memory races and bank conflicts.
//
// The translator rewrites `name[` on a shared array into `tl_emu::sh(name, tl_reg_name,
// __LINE__)[`; the proxies below record every element read and write with its source line.
// Races: two threads touch one 4-byte word in the same barrier epoch and one of them writes.
// Bank conflicts: the k-th execution of (line, array, read/write) by the lanes of a warp in
// an epoch is one warp-wide access; its degree is the most distinct words in one bank.
#pragma once

namespace tl_emu {

enum : int { K_R = 1, K_W = 2 };

// ---- the shared arrays ---------------------------------------------------------------------
struct ShArray {
  const char* name;
  uintptr_t base;
  size_t bytes, elem;
  int rank;
  long dims[4];
  bool dynamic;
};
ShArray g_arr[256];
int g_narr;

int register_array(const char* name, const void* base, size_t bytes, size_t elem, int rank,
                   const long* dims, bool dynamic) {
  if (g_narr == 256) return 255;
  ShArray& a = g_arr[g_narr];
  a.name = name, a.base = (uintptr_t)base, a.bytes = bytes, a.elem = elem;
  a.rank = rank > 4 ? 4 : rank, a.dynamic = dynamic;
  for (int i = 0; i < a.rank; ++i) a.dims[i] = dims[i];
  return g_narr++;
}

struct ShReg {
  int id;
  template <class A> ShReg(A& a, const char* name) {
    long d[4] = {(long)std::extent_v<A, 0>, (long)std::extent_v<A, 1>,
                 (long)std::extent_v<A, 2>, (long)std::extent_v<A, 3>};
    id = register_array(name, (const void*)&a, sizeof(A), sizeof(std::remove_all_extents_t<A>),
                        (int)std::rank_v<A>, d, false);
  }
};

TL_NOINLINE void record(const volatile void* p, unsigned size, int line, int arr, int kind);

[[noreturn]] TL_NOINLINE inline void shared_oob(int arr, int line, long long index,
                                                long long extent, int dim) {
  Out o{};
  o.s("{\"status\":\"shared_oob\",\"array\":");
  o.str(arr >= 0 && arr < g_narr ? g_arr[arr].name : "?");
  o.f(",\"line\":%d,\"index\":%lld,\"extent\":%lld,\"dim\":%d", line, index, extent, dim);
  where(o);
  fatal(o);
}

// ---- proxies ---------------------------------------------------------------------------------
template <class E> struct Elem {
  using V = std::remove_cv_t<E>;
  E* p;
  int line, arr;
  void rec(int kind) const { record(p, sizeof(E), line, arr, kind); }
  operator V() const {
    rec(K_R);
    return *p;
  }
  Elem& operator=(V v) {
    rec(K_W);
    *p = v;
    return *this;
  }
  Elem& operator=(const Elem& o) { return *this = (V)o; }
#define TL_COMPOUND(OP)                                                                  \
  Elem& operator OP(V v) {                                                               \
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
  Elem& operator++() { return *this += 1; }
  Elem& operator--() { return *this -= 1; }
  V operator++(int) {
    rec(K_R | K_W);
    return (*p)++;
  }
  V operator--(int) {
    rec(K_R | K_W);
    return (*p)--;
  }
  E* operator&() const { return p; }  // address taken (atomics, pointers): not tracked
};
template <class E> struct Value<Elem<E>> { using type = std::remove_cv_t<E>; };

template <class E> inline decltype(auto) element(E* q, int line, int arr) {
  if constexpr (std::is_arithmetic_v<E>) {
    return Elem<E>{q, line, arr};
  } else {
    record(q, sizeof(E), line, arr, K_R);  // vectors and structs: a read of the element
    return (*q);
  }
}

template <class A> struct Idx {
  using E = std::remove_extent_t<A>;
  A* a;
  int line, arr;
  template <class I> decltype(auto) operator[](I i) const {
    long long k = (long long)i;
    if (k < 0 || k >= (long long)std::extent_v<A>)
      shared_oob(arr, line, k, (long long)std::extent_v<A>,
                 g_arr[arr].rank - (int)std::rank_v<A> + 1);
    if constexpr (std::is_array_v<E>) return Idx<E>{&(*a)[k], line, arr};
    else return element(&(*a)[k], line, arr);
  }
  operator E*() const { return *a; }
};

template <class T> struct PIdx {
  T* p;
  int line, arr;
  template <class I> decltype(auto) operator[](I i) const {
    long long k = (long long)i;
    long long off = (long long)((uintptr_t)p - (uintptr_t)g_dyn_shared) + k * (long long)sizeof(T);
    if (off < 0 || off + (long long)sizeof(T) > (long long)g_dyn_request)
      shared_oob(arr, line, off / (long long)sizeof(T), (long long)(g_dyn_request / sizeof(T)),
                 0);
    return element(p + k, line, arr);
  }
};

template <class A> inline Idx<A> sh(A& a, const ShReg& r, int line) { return Idx<A>{&a, line, r.id}; }
template <class T> inline PIdx<T> sh(T* p, const DynReg& r, int line) {
  return PIdx<T>{p, line, r.id};
}

// ---- races: a shadow word per 4 bytes of shared memory ---------------------------------------
struct Shadow {
  uint32_t epoch;
  uint16_t nw, nr, wt[2], rt[2];
  int32_t wl[2], rl[2];
};
Shadow* g_shadow;
uintptr_t g_sec_lo;
size_t g_sec_words, g_dyn_words;
uint32_t g_epoch = 1;

struct RaceRec {
  int arr, line1, kind1, line2, kind2;
  long long count, elem;
  unsigned t1, t2;
  uint3 block;
};
RaceRec g_races[128];
int g_nraces;
long long g_races_dropped;

inline void race(uintptr_t addr, int arr, unsigned t1, int l1, int k1, unsigned t2, int l2,
                 int k2) {
  if (l2 < l1 || (l2 == l1 && k2 < k1)) {
    std::swap(t1, t2), std::swap(l1, l2), std::swap(k1, k2);
  }
  for (int i = 0; i < g_nraces; ++i) {
    RaceRec& r = g_races[i];
    if (r.arr == arr && r.line1 == l1 && r.kind1 == k1 && r.line2 == l2 && r.kind2 == k2) {
      ++r.count;
      return;
    }
  }
  if (g_nraces == 128) {
    ++g_races_dropped;
    return;
  }
  const ShArray& A = g_arr[arr];
  uintptr_t base = A.dynamic ? (uintptr_t)g_dyn_shared : A.base;
  g_races[g_nraces++] = RaceRec{arr, l1, k1, l2, k2, 1,
                                (long long)((addr - base) / (A.elem ? A.elem : 1)),
                                t1, t2, blockIdx};
}

inline Shadow* shadow_of(uintptr_t w) {
  if (w - g_sec_lo < g_sec_words * 4) return &g_shadow[(w - g_sec_lo) / 4];
  uintptr_t d = (uintptr_t)g_dyn_shared;
  if (w - d < g_dyn_words * 4) return &g_shadow[g_sec_words + (w - d) / 4];
  return nullptr;
}

inline void check_race(uintptr_t addr, uintptr_t w, int arr, unsigned t, int line, int kind) {
  Shadow* s = shadow_of(w);
  if (!s) return;
  if (s->epoch != g_epoch) s->epoch = g_epoch, s->nw = s->nr = 0;
  if (kind & K_R) {
    for (int i = 0; i < s->nw; ++i)
      if (s->wt[i] != t) {
        race(addr, arr, s->wt[i], s->wl[i], K_W, t, line, K_R);
        break;
      }
    if (s->nr < 2 && !(s->nr == 1 && s->rt[0] == t)) s->rt[s->nr] = t, s->rl[s->nr++] = line;
  }
  if (kind & K_W) {
    bool found = false;
    for (int i = 0; i < s->nw && !found; ++i)
      if (s->wt[i] != t) race(addr, arr, s->wt[i], s->wl[i], K_W, t, line, K_W), found = true;
    for (int i = 0; i < s->nr && !found; ++i)
      if (s->rt[i] != t) race(addr, arr, s->rt[i], s->rl[i], K_R, t, line, K_W), found = true;
    if (s->nw < 2 && !(s->nw == 1 && s->wt[0] == t)) s->wt[s->nw] = t, s->wl[s->nw++] = line;
  }
}

// ---- bank conflicts ----------------------------------------------------------------------------
inline uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}
inline uint64_t key3(int line, int arr, int w) {
  return ((uint64_t)(uint32_t)line << 32) | ((uint64_t)(uint32_t)arr << 1) | (uint64_t)w;
}

// Open-addressing map from a nonzero 64/128-bit key to an int, cleared by a generation bump.
template <int N> struct Table {
  uint64_t k1[N], k2[N];
  uint32_t gen[N];
  int val[N];
  uint32_t cur = 1;
  int* get(uint64_t a, uint64_t b, bool* fresh) {
    uint32_t h = (uint32_t)mix(a * 31 + b) & (N - 1);
    for (int probe = 0; probe < N; ++probe, h = (h + 1) & (N - 1)) {
      if (gen[h] != cur) {
        gen[h] = cur, k1[h] = a, k2[h] = b, val[h] = 0;
        *fresh = true;
        return &val[h];
      }
      if (k1[h] == a && k2[h] == b) {
        *fresh = false;
        return &val[h];
      }
    }
    return nullptr;
  }
  void clear() { ++cur; }
};

struct Group {
  uint64_t key;  // key3(line, arr, w)
  uint32_t mask;
  uintptr_t addr[32];
  uint8_t size[32];
};
struct LineStat {
  uint64_t key;
  long long count, sum;
  int max;
};

Table<1024>* g_counts;  // this fiber's executions of (line, arr, w) in this epoch
Table<8192>* g_groups;  // this warp's (line, arr, w, k) -> index into g_group
Group* g_group;
int g_ngroup, g_group_cap;
Table<1024>* g_stat_index;
LineStat g_stats[1024];
int g_nstats;
int g_warp = -1, g_lane;

inline int degree(const Group& g) {
  unsigned size = 1;
  for (int l = 0; l < 32; ++l)
    if ((g.mask >> l & 1) && g.size[l] > size) size = g.size[l];
  int phases = size <= 4 ? 1 : size <= 8 ? 2 : 4, per = 32 / phases, worst = 0;
  for (int ph = 0; ph < phases; ++ph) {
    uintptr_t words[128];
    int n = 0;
    for (int l = ph * per; l < (ph + 1) * per; ++l) {
      if (!(g.mask >> l & 1)) continue;
      for (uintptr_t w = g.addr[l] / 4; w <= (g.addr[l] + g.size[l] - 1) / 4 && n < 128; ++w)
        words[n++] = w;
    }
    int head[32], next[128], per_bank[32] = {0};  // distinct words per bank, as linked lists
    for (int b = 0; b < 32; ++b) head[b] = -1;
    for (int i = 0; i < n; ++i) {
      int b = (int)(words[i] & 31), j = head[b];
      while (j >= 0 && words[j] != words[i]) j = next[j];
      if (j >= 0) continue;
      next[i] = head[b], head[b] = i, ++per_bank[b];
    }
    for (int b = 0; b < 32; ++b) worst = per_bank[b] > worst ? per_bank[b] : worst;
  }
  return worst ? worst : 1;
}

inline void bank_add(uintptr_t a, unsigned size, int line, int arr, int w);
#include "tilelab_emu_traffic.h"

inline void finish_warp() {
  for (int i = 0; i < g_ngroup; ++i) {
    const Group& g = g_group[i];
    if (((g.key >> 1) & 0x7fffffff) >= TL_GLOBAL_BASE) {  // a global request: sectors
      traffic_finish(g);
      continue;
    }
    int d = degree(g);
    bool fresh;
    int* slot = g_stat_index->get(g.key, 0, &fresh);
    if (!slot) continue;
    if (fresh) {
      if (g_nstats == 1024) continue;
      *slot = g_nstats;
      g_stats[g_nstats++] = LineStat{g.key, 0, 0, 0};
    }
    LineStat& s = g_stats[*slot];
    ++s.count, s.sum += d;
    if (d > s.max) s.max = d;
  }
  g_ngroup = 0;
  g_groups->clear();
}

inline void bank_add(uintptr_t a, unsigned size, int line, int arr, int w) {
  uint64_t key = key3(line, arr, w);
  bool fresh;
  int* k = g_counts->get(key, 1, &fresh);
  if (!k) return;
  int* gi = g_groups->get(key, (uint64_t)(*k)++ + 2, &fresh);
  if (!gi) return;
  if (fresh) {
    if (g_ngroup == g_group_cap) {
      g_group_cap = g_group_cap ? 2 * g_group_cap : 256;
      g_group = (Group*)realloc(g_group, sizeof(Group) * g_group_cap);
    }
    *gi = g_ngroup;
    Group& g = g_group[g_ngroup++];
    g.key = key, g.mask = 0;
  }
  Group& g = g_group[*gi];
  g.mask |= 1u << g_lane;
  g.addr[g_lane] = a;
  g.size[g_lane] = (uint8_t)(size > 255 ? 255 : size);
}

TL_NOINLINE void record(const volatile void* p, unsigned size, int line, int arr, int kind) {
  uintptr_t a = (uintptr_t)p;
  unsigned t = g_cur ? g_cur->linear : 0;
  for (uintptr_t w = a & ~(uintptr_t)3; w < a + size; w += 4) check_race(a, w, arr, t, line, kind);
  if (kind & K_R) bank_add(a, size, line, arr, 0);
  if (kind & K_W) bank_add(a, size, line, arr, 1);
}

// ---- hooks called by the scheduler --------------------------------------------------------------
void an_launch() {
  g_sec_lo = (uintptr_t)__start_tlshared;
  g_sec_words = round_up(static_shared_bytes(), 4) / 4;
  g_dyn_words = g_dyn_bytes / 4;
  g_shadow = (Shadow*)calloc(g_sec_words + g_dyn_words + 1, sizeof(Shadow));
  g_counts = (Table<1024>*)calloc(1, sizeof(Table<1024>));
  g_groups = (Table<8192>*)calloc(1, sizeof(Table<8192>));
  g_stat_index = (Table<1024>*)calloc(1, sizeof(Table<1024>));
  g_counts->cur = g_groups->cur = g_stat_index->cur = 1;
}
void an_block_begin() {
  ++g_epoch;
  g_warp = -1;
}
void an_fiber_begin(Fiber* f) {
  int warp = (int)(f->linear / 32);
  if (warp != g_warp) finish_warp(), g_warp = warp;
  g_lane = (int)(f->linear % 32);
  g_counts->clear();
}
void an_epoch_end() {
  finish_warp();
  g_warp = -1;
  ++g_epoch;
}

inline uint3 thread_of(unsigned t) {
  return uint3{t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
}
inline const char* kind_name(int k) { return k == K_W ? "write" : "read"; }

void an_write(Out& o) {
  o.s(",\"analysis\":{\"arrays\":[");
  for (int i = 0; i < g_narr; ++i) {
    const ShArray& A = g_arr[i];
    o.s(i ? ",{\"name\":" : "{\"name\":");
    o.str(A.name);
    o.f(",\"elem\":%lu,\"dynamic\":%s,\"dims\":[", (unsigned long)A.elem,
        A.dynamic ? "true" : "false");
    for (int d = 0; d < A.rank; ++d) o.f("%s%ld", d ? "," : "", A.dims[d]);
    o.s("]}");
  }
  o.s("],\"races\":[");
  for (int i = 0; i < g_nraces; ++i) {
    const RaceRec& r = g_races[i];
    o.f("%s{\"array\":%d,\"element\":%lld,\"lines\":[%d,%d],\"kinds\":[\"%s\",\"%s\"],"
        "\"count\":%lld,\"threads\":[",
        i ? "," : "", r.arr, r.elem, r.line1, r.line2, kind_name(r.kind1), kind_name(r.kind2),
        r.count);
    o.xyz(thread_of(r.t1));
    o.s(",");
    o.xyz(thread_of(r.t2));
    o.s("],\"block\":");
    o.xyz(r.block);
    o.s("}");
  }
  o.f("],\"races_dropped\":%lld,\"banks\":[", g_races_dropped);
  for (int i = 0; i < g_nstats; ++i) {
    const LineStat& s = g_stats[i];
    o.f("%s{\"line\":%d,\"array\":%d,\"kind\":\"%s\",\"accesses\":%lld,\"sum\":%lld,"
        "\"max\":%d}",
        i ? "," : "", (int)(s.key >> 32), (int)((s.key >> 1) & 0x7fffffff),
        (s.key & 1) ? "write" : "read", s.count, s.sum, s.max);
  }
  o.s("]");
  traffic_write(o);
  o.s("}");
}

}  // namespace tl_emu
