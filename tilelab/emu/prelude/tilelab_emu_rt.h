// tilelab CPU emulator runtime: fibers, the block scheduler, guarded buffers, crash reports.
//
// One launch per (forked) process: Python calls tilelab_launch() once, which maps guarded
// copies of the buffer arguments, runs the grid block by block, and writes a JSON report to
// report_fd (or a fault report from the signal handler, then _exit).
#pragma once

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#define TL_EXPORT extern "C" __attribute__((visibility("default")))
#if defined(__x86_64__) && !defined(TILELAB_UCONTEXT)
#define TL_ASM_SWITCH 1  // our own context switch; ucontext elsewhere (far slower)
#endif
#define TL_NOINLINE __attribute__((noinline))
// runtime code the TSan hooks may run (and that no alignment check slows)
#define TL_NOSAN __attribute__((no_sanitize_thread, no_sanitize("alignment")))

namespace tl_emu {

// ---- kernel descriptors (read by Python through ctypes) ---------------------------------
struct ParamDesc {
  int is_pointer, is_floating, is_signed, size, pointee_size, pointee_align;
};
struct KernelDesc {
  const char* name;
  int nparams;
  const ParamDesc* params;
  const char* const* texts;
  void* fn;
  void (*invoke)(void*, void**);
};

// A file-scope __constant__/__device__ variable (the table follows the learner's code).
struct GlobalDesc {
  const char* name;
  void* addr;
  uint64_t size;
  int constant;
};

template <class P> constexpr int size_or_1() {
  if constexpr (std::is_void_v<P> || std::is_function_v<P>) return 1;
  else return (int)sizeof(P);
}
template <class P> constexpr int align_or_1() {
  if constexpr (std::is_void_v<P> || std::is_function_v<P>) return 1;
  else return (int)alignof(P);
}
template <class T> constexpr ParamDesc describe() {
  using U = std::remove_cv_t<T>;
  using P = std::remove_cv_t<std::remove_pointer_t<U>>;
  return ParamDesc{std::is_pointer_v<U>, std::is_floating_point_v<U>, std::is_signed_v<U>,
                   (int)sizeof(U), size_or_1<P>(), align_or_1<P>()};
}
template <class... A> struct Sig {
  template <size_t... I>
  static void call(void (*f)(A...), void** a, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<A>*>(a[I])...);
  }
  static void invoke(void* f, void** a) {
    call(reinterpret_cast<void (*)(A...)>(f), a, std::index_sequence_for<A...>{});
  }
  static inline const ParamDesc params[sizeof...(A) + 1] = {describe<A>()..., ParamDesc{}};
};
template <class... A>
KernelDesc make_kernel(void (*f)(A...), const char* name, const char* const* texts) {
  return KernelDesc{name, (int)sizeof...(A), Sig<A...>::params, texts,
                    reinterpret_cast<void*>(f), &Sig<A...>::invoke};
}

// ---- a tiny JSON writer (fixed buffers in the signal handler, growable elsewhere) --------
struct Out {
  char* p;
  size_t n, cap;
  bool fixed;
  void put(const char* s, size_t k) {
    if (n + k + 1 > cap) {
      if (fixed) k = cap > n + 1 ? cap - n - 1 : 0;
      else {
        while (n + k + 1 > cap) cap = cap ? cap * 2 : 4096;
        p = (char*)realloc(p, cap);
      }
    }
    memcpy(p + n, s, k);
    n += k;
    p[n] = 0;
  }
  void s(const char* t) { put(t, strlen(t)); }
  void f(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) put(tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
  }
  void str(const char* t) {
    s("\"");
    for (; t && *t; ++t) {
      unsigned char c = (unsigned char)*t;
      if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; put(e, 2); }
      else if (c < 0x20) f("\\u%04x", c);
      else put((const char*)&c, 1);
    }
    s("\"");
  }
  void xyz(uint3 v) { f("[%u,%u,%u]", v.x, v.y, v.z); }
};

// ---- fibers --------------------------------------------------------------------------------
enum : int { F_RUN = 0, F_WAIT = 1, F_EXIT = 2, F_WARP = 3 };
struct Fiber {
  void* sp;
  int state, line, site, pred;
  unsigned linear;
  int wop, warg, wwidth;  // a warp-level operation it waits at (see tilelab_emu_warp.h)
  unsigned wmask;
  uint64_t wval, wres;
  uint3 tid;
  char* guard;  // PROT_NONE region under the stack
  char* top;
#ifndef TL_ASM_SWITCH
  ucontext_t uc;
#endif
};

const size_t kStack = 64 * 1024, kStackGuard = 64 * 1024;
const size_t kStackColors = 4096;  // room for the tops' offsets (a page)
const int kMadvGuardInstall = 102;  // MADV_GUARD_INSTALL, where <sys/mman.h> lacks it
TL_DEF Fiber* g_fibers;
TL_DEF int g_nfib;
TL_DEF Fiber* g_cur;
TL_DEF void* g_sched_sp;
TL_DEF const KernelDesc* g_kernel;
TL_DEF void** g_args;
TL_DEF int g_bar_count, g_bar_total;  // predicate count and threads at the last barrier
TL_DEF int g_report_fd TL_INIT(-1);
TL_DEF char g_report_tag[32];  // this launch's tag, heading the one report line (see report())
TL_DEF bool g_in_block;

[[noreturn]] void fiber_main();

#ifdef TL_ASM_SWITCH
extern "C" __attribute__((visibility("hidden"))) void tl_emu_switch(void** save, void* to);
#ifndef TILELAB_SPLIT
asm(R"(
  .text
  .p2align 4
  .globl tl_emu_switch
  .hidden tl_emu_switch
  .type tl_emu_switch,@function
tl_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tl_emu_switch,.-tl_emu_switch
)");
#endif
inline void fiber_init(Fiber* f) {
  void** sp = (void**)((uintptr_t)f->top & ~(uintptr_t)15);
  *--sp = nullptr;                    // fake return address of fiber_main (keeps alignment)
  *--sp = (void*)&fiber_main;         // popped by tl_emu_switch's ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12-r15
  f->sp = sp;
}
TL_NOSAN inline void to_fiber(Fiber* f) { tl_emu_switch(&g_sched_sp, f->sp); }
TL_NOSAN inline void to_sched(Fiber* f) { tl_emu_switch(&f->sp, g_sched_sp); }
#else
TL_DEF ucontext_t g_sched_uc;
inline void fiber_init(Fiber* f) {
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->guard + kStackGuard;
  f->uc.uc_stack.ss_size = kStack;
  f->uc.uc_link = nullptr;
  makecontext(&f->uc, (void (*)())fiber_main, 0);
}
TL_NOSAN inline void to_fiber(Fiber* f) { swapcontext(&g_sched_uc, &f->uc); }
TL_NOSAN inline void to_sched(Fiber* f) { swapcontext(&f->uc, &g_sched_uc); }
#endif

#ifndef TILELAB_SPLIT
[[noreturn]] void fiber_main() {
  g_kernel->invoke(g_kernel->fn, g_args);
  Fiber* f = g_cur;
  f->state = F_EXIT;
  to_sched(f);
  __builtin_unreachable();
}
#endif

TL_NOINLINE void barrier_wait(int line, int site, int pred);
#ifndef TILELAB_SPLIT
TL_NOINLINE void barrier_wait(int line, int site, int pred) {
  Fiber* f = g_cur;
  f->state = F_WAIT;
  f->line = line;
  f->site = site;
  f->pred = pred;
  to_sched(f);
}
#endif
inline void syncthreads(int line, int site) {
  barrier_wait(line, site, 0);
  asm volatile("" ::: "memory");
}
inline int syncthreads_count(int line, int site, int pred) {
  barrier_wait(line, site, pred != 0);
  asm volatile("" ::: "memory");
  return g_bar_count;
}
inline int syncthreads_and(int line, int site, int pred) {
  barrier_wait(line, site, pred != 0);
  asm volatile("" ::: "memory");
  return g_bar_count == g_bar_total;
}

// ---- shared memory: the static section, the dynamic buffer, registrations ----------------
extern "C" char __start_tlshared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_tlshared[] __attribute__((weak, visibility("hidden")));
TL_DEF unsigned char* g_dyn_shared;  // the launch's dynamic (extern __shared__) buffer
TL_DEF size_t g_dyn_bytes;
TL_DEF char* g_dyn_guard;  // PROT_NONE region right after it
TL_DEF size_t g_dyn_guard_len;
TL_DEF void** g_dyn_ptrs[64];  // file-scope extern __shared__ pointers to point at the buffer
TL_DEF int g_ndyn_ptrs;

inline size_t static_shared_bytes() {
  return __start_tlshared ? (size_t)(__stop_tlshared - __start_tlshared) : 0;
}
inline void poison(void* p, size_t n) {
  static const unsigned char pat[4] = {0xff, 0xff, 0xff, 0x7f};  // 0x7FFFFFFF: NaN, INT_MAX
  unsigned char* b = (unsigned char*)p;
  for (size_t i = 0; i < n; ++i) b[i] = pat[i & 3];
}
inline bool poisoned(const void* p, size_t n, size_t phase) {
  static const unsigned char pat[4] = {0xff, 0xff, 0xff, 0x7f};
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != pat[(i + phase) & 3]) return false;
  return true;
}

TL_DEF size_t g_dyn_request;  // bytes asked for with shared=

// Analysis mode records each shared array's name and shape; returns its id (-1 otherwise).
int register_array(const char* name, const void* base, size_t bytes, size_t elem, int rank,
                   const long* dims, bool dynamic);

// Registers a file- or function-scope `extern __shared__ T name[]` (now a T* variable).
struct DynReg {
  int id;
  template <class T> DynReg(T*& p, const char* name) {
    p = (T*)g_dyn_shared;
    if (g_ndyn_ptrs < 64) g_dyn_ptrs[g_ndyn_ptrs++] = (void**)&p;
    long none = 0;
    id = register_array(name, g_dyn_shared, 0, sizeof(T), 1, &none, true);
  }
};

// ---- reports ------------------------------------------------------------------------------
inline void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    p += k;
    n -= (size_t)k;
  }
}
// The one report line: the launch's tag, a space, the JSON object, a newline. The parent
// takes nothing else on the pipe (a line a kernel wrote there lacks the tag or adds a line).
inline void report(const Out& o) {
  char sep[1] = {' '};
  write_all(g_report_fd, g_report_tag, strlen(g_report_tag));
  write_all(g_report_fd, sep, 1);
  write_all(g_report_fd, o.p, o.n);
  if (o.n == 0 || o.p[o.n - 1] != '\n') write_all(g_report_fd, "\n", 1);
}
inline void where(Out& o) {
  o.s(",\"block\":");
  o.xyz(blockIdx);
  if (g_cur) {
    o.s(",\"thread\":");
    o.xyz(g_cur->tid);
  }
}
[[noreturn]] inline void fatal(Out& o) {
  o.s("}\n");
  report(o);
  fflush(stdout);
  _exit(3);
}
[[noreturn]] inline void assert_fail(const char* expr, int line) {
  Out o{};
  o.s("{\"status\":\"assert\",\"expr\":");
  o.str(expr);
  o.f(",\"line\":%d", line);
  where(o);
  fatal(o);
}
[[noreturn]] inline void trap(int line) {
  Out o{};
  o.f("{\"status\":\"trap\",\"line\":%d", line);
  where(o);
  fatal(o);
}

// ---- guarded buffers -----------------------------------------------------------------------
struct BufSpec {
  void* shared;  // parent's MAP_SHARED copy: read before, written back after
  uint64_t nbytes, elem, align;
};
struct LaunchSpec {
  int32_t nbuf, report_fd;
  void** args;
  BufSpec* bufs;
  int32_t* arg_buf;  // buffer index per parameter, -1 for scalars
  uint64_t* arg_off;  // byte offset into that buffer
  uint32_t grid[3], block[3];
  uint64_t dyn_shared;
  int32_t nglobals;
  int32_t* global_buf;  // the buffer carrying each global's bytes in and out (-1: none)
  char report_tag[32];  // heads the report line (NUL-terminated)
};
struct Buf {
  char *map, *lo, *data, *hi;  // [map,lo) guard | [lo,data) slack | data | [.,hi) tail | guard
  size_t map_len, n, elem;
};
const size_t kGuardBefore = 64 * 1024, kGuardAfter = 1024 * 1024, kAllocAlign = 16;
TL_DEF Buf* g_bufs;
TL_DEF int g_nbuf;
TL_DEF size_t g_page;

inline size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
inline void* map_guarded(size_t before, size_t body, size_t after, char** rw) {
  char* m = (char*)mmap(nullptr, before + body + after, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  if (body && mprotect(m + before, body, PROT_READ | PROT_WRITE) != 0) return nullptr;
  *rw = m + before;
  return m;
}

// ---- the fault handler -----------------------------------------------------------------------
TL_DEF char g_fault_buf[16384];
// What the analysis adds to a fault's report (the traced block's log), when it asks to.
TL_DEF void (*g_fault_extra)(Out& o);

// A fault's report, and the traced block's log after it where the analysis asked for one.
[[noreturn]] inline void fatal_logged(Out& o) {
  if (g_fault_extra) {  // the process ends here: a growing buffer is safe enough
    Out d{};
    d.put(o.p, o.n);
    g_fault_extra(d);
    fatal(d);
  }
  fatal(o);
}
TL_DEF long g_first_block_plus1;  // a block the analysis runs first (its index + 1), or 0
TL_DEF uintptr_t g_self_base;

inline const char* signame(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGTRAP: return "SIGTRAP";
    default: return "signal";
  }
}
inline void pcs(Out& o, uintptr_t pc) {
  o.s(",\"pcs\":[");
  bool first = true;
  Dl_info info;
  if (pc && dladdr((void*)pc, &info) && (uintptr_t)info.dli_fbase == g_self_base) {
    o.f("%lu", (unsigned long)(pc - g_self_base));
    first = false;
  }
  void* frames[32];
  int k = backtrace(frames, 32);
  for (int i = 0; i < k; ++i) {
    uintptr_t a = (uintptr_t)frames[i];
    if (a == pc || !dladdr((void*)a, &info) || (uintptr_t)info.dli_fbase != g_self_base)
      continue;
    o.f("%s%lu", first ? "" : ",", (unsigned long)(a - 1 - g_self_base));
    first = false;
  }
  o.s("]");
}
void on_fault(int sig, siginfo_t* si, void* ctx);
#ifndef TILELAB_SPLIT
void on_fault(int sig, siginfo_t* si, void* ctx) {
  Out o{g_fault_buf, 0, sizeof g_fault_buf, true};
  uintptr_t addr = (uintptr_t)si->si_addr, pc = 0, sp = 0;
  int write_access = -1;
#if defined(__x86_64__)
  ucontext_t* uc = (ucontext_t*)ctx;
  pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  if (sig == SIGSEGV) write_access = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)ctx;
#endif
  if (sig == SIGSYS) {  // the grid's seccomp filter trapped a system call
    o.f("{\"status\":\"syscall\",\"nr\":%d", si->si_syscall);
    where(o);
    fatal(o);
  }
  o.f("{\"status\":\"fault\",\"signal\":\"%s\",\"code\":%d,\"addr\":%lu", signame(sig),
      si->si_code, (unsigned long)addr);
  if (write_access >= 0) o.f(",\"access\":\"%s\"", write_access ? "write" : "read");
  const char* kind = "other";
  if (sig == SIGSEGV || sig == SIGBUS) {
    for (int b = 0; b < g_nbuf; ++b) {
      Buf& B = g_bufs[b];
      if (addr < (uintptr_t)B.map || addr >= (uintptr_t)B.map + B.map_len) continue;
      kind = "global";
      long long off = (long long)(addr - (uintptr_t)B.data);
      long long idx = off >= 0 ? off / (long long)B.elem
                               : -((-off + (long long)B.elem - 1) / (long long)B.elem);
      o.f(",\"buffer\":%d,\"index\":%lld,\"byte_offset\":%lld", b, idx, off);
    }
    if (g_dyn_guard && addr >= (uintptr_t)g_dyn_guard &&
        addr < (uintptr_t)g_dyn_guard + g_dyn_guard_len) {
      kind = "dynamic_shared";
      o.f(",\"byte_offset\":%lld,\"dyn_bytes\":%lu",
          (long long)(addr - (uintptr_t)g_dyn_shared), (unsigned long)g_dyn_bytes);
    }
    for (int i = 0; i < g_nfib; ++i) {
      Fiber& F = g_fibers[i];
      if (addr >= (uintptr_t)F.guard && addr < (uintptr_t)F.guard + kStackGuard) {
        kind = "stack";
        o.s(",\"stack_of\":");
        o.xyz(F.tid);
      }
    }
    if (g_cur && sp && sp < (uintptr_t)g_cur->guard + kStackGuard) {  // below its stack
      kind = "stack";
      o.s(",\"stack_of\":");
      o.xyz(g_cur->tid);
    }
    if (!strcmp(kind, "other") && addr < 65536 && si->si_code != SI_KERNEL) kind = "null";
  }
  o.f(",\"kind\":\"%s\",\"in_block\":%s", kind, g_in_block ? "true" : "false");
  where(o);
  pcs(o, pc);
  fatal_logged(o);
}
#endif
// ---- integer division as a GPU divides ----------------------------------------------------
// x86's div and idiv trap on a zero divisor and on INT_MIN / -1; a GPU's division (PTX
// div and rem, and nvcc's 64-bit routine) never faults. x / 0 and x % 0 give all ones
// (32 bits: 0xffffffff; 64 bits: 0xffffffff where dividend and divisor both fit in 32 bits,
// which nvcc's 64-bit division does in 32-bit arithmetic, else all 64 ones), and
// INT_MIN / -1 gives INT_MIN, INT_MIN % -1 gives 0, as measured on an H200. The SIGFPE
// handler decodes the faulting div or idiv, writes the GPU's quotient and remainder and
// steps over it; anything else is reported as a fault.
#if defined(__x86_64__)
TL_NOSAN inline greg_t* x86_reg(ucontext_t* uc, int n) {
  static const int map[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP,
                              REG_RSI, REG_RDI, REG_R8,  REG_R9,  REG_R10, REG_R11,
                              REG_R12, REG_R13, REG_R14, REG_R15};
  return &uc->uc_mcontext.gregs[map[n & 15]];
}
// Emulates the div/idiv at the context's RIP; false where it is not one.
TL_NOSAN inline bool gpu_divide(ucontext_t* uc) {
  const unsigned char* ip = (const unsigned char*)uc->uc_mcontext.gregs[REG_RIP];
  const unsigned char* p = ip;
  bool opsize = false;
  unsigned rex = 0;
  for (int k = 0; k < 8; ++k, ++p) {
    unsigned char b = *p;
    if (b == 0x66) opsize = true;
    else if (b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x2E || b == 0x36 || b == 0x3E ||
             b == 0x26 || b == 0x64 || b == 0x65) continue;
    else break;
  }
  if ((*p & 0xF0) == 0x40) rex = *p++;
  unsigned char op = *p++;
  if (op != 0xF6 && op != 0xF7) return false;
  unsigned char modrm = *p++;
  unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
  if (reg != 6 && reg != 7) return false;
  bool is_signed = reg == 7;
  int bits = op == 0xF6 ? 8 : (rex & 8) ? 64 : opsize ? 16 : 32;
  unsigned long long divisor;
  if (mod == 3) {
    unsigned n = rm | ((rex & 1) << 3);
    unsigned long long v = (unsigned long long)*x86_reg(uc, n);
    if (bits == 8 && !rex && rm >= 4) v = (unsigned long long)*x86_reg(uc, rm - 4) >> 8;
    divisor = v;
  } else {
    long long addr = 0;
    if (rm == 4) {  // SIB
      unsigned char sib = *p++;
      unsigned scale = sib >> 6, index = ((sib >> 3) & 7) | ((rex & 2) << 2),
               base = (sib & 7) | ((rex & 1) << 3);
      if (index != 4) addr += (long long)*x86_reg(uc, index) << scale;
      if ((sib & 7) == 5 && mod == 0) {
        int d;
        memcpy(&d, p, 4);
        p += 4;
        addr += d;
      } else {
        addr += (long long)*x86_reg(uc, base);
      }
    } else if (rm == 5 && mod == 0) {  // RIP-relative: from the next instruction
      int d;
      memcpy(&d, p, 4);
      p += 4;
      addr = (long long)(uintptr_t)p + d;
    } else {
      addr = (long long)*x86_reg(uc, rm | ((rex & 1) << 3));
    }
    if (mod == 1) {
      addr += (signed char)*p++;
    } else if (mod == 2) {
      int d;
      memcpy(&d, p, 4);
      p += 4;
      addr += d;
    }
    divisor = 0;
    memcpy(&divisor, (const void*)(uintptr_t)addr, (size_t)(bits / 8));
  }
  unsigned long long mask = bits == 64 ? ~0ULL : (1ULL << bits) - 1;
  divisor &= mask;
  greg_t* rax = x86_reg(uc, 0);
  greg_t* rdx = x86_reg(uc, 2);
  unsigned long long low = (unsigned long long)*rax & (bits == 8 ? 0xFFULL : mask);
  unsigned long long sign = 1ULL << (bits - 1);
  unsigned long long q, r;
  if (divisor == 0) {
    q = r = mask;
    if (bits == 64 && low <= 0xFFFFFFFFULL) q = r = 0xFFFFFFFFULL;
  } else if (is_signed && divisor == mask && low == sign) {  // INT_MIN / -1
    q = sign;
    r = 0;
  } else {
    return false;  // an unsigned quotient that does not fit: not C's division
  }
  if (bits == 64) {
    *rax = (greg_t)q;
    *rdx = (greg_t)r;
  } else if (bits == 32) {
    *rax = (greg_t)(q & mask);
    *rdx = (greg_t)(r & mask);
  } else if (bits == 16) {
    *rax = (greg_t)(((unsigned long long)*rax & ~0xFFFFULL) | q);
    *rdx = (greg_t)(((unsigned long long)*rdx & ~0xFFFFULL) | r);
  } else {
    *rax = (greg_t)(((unsigned long long)*rax & ~0xFFFFULL) | (r << 8) | q);
  }
  uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)p;
  return true;
}
#endif
void on_divide(int sig, siginfo_t* si, void* ctx);
#ifndef TILELAB_SPLIT
TL_NOSAN void on_divide(int sig, siginfo_t* si, void* ctx) {
#if defined(__x86_64__)
  if ((si->si_code == FPE_INTDIV || si->si_code == FPE_INTOVF) &&
      gpu_divide((ucontext_t*)ctx))
    return;
#endif
  on_fault(sig, si, ctx);
}
#endif
inline void install_handlers() {
  static char alt[128 * 1024];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) sigaction(s, &sa, nullptr);
  sa.sa_sigaction = on_divide;  // stays installed: every thread may divide by zero
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGFPE, &sa, nullptr);
  void* warm[2];
  backtrace(warm, 2);  // loads libgcc now, not inside the handler
  Dl_info info;
  if (dladdr((void*)&install_handlers, &info)) g_self_base = (uintptr_t)info.dli_fbase;
}

// ---- analysis hooks (no-ops unless TILELAB_ANALYSIS) ------------------------------------------
#ifdef TILELAB_ANALYSIS
void an_launch();
void an_block_begin();
void an_fiber_begin(Fiber* f);
void an_epoch_end();
void an_pass_end();
void an_write(Out& o);
#else
inline void an_launch() {}
inline void an_block_begin() {}
inline void an_fiber_begin(Fiber*) {}
inline void an_epoch_end() {}
inline void an_pass_end() {}
inline void an_write(Out&) {}
#ifndef TILELAB_SPLIT
int register_array(const char*, const void*, size_t, size_t, int, const long*, bool) {
  return -1;
}
#endif
#endif

// ---- the block scheduler ---------------------------------------------------------------------
bool resolve_warps();             // tilelab_emu_warp.h: release the warps met at a warp op
[[noreturn]] void warp_deadlock();
TL_DEF unsigned g_block_serial;          // blocks run so far: picks the first epoch's thread order

[[noreturn]] inline void divergence(bool exited) {
  Out o{};
  o.f("{\"status\":\"barrier\",\"exited\":%d,\"waits\":[", exited ? 1 : 0);
  int sites[8], counts[8], firsts[8], nl = 0, nexit = 0, exit_first = -1;
  for (int i = 0; i < g_nfib; ++i) {
    Fiber& F = g_fibers[i];
    if (F.state == F_EXIT) {
      if (exit_first < 0) exit_first = i;
      ++nexit;
      continue;
    }
    int j = 0;
    while (j < nl && sites[j] != F.site) ++j;
    if (j == nl) {
      if (nl == 8) continue;
      sites[nl] = F.site, counts[nl] = 0, firsts[nl] = i, ++nl;
    }
    ++counts[j];
  }
  for (int j = 0; j < nl; ++j) {
    o.f("%s{\"line\":%d,\"count\":%d,\"example\":", j ? "," : "", g_fibers[firsts[j]].line,
        counts[j]);
    o.xyz(g_fibers[firsts[j]].tid);
    o.s("}");
  }
  o.f("],\"n_exited\":%d", nexit);
  if (exit_first >= 0) {
    o.s(",\"exited_example\":");
    o.xyz(g_fibers[exit_first].tid);
  }
  g_cur = nullptr;
  where(o);
  fatal(o);
}

inline void run_block(uint3 b) {
  blockIdx = b;
  if (size_t n = static_shared_bytes()) poison(__start_tlshared, n);
  if (g_dyn_bytes) poison(g_dyn_shared, g_dyn_bytes);
  an_block_begin();
  const int n = g_nfib;
  for (int i = 0; i < n; ++i) {
    g_fibers[i].state = F_RUN;
    fiber_init(&g_fibers[i]);
  }
  g_in_block = true;
  // Threads run in turn, first in order, then in an order that flips at every pass, except
  // that odd blocks keep the first order for one more pass: a missing barrier shows
  // whichever way the data flows. A pass resumes each runnable thread once: to its next
  // barrier, warp-level operation, lockstep point (a volatile access) or exit.
  const bool odd = (g_block_serial++ & 1) != 0;
  bool forward = true;
  for (int pass = 1;; ++pass, forward = pass == 2 && odd ? forward : !forward) {
    bool ran = false;
    for (int j = 0; j < n; ++j) {
      Fiber* f = &g_fibers[forward ? j : n - 1 - j];
      if (f->state != F_RUN) continue;
      g_cur = f;
      threadIdx = f->tid;
      an_fiber_begin(f);
      to_fiber(f);
      ran = true;
    }
    g_cur = nullptr;
    an_pass_end();
    if (resolve_warps() || ran) {
      bool runnable = false;
      for (int i = 0; i < n && !runnable; ++i) runnable = g_fibers[i].state == F_RUN;
      if (runnable) continue;
    }
    int waiting = 0, exited = 0, site = -1, count = 0;
    bool same = true;
    for (int i = 0; i < n; ++i) {
      Fiber& F = g_fibers[i];
      if (F.state == F_EXIT) {
        ++exited;
        continue;
      }
      if (F.state == F_WARP) warp_deadlock();
      if (waiting++ == 0) site = F.site;
      same = same && F.site == site;
      count += F.pred;
    }
    if (waiting == 0) break;
    if (exited) divergence(true);
    if (!same) divergence(false);
    an_epoch_end();
    g_bar_count = count, g_bar_total = waiting;
    for (int i = 0; i < n; ++i) g_fibers[i].state = F_RUN;
  }
  an_epoch_end();
  g_in_block = false;
}

inline bool check_slack(int b, Out& o) {
  Buf& B = g_bufs[b];
  size_t phase = 0;
  for (char* p = B.lo; p < B.data; ++p, ++phase)
    if (!poisoned(p, 1, phase)) {
      long long off = (long long)(p - B.data);
      o.f("{\"status\":\"fault\",\"kind\":\"canary\",\"access\":\"write\",\"buffer\":%d,"
          "\"index\":%lld,\"byte_offset\":%lld",
          b, -((-off + (long long)B.elem - 1) / (long long)B.elem), off);
      return false;
    }
  char* end = B.data + B.n;
  phase = (size_t)(end - B.lo);
  for (char* p = end; p < B.hi; ++p, ++phase)
    if (!poisoned(p, 1, phase)) {
      long long off = (long long)(p - B.data);
      o.f("{\"status\":\"fault\",\"kind\":\"canary\",\"access\":\"write\",\"buffer\":%d,"
          "\"index\":%lld,\"byte_offset\":%lld",
          b, off / (long long)B.elem, off);
      return false;
    }
  return true;
}

// Blocks run in a varied order, as on a GPU, where no order between blocks is promised: block
// number (start + i * step) mod n, step coprime with n, both drawn afresh for each launch, so
// a kernel where one block waits for another's global writes fails as it would on a GPU.
inline uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) { uint64_t t = a % b; a = b; b = t; }
  return a;
}
inline uint64_t order_seed() {  // before the system-call filter: it calls getpid
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t seed = (uint64_t)now.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
  return seed ^ (seed >> 29);
}
inline void run_grid(uint64_t seed) {
  const uint64_t gx = gridDim.x, gy = gridDim.y, n = gx * gy * gridDim.z;
  uint64_t start = n ? seed % n : 0, step = n > 1 ? 1 + (seed >> 17) % (n - 1) : 1;
  if (g_first_block_plus1 > 0 && (uint64_t)g_first_block_plus1 <= n)
    start = (uint64_t)g_first_block_plus1 - 1;  // a traced block runs first
  while (gcd(step, n) != 1) ++step;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t b = (uint64_t)(((unsigned __int128)i * step + start) % n);
    run_block(uint3{(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / (gx * gy))});
  }
}

[[noreturn]] inline void setup_error(const char* what) {
  Out o{};
  o.s("{\"status\":\"error\",\"message\":");
  o.str(what);
  fatal(o);
}

}  // namespace tl_emu

extern "C" const tl_emu::GlobalDesc tilelab_globals[];
extern "C" const int tilelab_nglobals;

#ifndef TILELAB_SPLIT
TL_EXPORT uint64_t tilelab_static_shared_bytes() { return tl_emu::static_shared_bytes(); }
#endif

// A seccomp filter (struct sock_fprog*) the Python side sets before the launch; installed
// after the set-up, just before the first block, so the learner's code runs under it.
TL_EXPORT const void* tilelab_grid_filter TL_INIT(nullptr);

namespace tl_emu {
inline void enter_grid_filter() {
  if (!tilelab_grid_filter) return;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, tilelab_grid_filter, 0, 0) != 0)
    setup_error("could not install the system-call filter (seccomp)");
}
}  // namespace tl_emu

#ifndef TILELAB_SPLIT
TL_EXPORT int tilelab_launch(const tl_emu::LaunchSpec* s, const tl_emu::KernelDesc* kernel) {
  using namespace tl_emu;
  g_report_fd = s->report_fd;
  memcpy(g_report_tag, s->report_tag, sizeof g_report_tag - 1);  // the last byte stays 0
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  install_handlers();
  g_kernel = kernel;
  g_args = s->args;
  // Guarded copies of the buffer arguments: the data ends where a PROT_NONE region begins.
  g_nbuf = s->nbuf;
  g_bufs = (Buf*)calloc(g_nbuf ? g_nbuf : 1, sizeof(Buf));
  for (int b = 0; b < g_nbuf; ++b) {
    const BufSpec& S = s->bufs[b];
    Buf& B = g_bufs[b];
    // Every access a GPU allows by alignment works (cudaMalloc aligns to 256 bytes; no CUDA
    // vector type needs more than 16), and the data ends at most 12 bytes before the guard
    // region, so an index past the end still faults (a write into those bytes is caught as
    // a changed canary after the launch).
    size_t align = S.align > kAllocAlign ? S.align : kAllocAlign;
    size_t body = round_up(S.nbytes + align, g_page);
    B.map = (char*)map_guarded(kGuardBefore, body, kGuardAfter, &B.lo);
    if (!B.map) setup_error("could not map a guarded buffer (out of memory?)");
    B.map_len = kGuardBefore + body + kGuardAfter;
    B.hi = B.lo + body;
    B.data = (char*)((uintptr_t)(B.hi - S.nbytes) & ~(uintptr_t)(align - 1));
    B.n = S.nbytes;
    B.elem = S.elem ? S.elem : 1;
    poison(B.lo, body);
    memcpy(B.data, S.shared, S.nbytes);
  }
  for (int i = 0; i < kernel->nparams; ++i)
    if (s->arg_buf[i] >= 0) *(void**)s->args[i] = g_bufs[s->arg_buf[i]].data + s->arg_off[i];
  // The module's __constant__/__device__ variables hold what the host and earlier launches
  // left in them.
  for (int g = 0; g < s->nglobals && g < tilelab_nglobals; ++g)
    if (s->global_buf[g] >= 0)
      memcpy(tilelab_globals[g].addr, g_bufs[s->global_buf[g]].data, tilelab_globals[g].size);
  // Dynamic shared memory, ending at a guard region too.
  g_dyn_request = s->dyn_shared;
  g_dyn_bytes = round_up(s->dyn_shared, 4);
  {
    size_t body = round_up(g_dyn_bytes + 16, g_page);
    char* lo;
    char* m = (char*)map_guarded(g_page, body, 64 * 1024, &lo);
    if (!m) setup_error("could not map dynamic shared memory");
    g_dyn_guard = lo + body;
    g_dyn_guard_len = 64 * 1024;
    g_dyn_shared = (unsigned char*)(g_dyn_guard - round_up(g_dyn_bytes, 16));
    for (int i = 0; i < g_ndyn_ptrs; ++i) *g_dyn_ptrs[i] = g_dyn_shared;
  }
  // One stack per thread of a block, each above a PROT_NONE guard region.
  blockDim = dim3(s->block[0], s->block[1], s->block[2]);
  gridDim = dim3(s->grid[0], s->grid[1], s->grid[2]);
  g_nfib = (int)(blockDim.x * blockDim.y * blockDim.z);
  g_fibers = (Fiber*)calloc(g_nfib, sizeof(Fiber));
  // A page more than the stack and its guard (stacks one 132 KiB apart), and each stack's
  // top a different 64 bytes into that page: without both, every thread's top of stack
  // fell in the same cache sets, and each switch between threads missed the caches. Each
  // thread still has at least kStack below its top.
  size_t slot = kStack + kStackGuard + kStackColors;
  char* stacks = (char*)mmap(nullptr, slot * g_nfib, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) setup_error("could not map thread stacks");
  for (int i = 0; i < g_nfib; ++i) {
    Fiber& F = g_fibers[i];
    F.guard = stacks + slot * i;
    // A guard region as page-table markers (Linux 6.13 on): no mapping of its own, where a
    // PROT_NONE one per thread took about 10 ms a launch of 1024 threads; else PROT_NONE.
    if (madvise(F.guard, kStackGuard, kMadvGuardInstall) != 0)
      mprotect(F.guard, kStackGuard, PROT_NONE);
    F.top = F.guard + slot - (i % (kStackColors / 64)) * 64;
    F.linear = (unsigned)i;
    F.tid = uint3{i % blockDim.x, (i / blockDim.x) % blockDim.y, i / (blockDim.x * blockDim.y)};
  }
  setvbuf(stdout, nullptr, _IOFBF, 1 << 16);
  an_launch();
  const uint64_t seed = order_seed();
  enter_grid_filter();
  enter_float_mode();
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_grid(seed);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fflush(stdout);
  Out o{};
  for (int b = 0; b < g_nbuf; ++b)
    if (!check_slack(b, o)) {
      if (g_fault_extra) g_fault_extra(o);
      o.s("}");
      report(o);
      if (tilelab_grid_filter) _exit(0);  // nothing but exit is left to do under the filter
      return 1;
    }
  for (int g = 0; g < s->nglobals && g < tilelab_nglobals; ++g)
    if (s->global_buf[g] >= 0)
      memcpy(g_bufs[s->global_buf[g]].data, tilelab_globals[g].addr, tilelab_globals[g].size);
  for (int b = 0; b < g_nbuf; ++b) memcpy(s->bufs[b].shared, g_bufs[b].data, g_bufs[b].n);
  o.f("{\"status\":\"ok\",\"kernel_seconds\":%.9f",
      (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  an_write(o);
  o.s("}\n");
  report(o);
  if (tilelab_grid_filter) _exit(0);
  return 0;
}
#endif
