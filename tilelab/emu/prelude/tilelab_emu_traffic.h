// tilelab CPU emulator, analysis mode: global-memory traffic.
//
// The TSan hooks (tilelab_emu_tsan.h) hand every load and store of the kernel to an_access();
// one whose address lies in the device buffer a pointer parameter points into is recorded
// here with its width and code address, whatever pointer it went through. The lanes of a
// warp that execute the k-th access of (code address, parameter, read/write) between two
// meeting points make one warp-wide request, grouped by the bank analysis's machinery
// (tilelab_emu_analysis.h); for each request we count the distinct 32-byte sectors its lanes
// touch: 4 for 32 consecutive aligned floats, 32 for 32 floats a row apart. Python turns
// code addresses into source lines and sums a line's addresses.
// Included by tilelab_emu_analysis.h inside namespace tl_emu, before finish_warp().
#pragma once

#include "tilelab_emu_touch.h"

enum : int { TL_GLOBAL_BASE = 1 << 20 };  // array ids at or above this are kernel parameters

// ---- which parameter an address belongs to -------------------------------------------------
struct ParamRegion {
  uintptr_t lo, hi;  // the buffer's bytes
  uintptr_t ptr;     // the parameter's value (a pointer into the buffer)
  int param;
};
TL_DEF ParamRegion g_regions[64];
TL_DEF int g_nregions;
TL_DEF uintptr_t g_glob_lo, g_glob_span;  // the hull of the regions: the hooks' first test

// Called at launch, once the buffers are mapped and the pointer arguments set.
TL_NOSAN inline void traffic_launch() {
  g_nregions = 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < g_kernel->nparams && g_nregions < 64; ++i) {
    if (!g_kernel->params[i].is_pointer) continue;
    uintptr_t p = (uintptr_t) * (void**)g_args[i];
    for (int b = 0; b < g_nbuf; ++b) {
      uintptr_t d = (uintptr_t)g_bufs[b].data, n = g_bufs[b].n;
      if (p < d || p > d + n || !n) continue;
      g_regions[g_nregions++] = ParamRegion{d, d + n, p, i};
      lo = d < lo ? d : lo, hi = d + n > hi ? d + n : hi;
      break;
    }
  }
  g_glob_lo = g_nregions ? lo : 0;
  g_glob_span = g_nregions ? hi - lo : 0;
  touch_launch();
  if (g_trace && g_nregions) {  // a traced launch sees accesses just outside the buffers too
    g_glob_lo = lo > TL_TRACE_SLACK ? lo - TL_TRACE_SLACK : 0;
    g_glob_span = hi + TL_TRACE_SLACK - g_glob_lo;
  }
}

// The parameter whose buffer holds `a`: of several pointing into one buffer, the one that
// points nearest below `a` (-1: none).
TL_NOSAN inline int param_at(uintptr_t a) {
  int best = -1;
  for (int r = 0; r < g_nregions; ++r) {
    const ParamRegion& R = g_regions[r];
    if (a < R.lo || a >= R.hi) continue;
    if (best < 0) {
      best = r;
      continue;
    }
    const ParamRegion& B = g_regions[best];
    bool below = R.ptr <= a, best_below = B.ptr <= a;
    if (below > best_below || (below == best_below && (below ? R.ptr > B.ptr : R.ptr < B.ptr)))
      best = r;
  }
  return best < 0 ? -1 : g_regions[best].param;
}

TL_NOSAN inline void bank_add(uintptr_t a, unsigned size, uint32_t pc, int arr, int w);

TL_NOINLINE TL_NOSAN void global_record(uintptr_t a, unsigned size, uint32_t pc, int kind);
#ifndef TILELAB_SPLIT
TL_NOINLINE TL_NOSAN void global_record(uintptr_t a, unsigned size, uint32_t pc, int kind) {
  int p = param_at(a);
  if (p < 0 && g_trace && g_cur) {  // outside every buffer: the nearest, when traced
    for (int r = 0; r < g_nregions; ++r) {
      const ParamRegion& R = g_regions[r];
      if ((a >= R.hi && a - R.hi < TL_TRACE_SLACK) || (a < R.lo && R.lo - a <= TL_TRACE_SLACK))
        return trace_global(R.param, R.ptr, a, pc, g_cur->linear, kind, true);
    }
  }
  if (p < 0) return;
  for (int r = 0; r < g_nregions; ++r)
    if (g_regions[r].param == p) {
      touch_global(p, g_regions[r].lo, g_regions[r].hi, a, size, kind);
      if (g_trace && g_cur) trace_global(p, g_regions[r].ptr, a, pc, g_cur->linear, kind);
    }
  if (kind & K_R) bank_add(a, size, pc, TL_GLOBAL_BASE + p, 0);
  if (kind & K_W) bank_add(a, size, pc, TL_GLOBAL_BASE + p, 1);
}
#endif

// ---- per (code address, parameter, kind): requests and sectors -----------------------------
struct TrafficStat {
  uint64_t key;
  long long requests, sectors, lanes, bytes;
  int max_sectors;
};
TL_DEF TrafficStat g_traffic[1024];
TL_DEF int g_ntraffic;
TL_DEF long long g_traffic_dropped;
TL_DEF Table<1024>* g_traffic_index;

TL_NOSAN inline int sectors(const Group& g) {
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
TL_NOSAN inline void traffic_finish(const Group& g) {
  if (!g_traffic_index)
    g_traffic_index = (Table<1024>*)calloc(1, sizeof(Table<1024>)), g_traffic_index->cur = 1;
  bool fresh;
  int* slot = g_traffic_index->get(g.key, 0, &fresh);
  if (!slot || (fresh && g_ntraffic == 1024)) {
    ++g_traffic_dropped;
    return;
  }
  if (fresh) *slot = g_ntraffic, g_traffic[g_ntraffic++] = TrafficStat{g.key, 0, 0, 0, 0, 0};
  TrafficStat& t = g_traffic[*slot];
  int s = sectors(g);
  ++t.requests, t.sectors += s;
  for (int l = 0; l < 32; ++l)
    if (g.mask >> l & 1) ++t.lanes, t.bytes += g.size[l];
  if (s > t.max_sectors) t.max_sectors = s;
}

TL_NOSAN void traffic_write(Out& o);
#ifndef TILELAB_SPLIT
TL_NOSAN void traffic_write(Out& o) {
  o.s(",\"traffic\":[");
  for (int i = 0; i < g_ntraffic; ++i) {
    const TrafficStat& t = g_traffic[i];
    o.f("%s{\"pc\":%u,\"param\":%d,\"kind\":\"%s\",\"requests\":%lld,\"sectors\":%lld,"
        "\"lanes\":%lld,\"bytes\":%lld,\"max_sectors\":%d}",
        i ? "," : "", (uint32_t)(t.key >> 32),
        (int)((t.key >> 1) & 0x7fffffff) - 1 - TL_GLOBAL_BASE, (t.key & 1) ? "write" : "read",
        t.requests, t.sectors, t.lanes, t.bytes, t.max_sectors);
  }
  o.f("],\"traffic_dropped\":%lld", g_traffic_dropped);
  touch_write(o);
}
#endif
