"""Emulator fidelity: kernels of the kinds learners write, each checked against NumPy, against
the error a GPU gives, or (analysis mode) against the race or bank conflict it has.

Every case gives one outcome: ``right`` (the emulator does what an H100 does: the right
answer for a correct kernel, a wrong answer or an error for a buggy one, the GPU's refusal
for a launch a GPU refuses), ``refused`` (an error with a message for a kernel a GPU runs),
or ``wrong``. ``test_fidelity_on_gpu`` runs the same cases through PyCUDA on a GPU and
reports where the two disagree. The kernels are in tests/fidelity/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from support.emu_samples import TILED_MATMUL, line_of, without_barrier

import tilelab.emu as emu

KERNELS = Path(__file__).with_name("fidelity")
FULL = 0xFFFFFFFF


@dataclass(frozen=True)
class Case:
    """One kernel run: ``fn(drv)`` returns ``(got, want)`` arrays or a bool (analysis)."""

    id: str
    feature: str
    fn: Callable[[object], object]
    buggy: bool = False  # a GPU shows the bug: the emulator must not pass it
    refuse: str = ""  # a GPU refuses it: the error must match this
    analysis: bool = False  # emulator only: checks the analysis report
    gpu: bool = True  # safe to run on a GPU (False: it would hang one)
    nvcc: bool = False  # the emulator needs nvcc's ptxas to know
    rtol: float = 1e-4
    atol: float = 1e-3


class Modules:
    """SourceModules of the kernel files, compiled once per backend and options."""

    def __init__(self, drv: object) -> None:
        self.drv = drv
        self.cache: dict[tuple, object] = {}

    def __call__(self, name: str, *options: str, analysis: bool = False,
                 no_extern_c: bool = False) -> object:
        key = (name, options, analysis, no_extern_c)
        if key not in self.cache:
            src = (KERNELS / name).read_text()
            extra = {"analysis": True} if analysis else {}
            self.cache[key] = self.drv.SourceModule(src, options=list(options),
                                                    no_extern_c=no_extern_c, **extra)
        return self.cache[key]


def _rng() -> np.random.Generator:
    return np.random.default_rng(15)


# ---- 1. warp-level primitives ---------------------------------------------------------------
def shuffle_reduce(d: types.SimpleNamespace, n: int = 100_003) -> tuple:
    x = _rng().standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    f = d.mod("warp.cu").get_function("shuffle_reduce")
    f(d.drv.In(x), d.drv.InOut(out), np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
    return out, np.array([x.astype(np.float64).sum()])


def xor_and_scan(d: types.SimpleNamespace) -> tuple:
    x = _rng().integers(-8, 8, 128).astype(np.float32)
    total, scan, scan8 = (np.zeros(128, np.float32) for _ in range(3))
    d.mod("warp.cu").get_function("xor_and_scan")(
        d.drv.In(x), d.drv.Out(total), d.drv.Out(scan), d.drv.Out(scan8), block=(64, 1, 1),
        grid=(2, 1))
    w = x.reshape(4, 32)
    want = np.concatenate([np.repeat(w.sum(1), 32), np.cumsum(w, 1).ravel(),
                           np.cumsum(x.reshape(16, 8), 1).ravel()])
    return np.concatenate([total, scan, scan8]), want


def votes(d: types.SimpleNamespace) -> tuple:
    x = _rng().integers(-50, 100, 64).astype(np.int32)
    outs = [np.zeros(64, t) for t in (np.int32, np.uint32, np.int32, np.uint32, np.uint32)]
    d.mod("warp.cu").get_function("votes")(d.drv.In(x), *(d.drv.Out(o) for o in outs),
                                           block=(64, 1, 1))
    w = x.reshape(2, 32)
    lanes = np.arange(32)
    bcast = w.reshape(2, 2, 16)[:, :, 3:4].repeat(16, 2).ravel()
    ballot = [sum(1 << int(i) for i in lanes[r > 0]) for r in w]
    any_all = [2 * int((r > 90).any()) + int((r > -100).all()) for r in w]
    mask3 = sum(1 << int(i) for i in lanes if i % 3 == 0)
    active = np.where(lanes % 3 == 0, mask3, 0)
    sums = [int((r & 255).sum()) + np.array([(r & 3) == (v & 3) for v in r]).sum(1)
            for r in w]
    want = np.concatenate([bcast, np.repeat(ballot, 32), np.repeat(any_all, 32),
                           np.tile(active, 2), np.concatenate(sums)]).astype(np.int64)
    got = np.concatenate([o.astype(np.int64) for o in outs])
    return got, want


def _block_sums(d: types.SimpleNamespace, kernel: str, size: int, blocks: int = 8,
                analysis: bool = False) -> tuple:
    x = _rng().standard_normal(size * blocks).astype(np.float32)
    out = np.zeros(blocks, np.float32)
    f = d.mod("warp.cu", analysis=analysis).get_function(kernel)
    f(d.drv.In(x), d.drv.Out(out), block=(size, 1, 1), grid=(blocks, 1))
    return (out, x.reshape(blocks, size).astype(np.float64).sum(1)), f


def syncwarp_reduce(d: types.SimpleNamespace) -> tuple:
    return _block_sums(d, "syncwarp_reduce", 64)[0]


def unrolled(kernel: str) -> Callable:
    return lambda d: _block_sums(d, kernel, 256)[0]


def syncwarp_has_no_race(d: types.SimpleNamespace) -> bool:
    (got, want), f = _block_sums(d, "syncwarp_reduce", 64, analysis=True)
    return np.allclose(got, want, atol=1e-3) and not f.last_report.analysis.races


def unrolled_race_is_a_warp_race(kernel: str) -> Callable:
    def check(d: types.SimpleNamespace) -> bool:
        _, f = _block_sums(d, kernel, 256, analysis=True)
        report = f.last_report.analysis
        text = report.summary()
        return (report.has_races and all(r.same_warp for r in report.races)
                and "__syncwarp()" in text and "__syncthreads()" not in text)
    return check


def branch_shuffles(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    d.mod("warp.cu").get_function("branch_shuffles")(d.drv.In(x), d.drv.Out(out),
                                                     block=(64, 1, 1))
    w = x.reshape(2, 32)
    return out, np.concatenate([10 * w[:, 16:], w[:, :16]], 1).ravel()


def block_race_advice(d: types.SimpleNamespace) -> bool:
    """A tiled matmul without its trailing barrier: races inside warps and across them; the
    advice is the block barrier (which orders both), never __syncwarp."""
    f = d.drv.SourceModule(without_barrier(TILED_MATMUL, 2), analysis=True) \
        .get_function("matmul_tiled")
    a = np.ones((64, 64), np.float32)
    f(d.drv.In(a), d.drv.In(a), d.drv.Out(np.zeros_like(a)), np.int32(64), np.int32(64),
      np.int32(64), block=(16, 16, 1), grid=(4, 4))
    text = f.last_report.analysis.summary()
    return "put __syncthreads()" in text and "__syncwarp()" not in text


def divergent_shuffle(d: types.SimpleNamespace) -> tuple:
    out = np.zeros(32, np.float32)
    d.mod("warp.cu").get_function("divergent_shuffle")(d.drv.Out(out), block=(32, 1, 1))
    return out, np.arange(32, dtype=np.float32)


# ---- 2. shared memory through vectors, pointers, swaps, carved buffers ------------------------
def matmul_regblock(d: types.SimpleNamespace, n: int = 256, *options: str) -> tuple:
    rng = _rng()
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    d.mod("shared_access.cu", *options).get_function("matmul_regblock")(
        d.drv.In(a), d.drv.In(b), d.drv.Out(c), np.int32(n), block=(16, 16, 1),
        grid=(n // 64, n // 64))
    return c, a.astype(np.float64) @ b


def _races(d: types.SimpleNamespace, kernel: str, option: str, run: Callable) -> bool:
    f = d.mod("shared_access.cu", option, analysis=True).get_function(kernel)
    run(f)
    return f.last_report.analysis.has_races


def regblock_race(d: types.SimpleNamespace) -> bool:
    n = 128
    a = np.ones((n, n), np.float32)
    return _races(d, "matmul_regblock", "-DNO_TRAILING_BARRIER", lambda f: f(
        d.drv.In(a), d.drv.In(a), d.drv.Out(np.zeros_like(a)), np.int32(n),
        block=(16, 16, 1), grid=(2, 2)))


def regblock_clean(d: types.SimpleNamespace) -> bool:
    n = 128
    a = np.ones((n, n), np.float32)
    return not _races(d, "matmul_regblock", "-DKEEP", lambda f: f(
        d.drv.In(a), d.drv.In(a), d.drv.Out(np.zeros_like(a)), np.int32(n),
        block=(16, 16, 1), grid=(2, 2)))


def _smooth_want(x: np.ndarray, steps: int) -> np.ndarray:
    w = x.reshape(-1, 256).astype(np.float64)
    for _ in range(steps):
        p = np.pad(w, ((0, 0), (1, 1)))
        w = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / 3
    return w.ravel()


def smooth_swap(d: types.SimpleNamespace, *options: str) -> tuple:
    x = _rng().standard_normal(512).astype(np.float32)
    out = np.zeros(512, np.float32)
    d.mod("shared_access.cu", *options).get_function("smooth_swap")(
        d.drv.In(x), d.drv.Out(out), np.int32(5), block=(256, 1, 1), grid=(2, 1))
    return out, _smooth_want(x, 5)


def swap_race(d: types.SimpleNamespace) -> bool:
    x = np.ones(512, np.float32)
    return _races(d, "smooth_swap", "-DNO_SWAP_BARRIER", lambda f: f(
        d.drv.In(x), d.drv.Out(np.zeros_like(x)), np.int32(5), block=(256, 1, 1), grid=(2, 1)))


def carved(d: types.SimpleNamespace, *options: str) -> tuple:
    rng = _rng()
    a, b = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
    out = np.zeros(256, np.float32)
    d.mod("shared_access.cu", *options).get_function("carved")(
        d.drv.In(a), d.drv.In(b), d.drv.Out(out), block=(128, 1, 1), grid=(2, 1),
        shared=2 * 128 * 4)
    j = (np.arange(256) % 128 + 1) % 128 + np.arange(256) // 128 * 128
    return out, a[j] * b[j]


def carved_race(d: types.SimpleNamespace) -> bool:
    a = np.ones(256, np.float32)
    return _races(d, "carved", "-DNO_BARRIER", lambda f: f(
        d.drv.In(a), d.drv.In(a), d.drv.Out(np.zeros_like(a)), block=(128, 1, 1),
        grid=(2, 1), shared=1024))


def bank_widths(d: types.SimpleNamespace) -> bool:
    f = d.mod("shared_access.cu", analysis=True).get_function("widths")
    f(d.drv.Out(np.zeros(32, np.float32)), block=(32, 1, 1))
    report = f.last_report.analysis
    src = (KERNELS / "shared_access.cu").read_text()
    want = {"F2_CONSECUTIVE": 1, "F4_CONSECUTIVE": 1, "F4_STRIDE2": 2, "D_STRIDE2": 2}
    got = {m: report.line(line_of(src, m), "s", "read").max_degree for m in want}
    return got == want


def _histogram(d: types.SimpleNamespace, *options: str, analysis: bool = False) -> tuple:
    x = _rng().integers(0, 1000, 1000).astype(np.int32)
    bins, total = np.zeros(16, np.uint32), np.zeros(1, np.uint32)
    f = d.mod("shared_access.cu", *options, analysis=analysis).get_function("histogram")
    f(d.drv.In(x), d.drv.InOut(bins), d.drv.InOut(total), np.int32(1000), block=(128, 1, 1),
      grid=(8, 1))
    want = np.append(np.bincount(x & 15, minlength=16), 1000)
    return (np.append(bins, total), want), f


def histogram(d: types.SimpleNamespace) -> tuple:
    return _histogram(d)[0]


def atomics_are_no_race(d: types.SimpleNamespace) -> bool:
    (got, want), f = _histogram(d, "-DATOMIC", analysis=True)
    return np.array_equal(got, want) and not f.last_report.analysis.races


def counter_race_named(d: types.SimpleNamespace) -> bool:
    _, f = _histogram(d, "-DRACY_COUNT", analysis=True)
    races = f.last_report.analysis.races
    return bool(races) and {r.array for r in races} == {"count"}


# ---- 3. globals and mangled names --------------------------------------------------------------
def constant_weights(d: types.SimpleNamespace) -> tuple:
    mod = d.mod("globals.cu")
    w = np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32)
    ptr, size = mod.get_global("weights")
    d.drv.memcpy_htod(ptr, w)
    x = _rng().standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    mod.get_function("conv1d")(d.drv.In(x), d.drv.Out(y), np.int32(1000), block=(128, 1, 1),
                               grid=(8, 1))
    want = np.convolve(x.astype(np.float64), w[::-1].astype(np.float64), "same")
    return np.append(y, size), np.append(want, 20)


def device_counter(d: types.SimpleNamespace) -> tuple:
    mod = d.drv.SourceModule((KERNELS / "globals.cu").read_text())  # a fresh module
    ptr, _ = mod.get_global("launches_seen")
    x = np.zeros(64, np.float32)
    for _ in range(3):
        mod.get_function("conv1d")(d.drv.In(x), d.drv.Out(x.copy()), np.int32(64),
                                   block=(64, 1, 1))
    seen = np.zeros(1, np.uint32)
    d.drv.memcpy_dtoh(seen, ptr)
    return seen, np.array([3])


def mul24(d: types.SimpleNamespace) -> tuple:
    a = np.array([3, 1 << 23, (1 << 24) + 5, -7, 0x7FFFFFFF, 123456789] * 6, np.int32)[:32]
    b = np.array([5, 4, 3, 1 << 20, 2, -987654] * 6, np.int32)[:32]
    c, uc = np.zeros(32, np.int32), np.zeros(32, np.uint32)
    d.mod("globals.cu").get_function("mul24")(d.drv.In(a), d.drv.In(b), d.drv.Out(c),
                                              d.drv.Out(uc), block=(32, 1, 1))

    def s24(v: np.ndarray) -> np.ndarray:
        v = v.astype(np.int64) & 0xFFFFFF
        return np.where(v >= 1 << 23, v - (1 << 24), v)

    want = (s24(a) * s24(b)) & 0xFFFFFFFF
    uwant = ((a.astype(np.int64) & 0xFFFFFF) * (b.astype(np.int64) & 0xFFFFFF)) & 0xFFFFFFFF
    return np.concatenate([c.astype(np.int64) & 0xFFFFFFFF, uc]), np.concatenate([want, uwant])


def templates(d: types.SimpleNamespace) -> tuple:
    mod = d.mod("templates.cu", no_extern_c=True)
    x = _rng().standard_normal(1000)
    y = np.ones(1000)
    mod.get_function("_Z4axpyIdLi128EEvPT_PKS0_S0_i")(
        d.drv.InOut(y), d.drv.In(x), np.float64(2.0), np.int32(1000), block=(128, 1, 1),
        grid=(8, 1))
    z = x.astype(np.float32)
    mod.get_function("_Z6squarePfi")(d.drv.InOut(z), np.int32(1000), block=(128, 1, 1),
                                     grid=(8, 1))
    return np.concatenate([y, z]), np.concatenate([1 + 2 * x, x.astype(np.float32) ** 2])


# ---- 4. allocations, the PyCUDA surface, bugs fast mode must not pass ------------------------
def vec4_tail(n: int, alloc: bool) -> Callable:
    def run(d: types.SimpleNamespace) -> tuple:
        x = _rng().standard_normal(n).astype(np.float32)
        f = d.mod("vectors.cu").get_function("scale_vec4")
        grid = ((n // 4 + 255) // 256 + 1, 1)
        if alloc:
            xd, yd = d.drv.mem_alloc(x.nbytes), d.drv.mem_alloc(x.nbytes)
            d.drv.memcpy_htod(xd, x)
            f(xd, yd, np.float32(3), np.int32(n), block=(256, 1, 1), grid=grid)
            y = np.empty_like(x)
            d.drv.memcpy_dtoh(y, yd)
        else:
            y = np.zeros_like(x)
            f(d.drv.In(x), d.drv.Out(y), np.float32(3), np.int32(n), block=(256, 1, 1),
              grid=grid)
        return y, 3 * x
    return run


def events_prepared_gpuarray(d: types.SimpleNamespace) -> tuple:
    f = d.mod("vectors.cu").get_function("scale_vec4")
    x = d.gpuarray.to_gpu(np.arange(1001, dtype=np.float32))
    y = d.gpuarray.zeros(1001, np.float32)
    f.prepare("PPfi")
    start, end = d.drv.Event(), d.drv.Event()
    start.record()
    f.prepared_call((2, 1), (256, 1, 1), x.gpudata, y.gpudata, 2.0, 1001)
    end.record()
    end.synchronize()
    ms = start.time_till(end)
    regs = f.get_attribute(d.drv.function_attribute.NUM_REGS)
    # NUM_REGS is 0 only on an emulator without nvcc (ptxas counts the registers)
    return np.append(y.get(), [ms >= 0, regs >= 0]), np.append(2 * np.arange(1001), [1, 1])


def dynamic_opt_in(d: types.SimpleNamespace) -> tuple:
    f = d.mod("vectors.cu").get_function("big_dynamic")
    f.set_attribute(d.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536)
    out = np.zeros(128, np.float32)
    f(d.drv.Out(out), block=(128, 1, 1), shared=65536)
    return out, 16383 - np.arange(128, dtype=np.float32)


def dynamic_no_opt_in(d: types.SimpleNamespace) -> tuple:
    mod = d.drv.SourceModule((KERNELS / "vectors.cu").read_text())  # attributes unset
    out = np.zeros(128, np.float32)
    mod.get_function("big_dynamic")(d.drv.Out(out), block=(128, 1, 1), shared=65536)
    return out, 16383 - np.arange(128, dtype=np.float32)


def barrier_outside_loop(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(256 * 8).astype(np.float32)
    out = np.zeros(8, np.float32)
    d.mod("reduce_bugs.cu").get_function("barrier_outside_loop")(
        d.drv.In(x), d.drv.Out(out), block=(256, 1, 1), grid=(8, 1))
    return out, x.reshape(8, 256).astype(np.float64).sum(1)


def read_past_static(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    d.mod("reduce_bugs.cu").get_function("read_past_static")(
        d.drv.In(x), d.drv.Out(out), block=(128, 1, 1), grid=(2, 1))
    w = x.reshape(2, 128)
    return out, (w + np.roll(w, -1, 1)).ravel()  # what was meant: s[(t + 1) % 128]


# ---- 5. launch limits ----------------------------------------------------------------------------
def static_64k(d: types.SimpleNamespace) -> tuple:
    mod = d.mod("limits.cu", "-DSTATIC_64K")
    out = np.zeros(32, np.float32)
    mod.get_function("too_much_static")(d.drv.Out(out), block=(32, 1, 1))
    return out, 16383 - np.arange(32)


def register_limit(d: types.SimpleNamespace) -> tuple:
    n = 256
    a = np.ones((n, n), np.float32)
    c = np.zeros_like(a)
    d.mod("limits.cu").get_function("micro8x8")(d.drv.In(a), d.drv.In(a), d.drv.Out(c),
                                                np.int32(n), block=(32, 32, 1), grid=(1, 1))
    return c, a @ a


def launch_bounds(d: types.SimpleNamespace) -> tuple:
    out = np.zeros(256, np.float32)
    d.mod("limits.cu", "-DBOUNDED").get_function("bounded")(d.drv.Out(out), block=(256, 1, 1))
    return out, np.arange(256, dtype=np.float32)


CASES = [
    Case("shuffle_reduce", "warp", shuffle_reduce, atol=1e-2),
    Case("xor_and_scan", "warp", xor_and_scan),
    Case("votes_activemask_match", "warp", votes),
    Case("syncwarp_reduce", "warp", syncwarp_reduce),
    Case("syncwarp_reduce_no_race", "warp", syncwarp_has_no_race, analysis=True),
    Case("unrolled_last_warp_helper", "warp", unrolled("unrolled_helper")),
    Case("unrolled_last_warp_inline", "warp", unrolled("unrolled_inline")),
    Case("unrolled_helper_warp_race", "warp", unrolled_race_is_a_warp_race("unrolled_helper"),
         analysis=True),
    Case("unrolled_inline_warp_race", "warp", unrolled_race_is_a_warp_race("unrolled_inline"),
         analysis=True),
    Case("shuffles_in_both_branches", "warp", branch_shuffles),
    Case("block_race_advises_block_barrier", "warp", block_race_advice, analysis=True),
    Case("divergent_shuffle_hangs", "warp", divergent_shuffle, refuse="Warp divergence",
         gpu=False),
    Case("matmul_regblock_256", "shared", matmul_regblock),
    Case("matmul_regblock_512", "shared", lambda d: matmul_regblock(d, 512)),
    Case("matmul_regblock_missing_barrier", "shared",
         lambda d: matmul_regblock(d, 256, "-DNO_TRAILING_BARRIER"), buggy=True),
    Case("matmul_regblock_missing_barrier_race", "shared", regblock_race, analysis=True),
    Case("matmul_regblock_no_race", "shared", regblock_clean, analysis=True),
    Case("smooth_pointer_swap", "shared", smooth_swap),
    Case("smooth_pointer_swap_missing_barrier", "shared",
         lambda d: smooth_swap(d, "-DNO_SWAP_BARRIER"), buggy=True),
    Case("smooth_pointer_swap_race", "shared", swap_race, analysis=True),
    Case("carved_dynamic", "shared", carved),
    Case("carved_dynamic_race", "shared", carved_race, analysis=True),
    Case("bank_phases_64_128_bit", "shared", bank_widths, analysis=True),
    Case("shared_histogram_atomics", "shared", histogram),
    Case("shared_atomics_are_no_race", "shared", atomics_are_no_race, analysis=True),
    Case("shared_scalar_counter_race", "shared", counter_race_named, analysis=True),
    Case("constant_weights_get_global", "globals", constant_weights),
    Case("device_counter_across_launches", "globals", device_counter),
    Case("mul24_24_bit_operands", "globals", mul24),
    Case("template_and_mangled_names", "globals", templates),
    Case("vec4_tail_in_out_1001", "pycuda", vec4_tail(1001, False)),
    Case("vec4_tail_mem_alloc_2e20p3", "pycuda", vec4_tail(2**20 + 3, True)),
    Case("events_prepared_call_gpuarray", "pycuda", events_prepared_gpuarray),
    Case("dynamic_shared_opt_in", "pycuda", dynamic_opt_in),
    Case("barrier_outside_reduction_loop", "pycuda", barrier_outside_loop, buggy=True),
    Case("read_past_static_shared", "pycuda", read_past_static, buggy=True),
    Case("dynamic_shared_without_opt_in", "limits", dynamic_no_opt_in,
         refuse=r"invalid argument"),
    Case("static_shared_64k", "limits", static_64k,
         refuse=r"too much shared data|\(48 KiB\) nvcc"),
    Case("registers_32x32_block", "limits", register_limit,
         refuse=r"too many resources requested for launch", nvcc=True),
    Case("block_over_launch_bounds", "limits", launch_bounds,
         refuse=r"too many resources requested for launch|invalid argument"),
]


def classify(case: Case, d: types.SimpleNamespace) -> tuple[str, str]:
    """``(outcome, detail)`` of one case on one backend."""
    try:
        result = case.fn(d)
    except Exception as exc:  # the outcome is the error: judged below
        msg = " ".join(str(exc).split())
        if case.refuse:
            ok = re.search(case.refuse, msg) is not None
            return ("right" if ok else "wrong"), f"{type(exc).__name__}: {msg[:300]}"
        if case.buggy and msg:
            return "right", f"caught: {type(exc).__name__}: {msg[:300]}"
        return ("refused" if msg else "wrong"), f"{type(exc).__name__}: {msg[:300]}"
    if case.refuse:
        return "wrong", "ran, but a GPU refuses this"
    if isinstance(result, (bool, np.bool_)):
        return ("right" if result else "wrong"), "analysis check"
    got, want = result
    same = got.shape == want.shape and np.allclose(got, want, rtol=case.rtol, atol=case.atol)
    if case.buggy:
        return ("right" if not same else "wrong"), "wrong answer, as on a GPU" if not same \
            else "the bug went unnoticed"
    if same:
        return "right", ""
    err = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
    return "wrong", f"max error {err}"


def backend(drv: object, gpuarray: object) -> types.SimpleNamespace:
    """What the cases use of one backend."""
    return types.SimpleNamespace(drv=drv, gpuarray=gpuarray, mod=Modules(drv))


@pytest.fixture(scope="module")
def emu_backend() -> types.SimpleNamespace:
    return backend(emu, emu.gpuarray)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fidelity_case(case: Case, emu_backend: types.SimpleNamespace) -> None:
    if case.nvcc and not shutil.which(os.environ.get("TILELAB_EMU_NVCC", "nvcc") or "-"):
        pytest.skip("the emulator counts registers with nvcc's ptxas, which is not installed")
    outcome, detail = classify(case, emu_backend)
    assert outcome == "right", detail


def summary(outcomes: dict[str, tuple[str, str]]) -> str:
    counts = {k: sum(1 for o, _ in outcomes.values() if o == k)
              for k in ("right", "refused", "wrong")}
    return (f"{counts['right']} right, {counts['refused']} refused with a message, "
            f"{counts['wrong']} wrong (of {len(outcomes)})")


def gpu_outcome(case_id: str) -> tuple[str, str]:
    """One case on the GPU through PyCUDA, in a fresh process: a kernel that faults (an
    illegal address is sticky for the whole CUDA context) costs only its own case."""
    code = (
        "import json, sys, types\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
        "import pycuda.autoinit\n"
        "import pycuda.driver as drv, pycuda.gpuarray as gpuarray\n"
        "from pycuda.compiler import SourceModule\n"
        "import test_emu_fidelity as t\n"
        "gpu = t.backend(types.SimpleNamespace(**{k: getattr(drv, k) for k in dir(drv)},"
        " SourceModule=SourceModule), gpuarray)\n"
        f"case = next(c for c in t.CASES if c.id == {case_id!r})\n"
        "outcome = t.classify(case, gpu)\n"
        "drv.Context.synchronize()\n"
        "print(json.dumps(outcome))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    lines = p.stdout.strip().splitlines()
    if p.returncode == 0 and lines:
        return tuple(json.loads(lines[-1]))  # type: ignore[return-value]
    err = " ".join((p.stderr or "").split())[-300:]
    return "wrong", f"the process failed (rc {p.returncode}): {err}"


def disagree(case: Case, on_gpu: tuple[str, str], on_emu: tuple[str, str]) -> bool:
    """Whether the emulator answers otherwise than the GPU. A race or read past an array may
    go unnoticed in one GPU run; the emulator showing it then is the point, not a fault."""
    if case.buggy and on_gpu[0] == "wrong" and on_emu[0] == "right":
        return False
    return (on_gpu[0] == "right") != (on_emu[0] == "right")


@pytest.mark.gpu
def test_fidelity_on_gpu(emu_backend: types.SimpleNamespace) -> None:
    pytest.importorskip("pycuda")
    cases = [c for c in CASES if c.gpu and not c.analysis]
    on_gpu = {c.id: gpu_outcome(c.id) for c in cases}
    on_emu = {c.id: classify(c, emu_backend) for c in cases}
    differ = [c.id for c in cases if disagree(c, on_gpu[c.id], on_emu[c.id])]
    hidden = [c.id for c in cases if c.buggy and on_gpu[c.id][0] == "wrong"]
    print(f"\nfidelity suite on the GPU: {summary(on_gpu)}; on the emulator: {summary(on_emu)}; "
          f"disagreements: {len(differ)}; bugs this GPU run hid and the emulator showed: "
          f"{hidden}" + "".join(
              f"\n  {c}: GPU {on_gpu[c][0]} ({on_gpu[c][1]}) / emulator {on_emu[c][0]} "
              f"({on_emu[c][1]})" for c in differ))
    assert not differ
