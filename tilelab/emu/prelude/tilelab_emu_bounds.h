// tilelab CPU emulator: index checks on shared arrays, in fast and analysis mode alike.
//
// The translator rewrites `name[` on a static shared array into
// `tl_emu::sh(name, "name", __LINE__)[` (on an extern __shared__ array into
// `tl_emu::shp(...)[`, a check against the launch's shared= bytes); an index outside the array's extent in
// any dimension stops the launch with a report naming the array, dimension and line: a GPU
// would read a neighbouring array or fault.
#pragma once

namespace tl_emu {

// The wrappers' alignment is 1, so that g++'s alignment check (tilelab_emu_align.h) has
// nothing to test of the temporary each `name[i]` makes: else its test of the temporary's
// address kept every temporary in memory, in the innermost loops (a tiled matmul's launch
// took 60 % longer).
#define TL_UNCHECKED __attribute__((packed))

[[noreturn]] TL_NOINLINE inline void shared_oob(const char* name, int line, long long index,
                                                long long extent, int dim) {
  Out o{};
  o.s("{\"status\":\"shared_oob\",\"array\":");
  o.str(name);
  o.f(",\"line\":%d,\"index\":%lld,\"extent\":%lld,\"dim\":%d", line, index, extent, dim);
  where(o);
  fatal(o);
}

template <class A, int R = (int)std::rank_v<A>> struct TL_UNCHECKED Idx {
  using E = std::remove_extent_t<A>;
  A* a;
  const char* name;
  int line;
  template <class I> decltype(auto) operator[](I i) const {
    long long k = (long long)i;
    if (__builtin_expect((unsigned long long)k >= std::extent_v<A>, 0))  // or negative
      shared_oob(name, line, k, (long long)std::extent_v<A>, R - (int)std::rank_v<A> + 1);
    if constexpr (std::is_array_v<E>) return Idx<E, R>{&(*a)[k], name, line};
    else return (*a)[k];
  }
  operator E*() const { return *a; }
};

// `name[i]` of an array of more dimensions than the subscripts written (a row buf[i] of
// float buf[4][32], passed on as a float* or a float (&)[32]): the first N indices checked,
// then the sub-array itself, which converts and deduces as the row of a plain array does.
template <int N, class A, int R = (int)std::rank_v<A>> struct TL_UNCHECKED RowIdx {
  using E = std::remove_extent_t<A>;
  A* a;
  const char* name;
  int line;
  template <class I> decltype(auto) operator[](I i) const {
    long long k = (long long)i;
    if (__builtin_expect((unsigned long long)k >= std::extent_v<A>, 0))  // or negative
      shared_oob(name, line, k, (long long)std::extent_v<A>, R - (int)std::rank_v<A> + 1);
    if constexpr (N > 1) return RowIdx<N - 1, E, R>{&(*a)[k], name, line};
    else return ((*a)[k]);
  }
};

template <class T> struct TL_UNCHECKED PIdx {
  T* p;
  const char* name;
  int line;
  template <class I> T& operator[](I i) const {
    long long k = (long long)i;
    long long off = (long long)((uintptr_t)p - (uintptr_t)g_dyn_shared) + k * (long long)sizeof(T);
    if (off < 0 || off + (long long)sizeof(T) > (long long)g_dyn_request)
      shared_oob(name, line, off / (long long)sizeof(T), (long long)(g_dyn_request / sizeof(T)),
                 0);
    return p[k];
  }
};

template <class A> inline Idx<A> sh(A& a, const char* name, int line) {
  return Idx<A>{&a, name, line};
}
template <int N, class A> inline RowIdx<N, A> shr(A& a, const char* name, int line) {
  return RowIdx<N, A>{&a, name, line};
}
template <class T> inline PIdx<T> shp(T* p, const char* name, int line) {
  return PIdx<T>{p, name, line};
}

}  // namespace tl_emu
