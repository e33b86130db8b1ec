// tilelab CPU emulator, analysis mode: what one block's threads touched (for a picture).
//
// For one block of the launch (the second, or the only one), every element of a pointer
// parameter's buffer that its threads read or wrote, with the barrier phases in which they
// did (bit p of a mask: between the p-th and the (p+1)-th __syncthreads, p < 63); and, for
// each shared-memory access of that block's code, the word each lane of its first warp-wide
// request touched (the 32 lanes over the 32 banks). Plain data for tilelab.grading.touch;
// nothing here changes what the kernel computes or what the other analyses report.
// Included by tilelab_emu_traffic.h inside namespace tl_emu.
#pragma once

struct TouchMap {
  uint64_t* mask;  // per 4-byte element of the buffer
  long n;
};
TL_DEF TouchMap g_touch[64][2];  // [parameter][read, write]
TL_DEF bool g_touch_on;          // inside the traced block
TL_DEF long g_touch_target;      // its linear block index
TL_DEF int g_touch_phase;
TL_DEF uint3 g_touch_block;
struct TouchWarp {
  uint64_t key;
  long long word[32];  // -1: lane inactive
};
TL_DEF TouchWarp g_touch_warps[64];
TL_DEF int g_ntouch_warps;

// A per-thread log of the traced block's global accesses, on request only: the Python side
// sets tilelab_trace_block to the linear index of the block to trace before the launch
// (-1: no log, the block above traced). One record per access: the thread (its linear
// index in the block), the code address, the parameter, read or write, and the element
// (in 4-byte words from the parameter's pointer). For tilelab.grading.index_diff, which
// sets a learner's threads against the reference's.
#ifdef TILELAB_SPLIT
extern "C" long tilelab_trace_block;
#else
extern "C" __attribute__((visibility("default"))) long tilelab_trace_block = -1;
#endif
struct TraceRec {
  uint32_t thread, pc;
  int32_t param, kind;
  int64_t elem;
  int64_t block;  // the block's linear index: an access outside its buffer is logged
                  // from any block (and is then the first of its kind to look at)
};
enum : uintptr_t { TL_TRACE_SLACK = 1u << 20 };  // bytes either side of a buffer
TL_NOSAN void trace_write(Out& o);
enum : long { TL_TRACE_CAP = 1L << 17 };
TL_DEF TraceRec* g_trace;
TL_DEF long g_ntrace, g_trace_dropped;

TL_NOSAN inline void touch_launch() {
  long blocks = (long)gridDim.x * gridDim.y * gridDim.z;
  g_touch_target = blocks > 1 ? 1 : 0;
  if (tilelab_trace_block >= 0 && tilelab_trace_block < blocks) {
    g_touch_target = tilelab_trace_block;
    if (!g_trace) g_trace = (TraceRec*)calloc(TL_TRACE_CAP, sizeof(TraceRec));
    if (g_trace) g_fault_extra = trace_write;
    g_first_block_plus1 = tilelab_trace_block + 1;  // its log is whole up to any fault
  }
  g_ntrace = g_trace_dropped = 0;
  g_touch_on = false;
  g_ntouch_warps = 0;
}

TL_NOSAN inline void touch_block_begin() {
  long linear = blockIdx.x + (long)gridDim.x * (blockIdx.y + (long)gridDim.y * blockIdx.z);
  g_touch_on = linear == g_touch_target;
  if (g_touch_on) g_touch_phase = 0, g_touch_block = blockIdx;
}

TL_NOSAN inline void touch_epoch_end() {
  if (g_touch_on && g_touch_phase < 63) ++g_touch_phase;
}

// A global access of the traced block: `lo` is the start of the buffer holding `a`.
TL_NOSAN inline void touch_global(int param, uintptr_t lo, uintptr_t hi, uintptr_t a,
                                  unsigned size, int kind) {
  if (!g_touch_on || param < 0 || param >= 64) return;
  for (int w = 0; w < 2; ++w) {
    if (!(kind & (w ? K_W : K_R))) continue;
    TouchMap& m = g_touch[param][w];
    if (!m.mask) {
      m.n = (long)((hi - lo) / 4);
      m.mask = (uint64_t*)calloc(m.n + 1, sizeof(uint64_t));
      if (!m.mask) return;
    }
    for (uintptr_t e = (a - lo) / 4; e <= (a + size - 1 - lo) / 4 && (long)e < m.n; ++e)
      m.mask[e] |= 1ull << g_touch_phase;
  }
}

// One access of the traced block to the log (when a log was asked for); ``any``: an
// access outside every buffer, logged from whichever block made it.
TL_NOSAN inline void trace_global(int param, uintptr_t ptr, uintptr_t a, uint32_t pc,
                                  unsigned thread, int kind, bool any = false) {
  if (!g_trace || !(g_touch_on || any)) return;
  if (g_ntrace == TL_TRACE_CAP) {
    ++g_trace_dropped;
    return;
  }
  intptr_t off = (intptr_t)a - (intptr_t)ptr;
  long linear = blockIdx.x + (long)gridDim.x * (blockIdx.y + (long)gridDim.y * blockIdx.z);
  g_trace[g_ntrace++] = TraceRec{thread, pc, param, kind,
                                 (int64_t)(off >= 0 ? off / 4 : -((-off + 3) / 4)), linear};
}

// A shared-memory warp request of the traced block (called as its warp is finished).
TL_NOSAN inline void touch_shared(const Group& g, uintptr_t base) {
  if (!g_touch_on) return;
  for (int i = 0; i < g_ntouch_warps; ++i)
    if (g_touch_warps[i].key == g.key) return;
  if (g_ntouch_warps == 64) return;
  TouchWarp& t = g_touch_warps[g_ntouch_warps++];
  t.key = g.key;
  for (int l = 0; l < 32; ++l)
    t.word[l] = (g.mask >> l & 1) ? (long long)((g.addr[l] - base) / 4) : -1;
}

TL_NOSAN void touch_write(Out& o);
#ifndef TILELAB_SPLIT
TL_NOSAN void touch_write(Out& o) {
  o.f(",\"touch\":{\"block\":[%u,%u,%u],\"phases\":%d,\"global\":[", g_touch_block.x,
      g_touch_block.y, g_touch_block.z, g_touch_phase + 1);
  bool first = true;
  for (int p = 0; p < 64; ++p)
    for (int w = 0; w < 2; ++w) {
      const TouchMap& m = g_touch[p][w];
      if (!m.mask) continue;
      o.f("%s{\"param\":%d,\"kind\":\"%s\",\"n\":%ld,\"runs\":[", first ? "" : ",", p,
          w ? "write" : "read", m.n);
      first = false;
      bool run_first = true;
      for (long e = 0; e < m.n;) {  // runs of one mask: [start, length, mask]
        long s = e;
        while (e < m.n && m.mask[e] == m.mask[s]) ++e;
        if (m.mask[s]) {
          o.f("%s[%ld,%ld,%llu]", run_first ? "" : ",", s, e - s,
              (unsigned long long)m.mask[s]);
          run_first = false;
        }
      }
      o.s("]}");
    }
  o.s("],\"warps\":[");
  for (int i = 0; i < g_ntouch_warps; ++i) {
    const TouchWarp& t = g_touch_warps[i];
    o.f("%s{\"pc\":%u,\"array\":%d,\"kind\":\"%s\",\"words\":[", i ? "," : "",
        (uint32_t)(t.key >> 32), (int)((t.key >> 1) & 0x7fffffff) - 1,
        (t.key & 1) ? "write" : "read");
    for (int l = 0; l < 32; ++l) o.f("%s%lld", l ? "," : "", t.word[l]);
    o.s("]}");
  }
  o.s("]");
  trace_write(o);
  o.s("}");
}
// The log, as `,"trace_dropped":n,"trace":[thread,pc,param,kind,elem,block,...]`.
TL_NOSAN void trace_write(Out& o) {
  if (!g_trace) return;
  o.f(",\"trace_dropped\":%ld,\"trace\":[", g_trace_dropped);
  for (long i = 0; i < g_ntrace; ++i) {
    const TraceRec& r = g_trace[i];
    o.f("%s%u,%u,%d,%d,%lld,%lld", i ? "," : "", r.thread, r.pc, r.param, r.kind,
        (long long)r.elem, (long long)r.block);
  }
  o.s("]");
}
#endif
