// tilelab CPU emulator: a misaligned load or store stops the launch, as on a GPU.
//
// A GPU's load or store of an N-byte type (float4: 16, float2 and double: 8, float: 4) needs
// an address that is a multiple of the type's alignment; else the kernel stops with
// "misaligned address". x86 loads and stores at any address, so every build compiles with
// g++'s -fsanitize=alignment: each typed load and store of the kernel first tests its
// address's low bits, and a misaligned one reaches the handler below (in place of UBSan's
// runtime, which is not linked) with its kernel.cu line, its type and the address. Only
// loads and stores by a thread of the kernel are faults (a member access through a
// misaligned float4* reads one float, as nvcc's code does).
#pragma once

namespace tl_emu {

struct UbLocation {
  const char* file;
  uint32_t line, column;
};
struct UbType {
  uint16_t kind, info;
  char name[1];
};
struct UbMismatch {  // UBSan's TypeMismatchData (v1)
  UbLocation loc;
  const UbType* type;
  unsigned char log_alignment, check_kind;  // check_kind 0: a load, 1: a store
};

// Where address `a` lies, for the report: a buffer argument (its number and the byte offset
// from its start), the block's static shared arrays, its dynamic shared memory, or elsewhere
// (a thread's local array, a __device__ variable).
TL_NOSAN inline void space_of(Out& o, uintptr_t a) {
  for (int b = 0; b < g_nbuf; ++b) {
    const Buf& B = g_bufs[b];
    if (a >= (uintptr_t)B.lo && a < (uintptr_t)B.hi) {
      o.f(",\"space\":\"global\",\"buffer\":%d,\"byte_offset\":%lld", b,
          (long long)(a - (uintptr_t)B.data));
      return;
    }
  }
  uintptr_t lo = (uintptr_t)__start_tlshared;
  if (a >= lo && a < lo + static_shared_bytes()) {
    o.f(",\"space\":\"shared\",\"byte_offset\":%lld", (long long)(a - lo));
    return;
  }
  if (g_dyn_shared && a >= (uintptr_t)g_dyn_shared && a < (uintptr_t)g_dyn_guard) {
    o.f(",\"space\":\"dynamic_shared\",\"byte_offset\":%lld",
        (long long)(a - (uintptr_t)g_dyn_shared));
    return;
  }
  o.s(",\"space\":\"other\"");
}

[[noreturn]] TL_NOINLINE void misaligned(const UbMismatch* d, uintptr_t a, uintptr_t pc);
#ifndef TILELAB_SPLIT
[[noreturn]] TL_NOINLINE TL_NOSAN void misaligned(const UbMismatch* d, uintptr_t a,
                                                  uintptr_t pc) {
  Out o{g_fault_buf, 0, sizeof g_fault_buf, true};
  o.f("{\"status\":\"misaligned\",\"access\":\"%s\",\"align\":%u,\"addr\":%lu",
      d->check_kind == 1 ? "write" : "read", 1u << d->log_alignment, (unsigned long)a);
  o.s(",\"type\":");
  o.str(d->type ? d->type->name : "?");
  const char* f = d->loc.file ? d->loc.file : "";
  size_t n = strlen(f);
  if (n >= 9 && !strcmp(f + n - 9, "kernel.cu")) o.f(",\"line\":%u", d->loc.line);
  space_of(o, a);
  where(o);
  pcs(o, pc - 1);
  fatal_logged(o);
}
#endif

}  // namespace tl_emu

#ifndef TILELAB_SPLIT
// The handlers g++'s -fsanitize=alignment calls (declared by g++ itself; recoverable and not).
extern "C" TL_NOSAN void __ubsan_handle_type_mismatch_v1(void* data, void* ptr) {
  auto* d = (const tl_emu::UbMismatch*)data;
  if (d->check_kind > 1 || !tl_emu::g_in_block || !tl_emu::g_cur) return;
  tl_emu::misaligned(d, (uintptr_t)ptr, (uintptr_t)__builtin_return_address(0));
}
extern "C" TL_NOSAN void __ubsan_handle_type_mismatch_v1_abort(void* data, void* ptr) {
  __ubsan_handle_type_mismatch_v1(data, ptr);
}
#endif
