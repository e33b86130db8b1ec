"""Microbenchmarks behind the book's side lessons, one data file each.

``divergence`` (a warp that splits over branches), ``waves`` (blocks that do not fill the
last wave of SMs), ``latency`` (memory latency and the bytes in flight that hide it) and
``shared_bw`` (the shared-memory data path's bytes per clock, a rate the model of
:mod:`tilelab.model` uses). Each needs PyCUDA and a GPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilelab.bench import time_interleaved
from tilelab.experiments import write
from tilelab.reference import kernel_file
from tilelab.runtime import Runtime

NO_FLUSH = (
    "CUDA events around each launch; 5 warm-up launches; median of 20 runs; the launches "
    "of one table interleaved launch by launch; no L2 flush (the kernel reads no input)"
)


def _device_attr(name: str) -> int:
    import pycuda.driver as cuda

    return cuda.Context.get_device().get_attribute(getattr(cuda.device_attribute, name))


def divergence(rt: Runtime, out: Path, iters: int = 4096) -> Path:
    """Time against the number of distinct paths, split within warps or between them."""
    fn = rt.SourceModule(kernel_file("divergence.cu")).get_function("divergence")
    sm = _device_attr("MULTIPROCESSOR_COUNT")
    blocks, threads = sm * 8, 256
    buf = rt.mem_alloc(4 * blocks * threads)
    runs = {}
    for paths in (1, 2, 4, 8, 16, 32):
        for by_lane in (1, 0):
            runs[f"{paths}:{by_lane}"] = (
                lambda p=paths, b=by_lane: fn(buf, np.int32(p), np.int32(b), np.int32(iters),
                                              block=(threads, 1, 1), grid=(blocks, 1))
            )
    t = time_interleaved(runs, flush=False)
    base = t["1:1"].median_ms
    rows = []
    for key, tk in t.items():
        paths, by_lane = map(int, key.split(":"))
        rows.append({
            "paths": paths,
            "split": "within each warp (by lane)" if by_lane else "between warps (by warp)",
            "by_lane": bool(by_lane),
            "median_ms": tk.median_ms,
            "spread": tk.spread,
            "slowdown": tk.median_ms / base,
        })
    return write(
        out, "divergence", "Warp divergence: the same work on 1 to 32 code paths",
        f"{blocks} blocks of {threads} threads; every thread runs {iters} dependent FMAs on "
        "one of `paths` branches, chosen by its lane (the warp splits) or by its warp "
        "(each warp stays together). slowdown is against one path.",
        {"paths": "", "split": "", "median_ms": "ms", "spread": "", "slowdown": "x"},
        rows, method=NO_FLUSH,
    )


def waves(rt: Runtime, out: Path, iters: int = 1 << 15) -> Path:
    """Time of a fixed-work block kernel as the grid crosses whole waves of SMs."""
    fn = rt.SourceModule(kernel_file("waves.cu")).get_function("waves")
    sm = _device_attr("MULTIPROCESSOR_COUNT")
    threads, per_sm = 1024, _device_attr("MAX_THREADS_PER_MULTIPROCESSOR") // 1024
    wave = sm * per_sm
    counts = sorted({wave // 2, wave, wave + 1, 2 * wave, 2 * wave + 1, 3 * wave,
                     3 * wave + 1, 4 * wave})
    buf = rt.mem_alloc(4 * threads * max(counts))
    runs = {
        str(b): (lambda b=b: fn(buf, np.int32(iters), block=(threads, 1, 1), grid=(b, 1)))
        for b in counts
    }
    t = time_interleaved(runs, flush=False)
    one = t[str(wave)].median_ms
    rows = [{
        "blocks": b,
        "waves": b / wave,
        "full_waves": -(-b // wave),
        "median_ms": t[str(b)].median_ms,
        "spread": t[str(b)].spread,
        "per_wave": t[str(b)].median_ms / one,
    } for b in counts]
    return write(
        out, "waves", "Wave quantization: blocks of fixed work on every SM",
        f"Blocks of {threads} threads, {per_sm} resident per SM, so one wave is "
        f"{per_sm} x {sm} = {wave} blocks; each block runs the same {iters} rounds of FMAs. "
        "per_wave is the time in units of one full wave's time.",
        {"blocks": "", "waves": "", "full_waves": "", "median_ms": "ms", "spread": "",
         "per_wave": "x"},
        rows, method=NO_FLUSH,
    )


def latency(rt: Runtime, out: Path) -> Path:
    """DRAM latency by a pointer chase, then read bandwidth against bytes in flight."""
    mod = rt.SourceModule(kernel_file("latency.cu"))
    chase, stream = mod.get_function("chase"), mod.get_function("stream")
    sm = _device_attr("MULTIPROCESSOR_COUNT")
    rng = np.random.default_rng()
    n = 1 << 26  # 256 MiB of int32: far beyond L2, and every step lands on a new line
    perm = rng.permutation(n // 32).astype(np.int64) * 32
    nxt = np.empty(n, np.int32)
    nxt[perm] = np.roll(perm, -1)
    d_next, d_out = rt.to_device(nxt), rt.mem_alloc(4)
    steps = 1 << 15
    t_chase = time_interleaved(
        {"chase": lambda: chase(d_next, np.int32(steps), d_out, block=(1, 1, 1), grid=(1, 1))},
        warmup=1, repeat=5,
    )["chase"]
    latency_ns = t_chase.median_ms * 1e6 / steps
    rows = [{"kind": "latency", "threads_per_sm": 1, "latency_ns": latency_ns,
             "median_ms": t_chase.median_ms, "spread": t_chase.spread}]
    per_thread, most = 64, 8  # float4 loads per thread; the most 256-thread blocks per SM
    d_in = rt.mem_alloc(16 * per_thread * most * 256 * sm)
    runs = {}
    for blocks_per_sm in (1, 2, 4, most):  # 256 threads each: 256 to 2048 threads per SM
        blocks = sm * blocks_per_sm
        d_o = rt.mem_alloc(4 * blocks * 256)
        runs[str(blocks_per_sm)] = (
            lambda b=blocks, o=d_o: stream(d_in, o, np.int32(per_thread), block=(256, 1, 1),
                                           grid=(b, 1))
        )
    t = time_interleaved(runs)
    for key, tk in t.items():
        threads = int(key) * 256
        nbytes = 16 * per_thread * threads * sm
        gbps = nbytes / tk.median_ms / 1e6
        rows.append({
            "kind": "stream",
            "threads_per_sm": threads,
            "bytes_in_flight_per_sm": 16 * threads,  # one float4 load per thread outstanding
            "gbps": gbps,
            "median_ms": tk.median_ms,
            "spread": tk.spread,
        })
    return write(
        out, "latency", "Memory latency, and the bytes in flight that hide it",
        f"latency: one thread follows a random chain through {n * 4 >> 20} MiB "
        f"({steps} dependent loads, one per 128-byte line). stream: 256-thread blocks, "
        f"1 to 8 per SM, each thread reading {per_thread} float4 values, at least one "
        "16-byte load outstanding per thread; GB/s counts bytes read.",
        {"kind": "", "threads_per_sm": "", "latency_ns": "ns",
         "bytes_in_flight_per_sm": "B", "gbps": "GB/s", "median_ms": "ms"},
        rows,
        method="CUDA events; median of 5 chases after one warm-up; streams: median of 20, "
        "L2 flushed before every timed launch",
    )


def shared_bw(rt: Runtime, out: Path, iters: int = 1 << 14) -> Path:
    """Shared-memory bytes per clock per SM, conflict-free 16-byte loads."""
    fn = rt.SourceModule(kernel_file("shared_bw.cu")).get_function("shared_bw")
    sm = _device_attr("MULTIPROCESSOR_COUNT")
    clock_mhz = _device_attr("CLOCK_RATE") / 1000
    blocks, threads = sm * 8, 256
    buf = rt.mem_alloc(4 * blocks * threads)
    t = time_interleaved(
        {"lds128": lambda: fn(buf, np.int32(iters), block=(threads, 1, 1), grid=(blocks, 1))},
        flush=False,
    )["lds128"]
    nbytes = 16.0 * iters * blocks * threads
    gbps = nbytes / t.median_ms / 1e6
    return write(
        out, "shared_bw", "Shared-memory bandwidth, conflict-free 16-byte loads",
        f"{blocks} blocks of {threads} threads, {iters} float4 shared loads each (a warp's "
        "512 bytes over 32 consecutive 16-byte words). bytes_per_clock_per_sm divides by the "
        "SM count and the driver's maximum clock.",
        {"gbps": "GB/s", "bytes_per_clock_per_sm": "B", "median_ms": "ms"},
        [{"gbps": gbps, "bytes_per_clock_per_sm": gbps * 1e9 / sm / (clock_mhz * 1e6),
          "clock_mhz": clock_mhz, "sm_count": sm, "median_ms": t.median_ms,
          "spread": t.spread}],
        method=NO_FLUSH,
    )


EXPERIMENTS = {"divergence": divergence, "waves": waves, "latency": latency,
               "shared_bw": shared_bw}
