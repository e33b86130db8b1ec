// tilelab CPU emulator: the commonly used part of cooperative_groups.
//
// this_thread_block() (sync, thread_rank, num_threads/size, group_index, thread_index,
// dim_threads/group_dim), tiled_partition<N> of a block or a tile (N a power of two up to
// 32: sync, thread_rank, num_threads/size, meta_group_rank/size, shfl, shfl_up, shfl_down,
// shfl_xor, any, all, ballot, match_any, match_all), the dynamic tiled_partition(g, n),
// coalesced_threads(), cg::reduce / inclusive_scan / exclusive_scan with cg::plus, less,
// greater, bit_and, bit_or, bit_xor, and memcpy_async / wait. Warp-level members go through
// the warp primitives of tilelab_emu_warp.h, with the tile's lanes as the mask and its size
// as the width; a barrier is known by the line that calls it. Grid-wide groups (this_grid)
// are refused before compiling: blocks here run one at a time and cannot wait on each other.
#pragma once

namespace cooperative_groups {
namespace tl_detail {
inline unsigned linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
inline unsigned lane() { return linear_tid() & 31u; }
constexpr int kSiteBase = 1 << 24;  // barrier sites of group syncs: apart from __COUNTER__'s
inline unsigned rank_in(unsigned mask, unsigned lane) {
  return (unsigned)__builtin_popcount(mask & ((1u << lane) - 1u));
}
inline unsigned compact(unsigned bits, unsigned mask) {  // bits of mask's lanes, by rank
  unsigned r = 0, k = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1) r |= (bits >> l & 1u) << k++;
  return r;
}
}  // namespace tl_detail

// A group of any kind (what thread_block, tiles and coalesced groups convert to).
class thread_group {
 protected:
  int kind_;  // 0: block, 1: a tile or coalesced group within one warp
  unsigned mask_, size_;

 public:
  thread_group(int kind, unsigned mask, unsigned size) : kind_(kind), mask_(mask), size_(size) {}
  void sync(int line = __builtin_LINE()) const {
    if (kind_ == 0) tl_emu::syncthreads(line, tl_detail::kSiteBase + line);
    else tl_emu::SyncWarp{line}(mask_);
  }
  unsigned long long num_threads() const { return size_; }
  unsigned long long size() const { return size_; }
  unsigned long long thread_rank() const {
    return kind_ == 0 ? tl_detail::linear_tid() : tl_detail::rank_in(mask_, tl_detail::lane());
  }
};

class thread_block : public thread_group {
 public:
  thread_block() : thread_group(0, 0xffffffffu, tl_detail::block_threads()) {}
  void sync(int line = __builtin_LINE()) const {
    tl_emu::syncthreads(line, tl_detail::kSiteBase + line);
  }
  static unsigned int thread_rank() { return tl_detail::linear_tid(); }
  static unsigned int num_threads() { return tl_detail::block_threads(); }
  static unsigned int size() { return tl_detail::block_threads(); }
  static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  static dim3 group_dim() { return blockDim; }
  static dim3 dim_threads() { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }

// Lanes of one warp acting together: a tile of N lanes, or the coalesced lanes.
class warp_group : public thread_group {
 protected:
  unsigned width_;  // the shuffle width (N for a tile, 32 for a coalesced group)
  bool tile_;

  unsigned lane_of_rank(unsigned r) const {
    if (tile_) return (tl_detail::lane() & ~(width_ - 1)) + r;
    unsigned l = __fns(mask_, 0, (int)r + 1);
    return l == 0xffffffffu ? tl_detail::lane() : l;
  }
  unsigned local(unsigned bits) const {  // lane bits to bits by rank within the group
    return tl_detail::compact(bits, mask_);
  }

 public:
  warp_group(unsigned mask, unsigned size, unsigned width, bool tile)
      : thread_group(1, mask, size), width_(width), tile_(tile) {}
  void sync(int line = __builtin_LINE()) const { tl_emu::SyncWarp{line}(mask_); }
  unsigned int thread_rank() const {
    return tile_ ? tl_detail::lane() & (width_ - 1) : tl_detail::rank_in(mask_, tl_detail::lane());
  }
  unsigned int num_threads() const { return size_; }
  unsigned int size() const { return size_; }
  template <class T> auto shfl(T v, int src, int line = __builtin_LINE()) const {
    if (tile_) return tl_emu::shfl_sync(line, mask_, v, src, (int)width_);
    return tl_emu::shfl_sync(line, mask_, v, (int)lane_of_rank((unsigned)src % size_), 32);
  }
  template <class T> auto shfl_down(T v, unsigned d, int line = __builtin_LINE()) const {
    if (tile_) return tl_emu::shfl_down_sync(line, mask_, v, d, (int)width_);
    unsigned r = thread_rank() + d;
    return tl_emu::shfl_sync(line, mask_, v,
                             (int)(r < size_ ? lane_of_rank(r) : tl_detail::lane()), 32);
  }
  template <class T> auto shfl_up(T v, unsigned d, int line = __builtin_LINE()) const {
    if (tile_) return tl_emu::shfl_up_sync(line, mask_, v, d, (int)width_);
    unsigned r = thread_rank();
    return tl_emu::shfl_sync(line, mask_, v,
                             (int)(r >= d ? lane_of_rank(r - d) : tl_detail::lane()), 32);
  }
  template <class T> auto shfl_xor(T v, unsigned x, int line = __builtin_LINE()) const {
    if (tile_) return tl_emu::shfl_xor_sync(line, mask_, v, (int)x, (int)width_);
    unsigned r = thread_rank() ^ x;
    return tl_emu::shfl_sync(line, mask_, v,
                             (int)(r < size_ ? lane_of_rank(r) : tl_detail::lane()), 32);
  }
  int any(int p, int line = __builtin_LINE()) const {
    return (int)tl_emu::vote(tl_emu::W_ANY, line, mask_, p);
  }
  int all(int p, int line = __builtin_LINE()) const {
    return (int)tl_emu::vote(tl_emu::W_ALL, line, mask_, p);
  }
  unsigned int ballot(int p, int line = __builtin_LINE()) const {
    return local(tl_emu::vote(tl_emu::W_BALLOT, line, mask_, p));
  }
  template <class T> unsigned int match_any(T v, int line = __builtin_LINE()) const {
    return local(tl_emu::match_any(line, mask_, v));
  }
  template <class T> unsigned int match_all(T v, int& pred, int line = __builtin_LINE()) const {
    return local(tl_emu::match_all(line, mask_, v, &pred));
  }
  unsigned int meta_group_rank() const {
    return tile_ ? tl_detail::linear_tid() / width_ : 0;
  }
  unsigned int meta_group_size() const {
    return tile_ ? (tl_detail::block_threads() + width_ - 1) / width_ : 1;
  }
};

template <unsigned N, class Parent = void> class thread_block_tile : public warp_group {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                "the CPU emulator runs thread_block_tile sizes 1, 2, 4, 8, 16 and 32");
  static unsigned tile_mask() {
    unsigned base = tl_detail::lane() & ~(N - 1);
    return (N == 32 ? 0xffffffffu : ((1u << N) - 1u)) << base;
  }

 public:
  thread_block_tile() : warp_group(tile_mask(), N, N, true) {}
  template <class Q> thread_block_tile(const thread_block_tile<N, Q>&) : thread_block_tile() {}
  static constexpr unsigned int num_threads() { return N; }
  static constexpr unsigned int size() { return N; }
  static unsigned int thread_rank() { return tl_detail::lane() & (N - 1); }
};

template <unsigned N, class P> inline thread_block_tile<N, P> tiled_partition(const P&) {
  return thread_block_tile<N, P>();
}
// A partition of n threads (a power of two up to 32) as a generic group.
inline warp_group tiled_partition(const thread_group&, unsigned n) {
  if (n < 1 || n > 32 || (n & (n - 1))) n = 32;
  unsigned base = tl_detail::lane() & ~(n - 1);
  return warp_group((n == 32 ? 0xffffffffu : ((1u << n) - 1u)) << base, n, n, true);
}

class coalesced_group : public warp_group {
 public:
  explicit coalesced_group(unsigned mask)
      : warp_group(mask, (unsigned)__builtin_popcount(mask), 32, false) {}
};
inline coalesced_group coalesced_threads(int site = __builtin_LINE()) {
  return coalesced_group(tl_emu::activemask(tl_detail::kSiteBase + site));
}

template <class G> inline void sync(const G& g, int line = __builtin_LINE()) { g.sync(line); }
template <class G> inline auto thread_rank(const G& g) { return g.thread_rank(); }
template <class G> inline auto num_threads(const G& g) { return g.num_threads(); }
template <class G> inline auto group_size(const G& g) { return g.num_threads(); }

template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return (b < a) ? b : a; } };
template <class T> struct greater { T operator()(T a, T b) const { return (a < b) ? b : a; } };
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

// As CUDA's coalesced_reduce: a butterfly over the group, every thread gets the result.
template <class G, class T, class Op>
inline auto reduce(const G& g, T val, Op op, int line = __builtin_LINE()) {
  auto out = tl_emu::shfl_value(val);
  const unsigned n = g.num_threads();
  if ((n & (n - 1)) == 0) {
    for (unsigned m = n >> 1; m > 0; m >>= 1) out = op(out, g.shfl_xor(out, m, line));
    return out;
  }
  auto scan = inclusive_scan(g, out, op, line);
  return g.shfl(scan, (int)n - 1, line);
}
template <class G, class T, class Op>
inline auto inclusive_scan(const G& g, T val, Op op, int line = __builtin_LINE()) {
  auto out = tl_emu::shfl_value(val);
  const unsigned n = g.num_threads(), r = g.thread_rank();
  for (unsigned m = 1; m < n; m <<= 1) {
    auto t = g.shfl_up(out, m, line);
    if (m <= r) out = op(out, t);
  }
  return out;
}
template <class G, class T> inline auto inclusive_scan(const G& g, T val,
                                                       int line = __builtin_LINE()) {
  using V = decltype(tl_emu::shfl_value(val));
  return inclusive_scan(g, val, plus<V>(), line);
}
template <class G, class T, class Op>
inline auto exclusive_scan(const G& g, T val, Op op, int line = __builtin_LINE()) {
  using V = decltype(tl_emu::shfl_value(val));
  V in = tl_emu::shfl_value(val);
  V res = inclusive_scan(g, in, op, line);
  if constexpr (std::is_integral_v<V> && std::is_same_v<Op, plus<V>>) return (V)(res - in);
  V up = g.shfl_up(res, 1, line);
  return g.thread_rank() == 0 ? V{} : up;
}
template <class G, class T> inline auto exclusive_scan(const G& g, T val,
                                                       int line = __builtin_LINE()) {
  using V = decltype(tl_emu::shfl_value(val));
  return exclusive_scan(g, val, plus<V>(), line);
}

// memcpy_async: the group's threads copy the bytes between them; wait() is the group's
// barrier, after which every thread sees the whole copy (as on a GPU).
template <class G, class T>
inline void memcpy_async(const G& g, T* dst, const T* src, size_t bytes) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  for (size_t i = g.thread_rank(); i < bytes; i += g.num_threads()) d[i] = s[i];
}
// The element-count form: min(dstCount, srcCount) elements of T.
template <class G, class T, class DstCount, class SrcCount,
          std::enable_if_t<std::is_integral_v<DstCount> && std::is_integral_v<SrcCount>, int> = 0>
inline void memcpy_async(const G& g, T* dst, DstCount dst_count, const T* src,
                         SrcCount src_count) {
  const size_t n = (size_t)dst_count < (size_t)src_count ? (size_t)dst_count : (size_t)src_count;
  memcpy_async(g, dst, src, n * sizeof(T));
}
template <class G> inline void wait(const G& g, int line = __builtin_LINE()) { g.sync(line); }
template <unsigned Stages, class G> inline void wait_prior(const G& g,
                                                            int line = __builtin_LINE()) {
  g.sync(line);
}

}  // namespace cooperative_groups
