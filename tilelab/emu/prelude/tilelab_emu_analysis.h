// tilelab CPU emulator, analysis mode: shared-memory races and bank conflicts.
//
// Every load and store of the kernel reaches an_access() through the TSan hooks
// (tilelab_emu_tsan.h) with its address, width and code address; those in shared memory are
// recorded, whatever pointer they went through. The translator still rewrites `name[` on a
// shared array into `tl_emu::sh(name, tl_reg_name, __LINE__)[` to check each index against
// the array's extents. Code addresses become source lines in Python (addr2line). Accesses to
// the buffers the kernel's pointer parameters point into are global traffic
// (tilelab_emu_traffic.h).
// Races: two threads touch one 4-byte word in the same barrier epoch and one of them writes,
// unless both are lanes of one warp that met at __syncwarp or another warp-level operation
// since the first access, or both accesses are atomics (an atomic is a write: a plain read
// or write beside another thread's atomic races with it).
// Bank conflicts: the k-th execution of (code address, array, read/write) by the lanes of a
// warp between two meeting points is one warp-wide access; its degree is the most distinct
// words in one bank within one phase (32 lanes for 32-bit accesses, 16 for 64-bit, 8 for
// 128-bit, twice the lanes for a load whose lanes n and n^1, or n and n^2, read alike: the
// rule of tilelab/catalog/banks.py, held against the GPU by `tilelab bench bank_wide`);
// analysis builds keep a float4 copy whole (-fno-tree-sra) so it is one access.
#pragma once

namespace tl_emu {

// K_A: an atomic read-modify-write; K_C with it: atomicCAS, which checks the value it was
// given, so a plain read of the word beside it is no race (the Programming Guide's CAS loop
// reads its first guess plainly and tries again when another thread changed the word)
enum : int { K_R = 1, K_W = 2, K_A = 4, K_C = 8 };
// A writer's kind in a shadow: plain, an atomic, a compare-and-swap.
enum : uint8_t { W_PLAIN = 0, W_ATOMIC = 1, W_CAS = 2 };
TL_NOSAN inline uint8_t writer_kind(int kind) {
  return kind & K_C ? W_CAS : kind & K_A ? W_ATOMIC : W_PLAIN;
}
// The bytes of word `w` that the access [a, a + size) touches (bit i: byte w + i): a GPU's
// memory is byte-addressed, so threads that touch different bytes of a word do not race.
TL_NOSAN inline uint8_t bytes_of(uintptr_t a, unsigned size, uintptr_t w) {
  uintptr_t lo = a > w ? a : w, hi = a + size < w + 4 ? a + size : w + 4;
  uint8_t m = 0;
  for (uintptr_t b = lo; b < hi; ++b) m |= (uint8_t)(1u << (b - w));
  return m;
}

// ---- the shared arrays ---------------------------------------------------------------------
struct ShArray {
  const char* name;
  uintptr_t base;
  size_t bytes, elem;
  int rank;
  long dims[4];
  bool dynamic;
};
TL_DEF ShArray g_arr[256];
TL_DEF int g_narr;
TL_DEF uint8_t* g_word_arr;  // per word of the static section: 1 + its array's id (0: none known)
TL_DEF int g_dyn_arr TL_INIT(-1);   // the first extern __shared__ array: names the dynamic buffer

TL_NOSAN inline void map_array(int id) {
  const ShArray& a = g_arr[id];
  if (a.dynamic) {
    if (g_dyn_arr < 0) g_dyn_arr = id;
    return;
  }
  uintptr_t lo = (uintptr_t)__start_tlshared;
  if (!g_word_arr || a.base < lo) return;
  for (uintptr_t w = (a.base - lo) / 4; w < (a.base - lo + a.bytes + 3) / 4; ++w)
    g_word_arr[w] = (uint8_t)(id + 1);
}

#ifndef TILELAB_SPLIT
TL_NOSAN int register_array(const char* name, const void* base, size_t bytes, size_t elem,
                            int rank, const long* dims, bool dynamic) {
  if (g_narr == 255) return 254;
  ShArray& a = g_arr[g_narr];
  a.name = name, a.base = (uintptr_t)base, a.bytes = bytes, a.elem = elem;
  a.rank = rank > 4 ? 4 : rank, a.dynamic = dynamic;
  for (int i = 0; i < a.rank; ++i) a.dims[i] = dims[i];
  map_array(g_narr);
  return g_narr++;
}
#endif

struct ShReg {
  int id;
  template <class A> ShReg(A& a, const char* name) {
    long d[4] = {(long)std::extent_v<A, 0>, (long)std::extent_v<A, 1>,
                 (long)std::extent_v<A, 2>, (long)std::extent_v<A, 3>};
    id = register_array(name, (const void*)&a, sizeof(A), sizeof(std::remove_all_extents_t<A>),
                        (int)std::rank_v<A>, d, false);
  }
};

// ---- races: a shadow word per 4 bytes of shared memory ---------------------------------------
struct Shadow {
  uint32_t epoch;
  uint16_t nw, nr, wt[2], rt[2];
  uint8_t wa[2];          // the writer's kind (W_PLAIN if any of its writes this epoch was)
  uint8_t wm[2], rm[2];   // the bytes each access touched
  uint32_t wl[2], rl[2];  // code addresses (offsets in the library)
  uint32_t wg[2], rg[2];  // the warp's meeting count at the access
};
TL_DEF Shadow* g_shadow;
TL_DEF uintptr_t g_sec_lo;
TL_DEF size_t g_sec_words, g_dyn_words;
TL_DEF uint32_t g_epoch TL_INIT(1);
TL_DEF uint32_t g_warp_gen[32];     // meetings (warp-level operations) of each warp of the block
TL_DEF uint32_t g_lane_gen[1024];   // the last meeting each thread took part in

struct RaceRec {
  int arr;
  uint32_t pc1, pc2;
  int kind1, kind2;
  long long count, elem;
  unsigned t1, t2;
  uint3 block, block1;  // t2's block and t1's (in global memory, two blocks may race)
  bool cross_warp;  // some instance involved two warps: only a block barrier orders it
  uint8_t order;    // bit 0: an instance where the access at pc1 came first; bit 1: at pc2
  uint8_t values;   // two plain writes: bit 0, an instance storing the value already there;
                    // bit 1, one storing another value
};
TL_DEF RaceRec g_races[128];
TL_DEF int g_nraces;
TL_DEF long long g_races_dropped;

TL_NOSAN inline int array_at(uintptr_t a) {
  if (a - g_sec_lo < g_sec_words * 4) return g_word_arr ? (int)g_word_arr[(a - g_sec_lo) / 4] - 1 : -1;
  return g_dyn_arr;
}

TL_NOSAN inline long long element_of(uintptr_t addr, int arr) {
  if (arr >= 0) {
    const ShArray& A = g_arr[arr];
    uintptr_t base = A.dynamic ? (uintptr_t)g_dyn_shared : A.base;
    return (long long)((addr - base) / (A.elem ? A.elem : 1));
  }
  uintptr_t base = addr - g_sec_lo < g_sec_words * 4 ? g_sec_lo : (uintptr_t)g_dyn_shared;
  return (long long)((addr - base) / 4);
}

TL_NOSAN inline bool same_block(uint3 b) {
  return b.x == blockIdx.x && b.y == blockIdx.y && b.z == blockIdx.z;
}

// A race of array `arr` (its element from `elem_of` where first recorded, or where a better
// example): thread t1 of block b1 at code address l1 (kind k1), t2 of this block at l2.
template <class F>
TL_NOSAN inline int race_in(int arr, F elem_of, unsigned t1, uint32_t l1, int k1, uint3 b1,
                            unsigned t2, uint32_t l2, int k2) {
  bool other_block = !same_block(b1);
  uint3 b2 = blockIdx;
  uint8_t order = 1;  // t1's access came first
  if (l2 < l1 || (l2 == l1 && k2 < k1)) {
    std::swap(t1, t2), std::swap(l1, l2), std::swap(k1, k2), std::swap(b1, b2);
    order = 2;
  }
  bool cross = other_block || t1 / 32 != t2 / 32;
  for (int i = 0; i < g_nraces; ++i) {
    RaceRec& r = g_races[i];
    if (r.arr == arr && r.pc1 == l1 && r.kind1 == k1 && r.pc2 == l2 && r.kind2 == k2) {
      ++r.count;
      r.order |= order;
      if (cross && !r.cross_warp)  // a better example: only a block barrier orders these
        r.cross_warp = true, r.t1 = t1, r.t2 = t2, r.elem = elem_of(), r.block1 = b1,
        r.block = b2;
      return i;
    }
  }
  if (g_nraces == 128) {
    ++g_races_dropped;
    return -1;
  }
  g_races[g_nraces] = RaceRec{arr, l1, l2, k1, k2, 1, elem_of(), t1, t2, b2, b1, cross, order, 0};
  return g_nraces++;
}

TL_NOSAN inline int race(uintptr_t addr, unsigned t1, uint32_t l1, int k1, unsigned t2,
                         uint32_t l2, int k2) {
  int arr = array_at(addr);
  return race_in(arr, [&] { return element_of(addr, arr); }, t1, l1, k1, blockIdx, t2, l2, k2);
}

// Two plain writes of one shared word: whether the second stores the value already there
// (several lanes storing one value) or another (an index sending two threads to one
// element). The hook runs before its store, so the word is compared at the next access of
// any thread, or when the fiber yields (fibers never preempt one another).
struct Pending {
  int race;
  uintptr_t word;
  uint32_t old, mask;
};
TL_DEF Pending g_pending[8];
TL_DEF int g_npending;

TL_NOSAN inline void settle_values() {
  for (int i = 0; i < g_npending; ++i) {
    const Pending& p = g_pending[i];
    uint32_t now = *(const uint32_t*)p.word;  // -fno-strict-aliasing
    g_races[p.race].values |= (uint8_t)((now & p.mask) == (p.old & p.mask) ? 1 : 2);
  }
  g_npending = 0;
}

TL_NOSAN inline void compare_later(int race, uintptr_t w, uint8_t m) {
  if (race < 0 || g_npending == 8) return;
  uint32_t mask = 0;
  for (int b = 0; b < 4; ++b)
    if (m >> b & 1) mask |= 0xffu << (8 * b);
  uint32_t old = *(const uint32_t*)w;
  g_pending[g_npending++] = Pending{race, w, old, mask};
}

// Whether `a` lies in this block's shared memory (the static section or the dynamic buffer).
TL_NOSAN inline bool in_shared(uintptr_t a) {
  return a - g_sec_lo < g_sec_words * 4 || a - (uintptr_t)g_dyn_shared < g_dyn_words * 4;
}

TL_NOSAN inline Shadow* shadow_of(uintptr_t w) {
  if (w - g_sec_lo < g_sec_words * 4) return &g_shadow[(w - g_sec_lo) / 4];
  uintptr_t d = (uintptr_t)g_dyn_shared;
  if (w - d < g_dyn_words * 4) return &g_shadow[g_sec_words + (w - d) / 4];
  return nullptr;
}

// Whether thread `t1`'s access at its warp's meeting count `gen` is ordered before thread
// `t2`'s access now: both are lanes of one warp and took part in a meeting since.
TL_NOSAN inline bool warp_ordered(unsigned t1, uint32_t gen, unsigned t2) {
  return t1 / 32 == t2 / 32 && t1 < 1024 && t2 < 1024 && g_lane_gen[t1] > gen &&
         g_lane_gen[t2] > gen;
}

TL_NOSAN inline void check_race(uintptr_t addr, uintptr_t w, unsigned t, uint32_t pc,
                                int kind, uint8_t m) {
  Shadow* s = shadow_of(w);
  if (!s) return;
  if (s->epoch != g_epoch) s->epoch = g_epoch, s->nw = s->nr = 0;
  uint32_t gen = g_warp_gen[(t / 32) & 31];
  if (kind & K_R) {  // a plain read: any other thread's write but a compare-and-swap
    for (int i = 0; i < s->nw; ++i)
      if (s->wt[i] != t && (s->wm[i] & m) && s->wa[i] != W_CAS &&
          !warp_ordered(s->wt[i], s->wg[i], t)) {
        race(addr, s->wt[i], s->wl[i], s->wa[i] ? K_A : K_W, t, pc, K_R);
        break;
      }
    if (s->nr < 2 && !(s->nr == 1 && s->rt[0] == t))
      s->rt[s->nr] = t, s->rl[s->nr] = pc, s->rm[s->nr] = m, s->rg[s->nr++] = gen;
    else if (s->rt[s->nr - 1] == t)
      s->rg[s->nr - 1] = gen, s->rm[s->nr - 1] |= m;
  }
  if (kind & (K_W | K_A)) {
    uint8_t wk = writer_kind(kind);
    int shown = wk ? K_A : K_W;
    bool found = false;
    for (int i = 0; i < s->nw && !found; ++i)  // two atomics: no race
      if (s->wt[i] != t && (s->wm[i] & m) && !(wk && s->wa[i]) &&
          !warp_ordered(s->wt[i], s->wg[i], t)) {
        int r = race(addr, s->wt[i], s->wl[i], s->wa[i] ? K_A : K_W, t, pc, shown);
        if (!wk && !s->wa[i] && (kind & K_W) && !(kind & K_R)) compare_later(r, w, m & s->wm[i]);
        found = true;
      }
    for (int i = 0; i < s->nr && !found; ++i)
      if (s->rt[i] != t && (s->rm[i] & m) && wk != W_CAS && !warp_ordered(s->rt[i], s->rg[i], t))
        race(addr, s->rt[i], s->rl[i], K_R, t, pc, shown), found = true;
    if (s->nw < 2 && !(s->nw == 1 && s->wt[0] == t))
      s->wt[s->nw] = t, s->wl[s->nw] = pc, s->wa[s->nw] = wk, s->wm[s->nw] = m,
      s->wg[s->nw++] = gen;
    else if (s->wt[s->nw - 1] == t)  // a plain write stays plain
      s->wg[s->nw - 1] = gen, s->wa[s->nw - 1] = s->wa[s->nw - 1] && wk ? wk : W_PLAIN,
      s->wm[s->nw - 1] |= m;
  }
}

TL_NOSAN inline uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

// ---- races in global memory: the kernel's buffers and its __device__ variables -------------
// The blocks of a launch run at the same time on a GPU, in no order: a read and a write (or
// an atomic and a plain access) of one word by threads of two blocks race, whenever the
// emulator ran them; within a block, as in shared memory, those of one barrier interval
// that no warp meeting orders. Two plain writes alone are not reported: the same value
// written twice does no harm on a GPU. A word keeps its last writer and two readers.
struct GWord {
  uintptr_t word;  // 0: a free slot
  uint32_t w_epoch, w_pc, w_gen, r_epoch[2], r_pc[2], r_gen[2];
  uint3 w_block, r_block[2];
  uint16_t w_t, r_t[2];
  uint8_t w_set, w_atomic, nr, r_next;  // w_atomic: the writer's kind (W_PLAIN...)
  uint8_t w_mask, r_mask[2];            // the bytes each access touched
};
TL_DEF GWord* g_gwords;
TL_DEF size_t g_gwords_cap;                // a power of two (0: not tracked)
TL_DEF uintptr_t g_dev_lo, g_dev_span;     // the hull of the writable __device__ variables
enum : int { TL_DEVICE_BASE = 1 << 24 };   // array ids of __device__ variables (by index)

TL_NOSAN inline GWord* gword(uintptr_t w) {
  size_t h = (size_t)mix(w) & (g_gwords_cap - 1);
  for (int probe = 0; probe < 64; ++probe, h = (h + 1) & (g_gwords_cap - 1)) {
    GWord& g = g_gwords[h];
    if (g.word == w) return &g;
    if (!g.word) {
      memset(&g, 0, sizeof g);
      g.word = w;
      return &g;
    }
  }
  return nullptr;  // crowded: this word is not tracked
}

// Whether thread t's access now is unordered with thread t2's of block b2 in epoch e2.
TL_NOSAN inline bool g_unordered(uint3 b2, uint32_t e2, unsigned t2, uint32_t gen2,
                                 unsigned t) {
  if (!same_block(b2)) return true;
  return e2 == g_epoch && t2 != t && !warp_ordered(t2, gen2, t);
}

template <class F>
TL_NOSAN inline void check_global(uintptr_t w, uint8_t m, unsigned t, uint32_t pc, int kind,
                                  int arr, F elem_of) {
  GWord* g = g_gwords ? gword(w) : nullptr;
  if (!g) return;
  uint32_t gen = g_warp_gen[(t / 32) & 31];
  uint8_t wk = writer_kind(kind);
  bool writes = kind & (K_W | K_A);
  int shown = kind & K_R ? K_R : wk ? K_A : K_W;
  if (g->w_set && (g->w_mask & m) && g_unordered(g->w_block, g->w_epoch, g->w_t, g->w_gen, t) &&
      ((kind & K_R) ? g->w_atomic != W_CAS : (!wk != !g->w_atomic))) {
    race_in(arr, elem_of, g->w_t, g->w_pc, g->w_atomic ? K_A : K_W, g->w_block, t, pc, shown);
  } else if (writes && wk != W_CAS) {
    for (int i = 0; i < g->nr; ++i)
      if ((g->r_mask[i] & m) &&
          g_unordered(g->r_block[i], g->r_epoch[i], g->r_t[i], g->r_gen[i], t)) {
        race_in(arr, elem_of, g->r_t[i], g->r_pc[i], K_R, g->r_block[i], t, pc, shown);
        break;
      }
    // a lost update: this thread read the word, and another's plain write of it since is
    // unordered with this one (x += v by many threads): two plain writes, reported here only
    if (!wk && g->w_set && !g->w_atomic && (g->w_mask & m) &&
        g_unordered(g->w_block, g->w_epoch, g->w_t, g->w_gen, t))
      for (int i = 0; i < g->nr; ++i)
        if (g->r_t[i] == t && same_block(g->r_block[i]) && g->r_epoch[i] == g_epoch &&
            (g->r_mask[i] & m)) {
          race_in(arr, elem_of, g->w_t, g->w_pc, K_W, g->w_block, t, pc, K_W);
          break;
        }
  }
  if (writes) {
    bool same = g->w_set && g->w_t == t && same_block(g->w_block) && g->w_epoch == g_epoch;
    bool keep = same && !g->w_atomic && wk;  // a plain write stays plain, and keeps its line
    g->w_atomic = same && !(g->w_atomic && wk) ? W_PLAIN : wk;
    g->w_mask = same ? (uint8_t)(g->w_mask | m) : m;
    if (!keep) g->w_pc = pc;
    g->w_set = 1, g->w_epoch = g_epoch, g->w_gen = gen, g->w_t = (uint16_t)t;
    g->w_block = blockIdx;
  }
  if (kind & K_R) {
    int i = 0;
    while (i < g->nr && !(g->r_t[i] == t && same_block(g->r_block[i]))) ++i;
    bool again = i < g->nr && g->r_epoch[i] == g_epoch;
    if (i == g->nr) i = g->nr < 2 ? g->nr++ : (g->r_next ^= 1);
    g->r_mask[i] = again ? (uint8_t)(g->r_mask[i] | m) : m;
    g->r_t[i] = (uint16_t)t, g->r_epoch[i] = g_epoch, g->r_pc[i] = pc, g->r_gen[i] = gen;
    g->r_block[i] = blockIdx;
  }
}

// ---- bank conflicts ----------------------------------------------------------------------------
TL_NOSAN inline uint64_t key3(uint32_t pc, int arr, int w) {
  return ((uint64_t)pc << 32) | ((uint64_t)(uint32_t)(arr + 1) << 1) | (uint64_t)w;
}

// Open-addressing map from a nonzero 64/128-bit key to an int, cleared by a generation bump.
template <int N> struct Table {
  uint64_t k1[N], k2[N];
  uint32_t gen[N];
  int val[N];
  uint32_t cur = 1;
  TL_NOSAN int* get(uint64_t a, uint64_t b, bool* fresh) {
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
  TL_NOSAN void clear() { ++cur; }
};

struct Group {
  uint64_t key;  // key3(pc, arr, w)
  uint32_t mask;
  uintptr_t addr[32];
  uint8_t size[32];
};
struct LineStat {
  uint64_t key;
  long long count, sum;
  int max;
};

TL_DEF Table<1024>* g_counts;  // this fiber's executions of (pc, arr, w) in this pass
TL_DEF Table<8192>* g_groups;  // this warp's (pc, arr, w, k) -> index into g_group
TL_DEF Group* g_group;
TL_DEF int g_ngroup, g_group_cap;
TL_DEF Table<1024>* g_stat_index;
TL_DEF LineStat g_stats[1024];
TL_DEF int g_nstats;
TL_DEF int g_warp TL_INIT(-1), g_lane;

// Whether every active lane of a load reads what lane ^ step reads (step 1 or 2), where
// that lane is active too: NVIDIA's uniform loads, served in half as many phases.
TL_NOSAN inline bool paired(const Group& g) {
  for (int step = 1; step <= 2; ++step) {
    bool all = true;
    for (int l = 0; l < 32 && all; ++l)
      if ((g.mask >> l & 1) && (g.mask >> (l ^ step) & 1) && g.addr[l] != g.addr[l ^ step])
        all = false;
    if (all) return true;
  }
  return false;
}

// The rule of tilelab/catalog/banks.py: phases of 32 lanes for 4-byte accesses, 16 for
// 8-byte, 8 for 16-byte, twice the lanes for a paired load; the worst phase's passes.
TL_NOSAN inline int degree(const Group& g) {
  unsigned size = 1;
  for (int l = 0; l < 32; ++l)
    if ((g.mask >> l & 1) && g.size[l] > size) size = g.size[l];
  int phases = size <= 4 ? 1 : size <= 8 ? 2 : 4, worst = 0;
  if (phases > 1 && !(g.key & 1) && paired(g)) phases /= 2;  // key bit 0: 1 for a write
  int per = 32 / phases;
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

#include "tilelab_emu_traffic.h"

TL_NOSAN inline void finish_warp() {
  for (int i = 0; i < g_ngroup; ++i) {
    const Group& g = g_group[i];
    if (((g.key >> 1) & 0x7fffffff) >= TL_GLOBAL_BASE) {  // a global request: sectors
      traffic_finish(g);
      continue;
    }
    int arr0 = (int)((g.key >> 1) & 0x7fffffff) - 1;
    touch_shared(g, arr0 >= 0 && arr0 < g_narr && g_arr[arr0].dynamic ? (uintptr_t)g_dyn_shared
                                                                      : g_sec_lo);
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

TL_NOSAN inline void bank_add(uintptr_t a, unsigned size, uint32_t pc, int arr, int w) {
  uint64_t key = key3(pc, arr, w);
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

TL_NOINLINE TL_NOSAN void record(uintptr_t a, unsigned size, uint32_t pc, int kind);
#ifndef TILELAB_SPLIT
TL_NOINLINE TL_NOSAN void record(uintptr_t a, unsigned size, uint32_t pc, int kind) {
  if (g_npending) settle_values();
  unsigned t = g_cur->linear;
  for (uintptr_t w = a & ~(uintptr_t)3; w < a + size; w += 4)
    check_race(a, w, t, pc, kind, bytes_of(a, size, w));
  int arr = array_at(a);
  if (kind & K_R) bank_add(a, size, pc, arr, 0);
  if (kind & K_W) bank_add(a, size, pc, arr, 1);
}
#endif

// ---- global bounds: an access outside its buffer, found at the access ---------------------------
// The graded build finds one only where it reaches a guard region, or (a write into the few
// bytes between the data's end and the guard, or into the slack before its start) by a changed
// canary after the kernel ended; a read there went unseen. Here every access that lies in a
// buffer's mapping but not within its bytes stops the launch with its thread and line.
TL_DEF uintptr_t g_maps_lo, g_maps_span;  // the hull of the buffers' mappings, guards included

TL_NOINLINE TL_NOSAN void global_bounds(uintptr_t a, unsigned size, uintptr_t pc, int kind);
#ifndef TILELAB_SPLIT
TL_NOINLINE TL_NOSAN void global_bounds(uintptr_t a, unsigned size, uintptr_t pc, int kind) {
  int hit = -1;
  for (int b = 0; b < g_nbuf; ++b) {
    const Buf& B = g_bufs[b];
    uintptr_t d = (uintptr_t)B.data;
    if (a >= d && a + size <= d + B.n) return;  // within a buffer
    if (a < (uintptr_t)B.map + B.map_len && a + size > (uintptr_t)B.map) hit = b;
  }
  if (hit < 0) return;  // in no buffer's mapping: not a buffer's access
  const Buf& B = g_bufs[hit];
  uintptr_t d = (uintptr_t)B.data, first = a >= d && a < d + B.n ? d + B.n : a;
  long long off = (long long)(first - d), el = (long long)B.elem;
  long long idx = off >= 0 ? off / el : -((-off + el - 1) / el);
  Out o{g_fault_buf, 0, sizeof g_fault_buf, true};
  o.f("{\"status\":\"fault\",\"kind\":\"global\",\"access\":\"%s\",\"buffer\":%d,"
      "\"index\":%lld,\"byte_offset\":%lld,\"size\":%u,\"in_block\":true",
      kind == K_R ? "read" : "write", hit, idx, off, size);
  where(o);
  pcs(o, pc - 1);
  fatal_logged(o);
}
#endif

TL_NOINLINE TL_NOSAN void global_race(uintptr_t a, unsigned size, uint32_t pc, int kind);

// An atomic of the kernel (tilelab_emu.h), called by it: ``ret`` is in the kernel's line.
#ifndef TILELAB_SPLIT
TL_NOINLINE TL_NOSAN void an_atomic(uintptr_t a, unsigned size, uintptr_t ret, bool cas) {
  if (!g_cur || !g_in_block) return;
  uint32_t pc = (uint32_t)(ret - 1 - g_self_base);
  int kind = cas ? K_A | K_C : K_A;
  if (!in_shared(a) && a - g_maps_lo < g_maps_span) global_bounds(a, size, ret, kind);
  if (!in_shared(a)) return global_race(a, size, pc, kind);
  unsigned t = g_cur->linear;
  for (uintptr_t w = a & ~(uintptr_t)3; w < a + size; w += 4)
    check_race(a, w, t, pc, kind, bytes_of(a, size, w));
}

// A global access: the kernel's buffers (where a parameter points) and __device__ variables.
TL_NOINLINE TL_NOSAN void global_race(uintptr_t a, unsigned size, uint32_t pc, int kind) {
  int arr = -1;
  uintptr_t base = 0;
  if (a - g_glob_lo < g_glob_span) {
    int p = param_at(a);
    for (int r = 0; r < g_nregions && p >= 0; ++r)
      if (g_regions[r].param == p) {
        arr = TL_GLOBAL_BASE + p, base = g_regions[r].ptr;
        break;
      }
  }
  for (int g = 0; arr < 0 && a - g_dev_lo < g_dev_span && g < tilelab_nglobals; ++g) {
    uintptr_t lo = (uintptr_t)tilelab_globals[g].addr;
    if (!tilelab_globals[g].constant && a - lo < tilelab_globals[g].size)
      arr = TL_DEVICE_BASE + g, base = lo;
  }
  if (arr < 0) return;
  unsigned t = g_cur->linear, width = size ? size : 1;
  auto elem = [&] { return (long long)((intptr_t)(a - base) / (intptr_t)width); };
  for (uintptr_t w = a & ~(uintptr_t)3; w < a + size; w += 4)
    check_global(w, bytes_of(a, size, w), t, pc, kind, arr, elem);
}
#endif

// Every load and store of the kernel comes here (inlined into the TSan hooks): most are
// not to shared memory nor near the parameters' buffers, so those tests come first.
TL_NOSAN inline __attribute__((always_inline)) void an_access(uintptr_t a, unsigned size,
                                                              int kind, uintptr_t pc) {
  bool shared = in_shared(a);
  if (__builtin_expect(!shared && a - g_maps_lo >= g_maps_span && a - g_dev_lo >= g_dev_span, 1))
    return;
  if (!g_cur || !g_in_block) return;
  uint32_t at = (uint32_t)(pc - 1 - g_self_base);
  if (shared) return record(a, size, at, kind);
  // logged first (a traced block's log ends with the access that stops it), then checked
  if (a - g_glob_lo < g_glob_span) global_record(a, size, at, kind);
  if (a - g_maps_lo < g_maps_span) global_bounds(a, size, pc, kind);
  global_race(a, size, at, kind);
}

// ---- hooks called by the scheduler --------------------------------------------------------------
#ifndef TILELAB_SPLIT
TL_NOSAN void an_launch() {
  g_sec_lo = (uintptr_t)__start_tlshared;
  g_sec_words = round_up(static_shared_bytes(), 4) / 4;
  g_dyn_words = g_dyn_bytes / 4;
  g_shadow = (Shadow*)calloc(g_sec_words + g_dyn_words + 1, sizeof(Shadow));
  g_word_arr = (uint8_t*)calloc(g_sec_words + 1, 1);
  for (int i = 0; i < g_narr; ++i) map_array(i);
  g_counts = (Table<1024>*)calloc(1, sizeof(Table<1024>));
  g_groups = (Table<8192>*)calloc(1, sizeof(Table<8192>));
  g_stat_index = (Table<1024>*)calloc(1, sizeof(Table<1024>));
  g_counts->cur = g_groups->cur = g_stat_index->cur = 1;
  traffic_launch();
  uintptr_t maps_lo = UINTPTR_MAX, maps_hi = 0;
  for (int b = 0; b < g_nbuf; ++b) {
    uintptr_t m = (uintptr_t)g_bufs[b].map, e = m + g_bufs[b].map_len;
    maps_lo = m < maps_lo ? m : maps_lo, maps_hi = e > maps_hi ? e : maps_hi;
  }
  g_maps_lo = maps_hi ? maps_lo : 0, g_maps_span = maps_hi ? maps_hi - maps_lo : 0;
  size_t words = 0;
  for (int r = 0; r < g_nregions; ++r) words += (g_regions[r].hi - g_regions[r].lo) / 4 + 1;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int g = 0; g < tilelab_nglobals; ++g) {
    if (tilelab_globals[g].constant) continue;
    uintptr_t a = (uintptr_t)tilelab_globals[g].addr, n = tilelab_globals[g].size;
    lo = a < lo ? a : lo, hi = a + n > hi ? a + n : hi, words += n / 4 + 1;
  }
  g_dev_lo = hi ? lo : 0, g_dev_span = hi ? hi - lo : 0;
  for (g_gwords_cap = 1024; g_gwords_cap < 2 * words && g_gwords_cap < (1u << 20);)
    g_gwords_cap *= 2;
  g_gwords = (GWord*)calloc(g_gwords_cap, sizeof(GWord));
  if (!g_gwords) g_gwords_cap = 0;
}
TL_NOSAN void an_block_begin() {
  touch_block_begin();
  ++g_epoch;
  g_warp = -1;
  memset(g_warp_gen, 0, sizeof g_warp_gen);
  memset(g_lane_gen, 0, sizeof g_lane_gen);
}
TL_NOSAN void an_fiber_begin(Fiber* f) {
  settle_values();
  int warp = (int)(f->linear / 32);
  if (warp != g_warp) finish_warp(), g_warp = warp;
  g_lane = (int)(f->linear % 32);
  g_counts->clear();
}
TL_NOSAN void an_epoch_end() {
  settle_values();
  finish_warp();
  touch_epoch_end();
  g_warp = -1;
  ++g_epoch;
}
TL_NOSAN void an_pass_end() {  // lanes meet again at the next pass: group accesses afresh
  settle_values();
  finish_warp();
  g_warp = -1;
}
TL_NOSAN void an_warp_sync(int warp, unsigned lanes) {
  uint32_t gen = ++g_warp_gen[warp & 31];
  for (int l = 0; l < 32; ++l)
    if ((lanes >> l & 1) && warp * 32 + l < 1024) g_lane_gen[warp * 32 + l] = gen;
}
#endif

inline uint3 thread_of(unsigned t) {
  return uint3{t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
}
inline const char* kind_name(int k) {
  return k == K_A ? "atomic write" : k == K_W ? "write" : "read";
}

#ifndef TILELAB_SPLIT
TL_NOSAN void an_write(Out& o) {
  settle_values();
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
    o.f("%s{\"array\":%d,\"element\":%lld,\"pcs\":[%u,%u],\"kinds\":[\"%s\",\"%s\"],"
        "\"count\":%lld,\"same_warp\":%s,\"order\":%d,\"values\":%d,\"threads\":[",
        i ? "," : "", r.arr, r.elem, r.pc1, r.pc2, kind_name(r.kind1), kind_name(r.kind2),
        r.count, r.cross_warp ? "false" : "true", (int)r.order, (int)r.values);
    o.xyz(thread_of(r.t1));
    o.s(",");
    o.xyz(thread_of(r.t2));
    o.s("],\"block\":");
    o.xyz(r.block);
    o.s(",\"block1\":");
    o.xyz(r.block1);
    o.s("}");
  }
  o.s("],\"device_globals\":[");
  for (int g = 0; g < tilelab_nglobals; ++g) {
    o.s(g ? "," : "");
    o.str(tilelab_globals[g].name);
  }
  o.f("],\"races_dropped\":%lld,\"banks\":[", g_races_dropped);
  for (int i = 0; i < g_nstats; ++i) {
    const LineStat& s = g_stats[i];
    o.f("%s{\"pc\":%u,\"array\":%d,\"kind\":\"%s\",\"accesses\":%lld,\"sum\":%lld,"
        "\"max\":%d}",
        i ? "," : "", (uint32_t)(s.key >> 32), (int)((s.key >> 1) & 0x7fffffff) - 1,
        (s.key & 1) ? "write" : "read", s.count, s.sum, s.max);
  }
  o.s("]");
  traffic_write(o);
  o.s("}");
}
#endif

}  // namespace tl_emu
