// tilelab CPU emulator: every memory access of the kernel, seen through g++'s ThreadSanitizer
// instrumentation (-fsanitize=thread) with these hooks in place of the TSan runtime.
//
// Built so (TILELAB_TSAN) in analysis mode, where each access to shared memory, whatever its
// width and however its address was computed (pointers, reinterpret_cast, swapped buffers,
// helpers), is recorded for the race and bank analysis; and for kernels that use `volatile`,
// where a volatile access is a lockstep point: the lanes of a warp take it in turn, as the
// warp-synchronous code written for pre-Volta GPUs expects (and an H100 still computes when
// the warp is converged).
#pragma once

namespace tl_emu {

#ifndef TILELAB_ANALYSIS  // else tilelab_emu_analysis.h defines it
inline void an_access(uintptr_t, unsigned, int, uintptr_t) {}
#endif

}  // namespace tl_emu

#ifndef TILELAB_SPLIT
// Hidden (no PLT) and never instrumented themselves.
#define TL_HOOK extern "C" __attribute__((visibility("hidden"), no_sanitize_thread))
#define TL_PC ((uintptr_t)__builtin_return_address(0))
#define TL_HOOKS(N)                                                                      \
  TL_HOOK void __tsan_read##N(void* p) { tl_emu::an_access((uintptr_t)p, N, 1, TL_PC); } \
  TL_HOOK void __tsan_write##N(void* p) { tl_emu::an_access((uintptr_t)p, N, 2, TL_PC); } \
  TL_HOOK void __tsan_unaligned_read##N(void* p) {                                       \
    tl_emu::an_access((uintptr_t)p, N, 1, TL_PC);                                        \
  }                                                                                      \
  TL_HOOK void __tsan_unaligned_write##N(void* p) {                                    \
    tl_emu::an_access((uintptr_t)p, N, 2, TL_PC);                                        \
  }                                                                                      \
  TL_HOOK void __tsan_volatile_read##N(void* p) {                                      \
    tl_emu::lockstep_point();                                                            \
    tl_emu::an_access((uintptr_t)p, N, 1, TL_PC);                                        \
  }                                                                                      \
  TL_HOOK void __tsan_volatile_write##N(void* p) {                                     \
    tl_emu::lockstep_point();                                                            \
    tl_emu::an_access((uintptr_t)p, N, 2, TL_PC);                                        \
  }
TL_HOOKS(1)
TL_HOOKS(2)
TL_HOOKS(4)
TL_HOOKS(8)
TL_HOOKS(16)
#undef TL_HOOKS
TL_HOOK void __tsan_read_range(void* p, unsigned long n) {
  tl_emu::an_access((uintptr_t)p, (unsigned)n, 1, TL_PC);
}
TL_HOOK void __tsan_write_range(void* p, unsigned long n) {
  tl_emu::an_access((uintptr_t)p, (unsigned)n, 2, TL_PC);
}
TL_HOOK void __tsan_init() {}
TL_HOOK void __tsan_func_entry(void*) {}
TL_HOOK void __tsan_func_exit() {}
TL_HOOK void __tsan_vptr_update(void**, void*) {}
TL_HOOK void __tsan_vptr_read(void**) {}
#endif
