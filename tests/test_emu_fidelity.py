"""Emulator fidelity: kernels of the kinds learners write, each checked against NumPy, against
the error a GPU gives, or (analysis mode) against the race or bank conflict it has.

Every case gives one outcome: ``right`` (the emulator does what an H100 does: the right
answer for a correct kernel, a wrong answer or an error for a buggy one, the GPU's refusal
for a launch a GPU refuses), ``refused`` (an error with a message for a kernel a GPU runs),
or ``wrong``. ``test_fidelity_on_gpu`` runs the same cases through PyCUDA on a GPU and
reports where the two disagree. The kernels are in tests/fidelity/.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from support.emu_samples import TILED_MATMUL, line_of, without_barrier

import tilelab.emu as emu
from tilelab.emu.compile import compiler, fma_flags
from tilelab.emu.module import fmad_option

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


# ---- 6. numeric semantics: conversions, contraction, rounding modes ---------------------------
_LIMITS = {np.int32: (-2**31, 2**31 - 1), np.uint32: (0, 2**32 - 1),
           np.int64: (-2**63, 2**63 - 1), np.uint64: (0, 2**64 - 1)}
_ROUND = {"rn": np.rint, "rz": np.trunc, "ru": np.ceil, "rd": np.floor}


def cuda_int(x: np.ndarray, dtype: type, mode: str = "rz") -> np.ndarray:
    """CUDA's conversion of floating values to an integer type: rounded in ``mode``,
    saturated at the ends of the range (exact: Python integers); NaN to 0 from a float to a
    32-bit type, else to the integer indefinite (the lowest value if signed, the top bit
    alone if unsigned), as an H100 gives them."""
    lo, hi = _LIMITS[dtype]
    nan = (0 if x.dtype == np.float32 and np.dtype(dtype).itemsize == 4
           else lo if lo < 0 else (hi + 1) // 2)
    out = [nan if np.isnan(v) else lo if v == -np.inf else hi if v == np.inf
           else min(max(int(_ROUND[mode](v)), lo), hi) for v in x.astype(np.float64)]
    return np.array(out, dtype=dtype)


def _conversion_inputs() -> tuple[np.ndarray, np.ndarray]:
    special = [np.nan, np.inf, -np.inf, 3e9, -3e9, 5e9, 1e20, -1e20, 9.3e18, 1.9e19, -9.3e18,
               2.5, -2.5, 0.5, 1.5, -0.5, -0.7, 0.7, -1.0, 2147483520.0, -2147483648.0,
               4294967040.0, 2.0**31, 2.0**32, 2.0**63, 2.0**64, 1e-30, -0.0]
    rng = _rng()
    x = np.concatenate([special, rng.standard_normal(36) * 10.0 ** rng.integers(0, 12, 36)])
    xd = np.concatenate([x[:-4], [2147483647.5, -2147483648.5, 4294967295.4, 2147483647.7]])
    return x.astype(np.float32), xd


_INT_TYPES = (np.int32, np.uint32, np.int64, np.uint64)


def conversions(kernel: str) -> Callable:
    def run(d: types.SimpleNamespace) -> tuple:
        x, xd = _conversion_inputs()
        n = len(x)
        modes = ("rz",) if kernel == "casts" else ("rn", "rz", "ru", "rd")
        outs = [np.zeros(len(modes) * n, t) for t in _INT_TYPES * 2]
        d.mod("numeric.cu").get_function(kernel)(
            d.drv.In(x), d.drv.In(xd), np.int32(n), *(d.drv.Out(o) for o in outs),
            block=(64, 1, 1), grid=((n + 63) // 64, 1))
        want = [np.concatenate([cuda_int(src, t, m) for m in modes])
                for src in (x, xd) for t in _INT_TYPES]
        as_int = [np.array([int(v) for v in o], dtype=object) for o in (*outs, *want)]
        got, exp = np.concatenate(as_int[:8]), np.concatenate(as_int[8:])
        return (got == exp).astype(np.int64), np.ones(len(got), np.int64)
    return run


def implicit_conversions(d: types.SimpleNamespace) -> tuple:
    x, xd = _conversion_inputs()
    n = len(x)
    outs = [np.zeros(n, t) for t in (*_INT_TYPES, np.int32, np.int32, np.int32)]
    d.mod("numeric.cu").get_function("implicit")(
        d.drv.In(x), d.drv.In(xd), np.int32(n), *(d.drv.Out(o) for o in outs),
        block=(64, 1, 1), grid=((n + 63) // 64, 1))
    tenths = (x * np.float32(10)).astype(np.float32)
    want = [cuda_int(x, np.int32), cuda_int(x, np.uint32), cuda_int(xd, np.int64),
            cuda_int(xd, np.uint64), cuda_int(x, np.int32), cuda_int(tenths, np.int32),
            cuda_int((np.float32(5) + x).astype(np.float32), np.int32)]
    same = np.concatenate([np.array([int(v) for v in o], dtype=object) ==
                           np.array([int(v) for v in w], dtype=object)
                           for o, w in zip(outs, want, strict=True)])
    return same.astype(np.int64), np.ones(len(same), np.int64)


def narrow_casts(d: types.SimpleNamespace) -> tuple:
    x, _ = _conversion_inputs()
    x = np.concatenate([x, [-5.0, 300.0, 70000.0, -70000.0, 200.7, -129.5]]).astype(np.float32)
    n = len(x)
    outs = [np.zeros(n, t) for t in (np.uint8, np.int8, np.int16, np.uint16, np.uint8)]
    d.mod("numeric.cu").get_function("narrow_casts")(
        d.drv.In(x), np.int32(n), *(d.drv.Out(o) for o in outs), block=(128, 1, 1))
    half = (x * np.float32(0.5)).astype(np.float32)
    want = [cuda_int(x, np.uint32) & 0xFF, cuda_int(x, np.int32) & 0xFF,
            cuda_int(x, np.int32) & 0xFFFF, cuda_int(x, np.uint32) & 0xFFFF,
            cuda_int(half, np.uint32) & 0xFF]
    got = [o.view(np.uint8 if o.itemsize == 1 else np.uint16) for o in outs]
    return (np.concatenate(got).astype(np.int64),
            np.concatenate([w.astype(np.int64) for w in want]))


def histogram_clamp(d: types.SimpleNamespace) -> tuple:
    x = np.concatenate([_rng().uniform(-0.5, 1.5, 500),
                        [np.nan] * 7 + [np.inf] * 5 + [-np.inf] * 3 + [1e10, -1e10]])
    x = x.astype(np.float32)
    bins = np.zeros(10, np.uint32)
    d.mod("numeric.cu").get_function("histogram_clamp")(
        d.drv.In(x), np.int32(len(x)), d.drv.InOut(bins), block=(128, 1, 1),
        grid=((len(x) + 127) // 128, 1))
    b = np.clip(cuda_int((x * np.float32(10)).astype(np.float32), np.int32), 0, 9)
    return bins, np.bincount(b, minlength=10)


def _nearest(fr: Fraction, dtype: type, mode: str = "rn") -> float:
    """``fr`` rounded to ``dtype`` (float32/float64) in ``mode``, exactly."""
    return _round_by(lambda c: (c > fr) - (c < fr), float(fr), dtype, mode)


def _round_by(cmp: Callable[[Fraction], int], approx: float, dtype: type, mode: str) -> float:
    """Round the exact value that ``cmp`` compares candidates with (sign of candidate -
    value) in ``mode``: one of the neighbours of ``approx`` in ``dtype``."""
    c0 = dtype(approx)
    cands = sorted({dtype(np.nextafter(c0, dtype(-np.inf))), c0,
                    dtype(np.nextafter(c0, dtype(np.inf)))})
    below = [c for c in cands if cmp(Fraction(float(c))) <= 0]
    above = [c for c in cands if cmp(Fraction(float(c))) >= 0]
    lo, hi = max(below), min(above)
    if mode == "rd" or (mode == "rz" and lo >= 0 and hi > 0):
        return float(lo)
    if mode == "ru" or mode == "rz":
        return float(hi)
    if lo == hi:
        return float(lo)
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    s = cmp(mid)
    if s != 0:
        return float(lo) if s > 0 else float(hi)
    bits = np.array([lo], dtype).view(np.uint32 if dtype == np.float32 else np.uint64)[0]
    return float(lo) if int(bits) % 2 == 0 else float(hi)


def _sqrt_round(x: float, dtype: type, mode: str) -> float:
    fx = Fraction(x)
    return _round_by(lambda c: (c * c > fx) - (c * c < fx) if c >= 0 else -1,
                     float(np.sqrt(x)), dtype, mode)


def fmad(*options: str) -> Callable:
    def run(d: types.SimpleNamespace) -> tuple:
        rng = _rng()
        n = 256
        a, b = (rng.uniform(1, 2, n).astype(np.float32) for _ in range(2))
        c = -rng.uniform(1, 4, n).astype(np.float32)
        da, db = (rng.uniform(1, 2, n) for _ in range(2))
        dc = da * db  # a*b - c: the product's rounding error, when fused
        out, dout, dot = np.zeros(n, np.float32), np.zeros(n), np.zeros(1, np.float32)
        d.mod("numeric.cu", *options).get_function("fmad")(
            d.drv.In(a), d.drv.In(b), d.drv.In(c), d.drv.In(da), d.drv.In(db), d.drv.In(dc),
            d.drv.Out(out), d.drv.Out(dout), np.int32(n), d.drv.Out(dot), block=(128, 1, 1),
            grid=(2, 1))
        fused = "--fmad=false" not in options
        F = [Fraction(float(v)) for v in (*a, *b, *c)]
        if fused:
            want = [_nearest(F[i] * F[n + i] + F[2 * n + i], np.float32) for i in range(n)]
            dwant = [_nearest(Fraction(x) * Fraction(y) - Fraction(z), np.float64)
                     for x, y, z in zip(da, db, dc, strict=True)]
            acc = np.float32(0)
            for i in range(n):
                acc = np.float32(_nearest(F[i] * F[n + i] + Fraction(float(acc)), np.float32))
        else:
            want = (a * b + c).astype(np.float32)  # NumPy rounds the product, then the sum
            dwant = da * db - dc
            acc = np.float32(0)
            for i in range(n):
                acc = np.float32(acc + np.float32(a[i] * b[i]))
        return (np.concatenate([out, dout, dot]),
                np.concatenate([np.asarray(want, np.float64), dwant, [float(acc)]]))
    return run


_FLOAT_OPS = ("fadd", "fsub", "fmul", "fdiv", "fmaf", "frcp", "fsqrt", "int2float",
              "uint2float", "ll2float", "ull2float", "double2float")
_DOUBLE_OPS = ("dadd", "dsub", "dmul", "ddiv", "fma", "drcp", "dsqrt", "ll2double",
               "ull2double")


def rounding(d: types.SimpleNamespace) -> tuple:
    rng = _rng()
    n = 64
    x, y, z = ((rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
               for _ in range(3))
    dx, dy, dz = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n) for _ in range(3))
    ls = rng.integers(-2**62, 2**62, n, dtype=np.int64)
    f = np.zeros(len(_FLOAT_OPS) * 4 * n, np.float32)
    dd = np.zeros(len(_DOUBLE_OPS) * 4 * n)
    d.mod("numeric.cu").get_function("rounding")(
        *(d.drv.In(v) for v in (x, y, z, dx, dy, dz, ls)), np.int32(n), d.drv.Out(f),
        d.drv.Out(dd), block=(64, 1, 1))
    want_f, want_d = [], []
    for mode in ("rn", "rz", "ru", "rd"):
        for op in _FLOAT_OPS:
            for t in range(n):
                X, Y, Z = (Fraction(float(v[t])) for v in (x, y, z))
                i = int(ls[t]) >> 33
                exact = {"fadd": X + Y, "fsub": X - Y, "fmul": X * Y, "fdiv": X / Y,
                         "fmaf": X * Y + Z, "frcp": 1 / Y, "int2float": Fraction(i),
                         "uint2float": Fraction((i * 3) % 2**32), "ll2float": Fraction(int(ls[t])),
                         "ull2float": Fraction((int(ls[t]) * 3) % 2**64),
                         "double2float": Fraction(float(dx[t]))}
                want_f.append(_sqrt_round(abs(float(x[t])), np.float32, mode) if op == "fsqrt"
                              else _nearest(exact[op], np.float32, mode))
        for op in _DOUBLE_OPS:
            for t in range(n):
                X, Y, Z = (Fraction(float(v[t])) for v in (dx, dy, dz))
                exact = {"dadd": X + Y, "dsub": X - Y, "dmul": X * Y, "ddiv": X / Y,
                         "fma": X * Y + Z, "drcp": 1 / Y, "ll2double": Fraction(int(ls[t])),
                         "ull2double": Fraction((int(ls[t]) * 3) % 2**64)}
                want_d.append(_sqrt_round(abs(float(dx[t])), np.float64, mode)
                              if op == "dsqrt" else _nearest(exact[op], np.float64, mode))
    got = np.concatenate([f.astype(np.float64), dd])
    want = np.array(want_f + want_d)
    return (got == want).astype(np.int64), np.ones(len(got), np.int64)


# ---- 7. integer intrinsics and CUDA-only math ---------------------------------------------------
def _lanes(v: int, w: int, signed: bool) -> list[int]:
    out = []
    for i in range(32 // w):
        u = (v >> (w * i)) & ((1 << w) - 1)
        out.append(u - (1 << w) if signed and u >> (w - 1) else u)
    return out


def _pack(vals: list[int], w: int) -> int:
    return sum((v & ((1 << w) - 1)) << (w * i) for i, v in enumerate(vals))


def _simd(a: int, b: int, w: int, fn: Callable) -> int:
    sa, sb, ua, ub = (_lanes(a, w, True), _lanes(b, w, True), _lanes(a, w, False),
                      _lanes(b, w, False))
    smin, smax, umax = -(1 << (w - 1)), (1 << (w - 1)) - 1, (1 << w) - 1

    def clamp(v: int, lo: int, hi: int) -> int:
        return max(lo, min(hi, v))

    return _pack([fn(sa[i], sb[i], ua[i], ub[i], smin, smax, umax, clamp)
                  for i in range(len(sa))], w)


_SIMD = {
    "vadd": lambda sa, sb, ua, ub, lo, hi, um, c: ua + ub,
    "vsub": lambda sa, sb, ua, ub, lo, hi, um, c: ua - ub,
    "vaddss": lambda sa, sb, ua, ub, lo, hi, um, c: c(sa + sb, lo, hi),
    "vsubss": lambda sa, sb, ua, ub, lo, hi, um, c: c(sa - sb, lo, hi),
    "vaddus": lambda sa, sb, ua, ub, lo, hi, um, c: c(ua + ub, 0, um),
    "vsubus": lambda sa, sb, ua, ub, lo, hi, um, c: c(ua - ub, 0, um),
    "vabsdiffs": lambda sa, sb, ua, ub, lo, hi, um, c: abs(sa - sb),
    "vabsdiffu": lambda sa, sb, ua, ub, lo, hi, um, c: abs(ua - ub),
    "vavgs": lambda sa, sb, ua, ub, lo, hi, um, c: (sa + sb) >> 1 if sa + sb < 0
    else (sa + sb + 1) >> 1,
    "vavgu": lambda sa, sb, ua, ub, lo, hi, um, c: (ua + ub + 1) >> 1,
    "vhaddu": lambda sa, sb, ua, ub, lo, hi, um, c: (ua + ub) >> 1,
    "vmaxs": lambda sa, sb, ua, ub, lo, hi, um, c: max(sa, sb),
    "vmaxu": lambda sa, sb, ua, ub, lo, hi, um, c: max(ua, ub),
    "vmins": lambda sa, sb, ua, ub, lo, hi, um, c: min(sa, sb),
    "vminu": lambda sa, sb, ua, ub, lo, hi, um, c: min(ua, ub),
}
_CMP = {"eq": lambda s, t, u, v: u == v, "ne": lambda s, t, u, v: u != v,
        "ges": lambda s, t, u, v: s >= t, "geu": lambda s, t, u, v: u >= v,
        "gts": lambda s, t, u, v: s > t, "gtu": lambda s, t, u, v: u > v,
        "les": lambda s, t, u, v: s <= t, "leu": lambda s, t, u, v: u <= v,
        "lts": lambda s, t, u, v: s < t, "ltu": lambda s, t, u, v: u < v}
for _k, _f in _CMP.items():
    _SIMD[f"vcmp{_k}"] = (lambda f: lambda sa, sb, ua, ub, lo, hi, um, c:
                          -1 if f(sa, sb, ua, ub) else 0)(_f)
for _k, _f in _CMP.items():
    _SIMD[f"vset{_k}"] = (lambda f: lambda sa, sb, ua, ub, lo, hi, um, c:
                          int(f(sa, sb, ua, ub)))(_f)


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _fns(mask: int, base: int, offset: int) -> int:
    if offset == 0:
        return base if mask >> base & 1 else 0xFFFFFFFF
    pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if mask >> pos & 1:
            if count == 0:
                return pos
            count -= 1
        pos += inc
    return 0xFFFFFFFF


def _brev(v: int, bits: int) -> int:
    return int(f"{v:0{bits}b}"[::-1], 2)


def integer_rows(a: int, b: int, c: int) -> tuple[list[int], list[int]]:
    """The integer_ops kernel's rows for one thread, by CUDA's definitions."""
    sa, sb, sc = _s32(a), _s32(b), _s32(c)
    word = (b << 32) | a

    def dot(x: int, y: int, wx: int, n: int, y0: int, signed: bool) -> int:
        lx, ly = _lanes(x, wx, signed), _lanes(y, 8, signed)
        return sum(lx[i] * ly[y0 + i] for i in range(n))

    rows = [
        sum(((word >> (8 * ((c >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4)),
        ((word << (c & 31)) >> 32), ((word << min(c & 63, 32)) >> 32),
        word >> (c & 31), word >> min(c & 63, 32),
        sc + dot(a, b, 8, 4, 0, True), c + dot(a, b, 8, 4, 0, False),
        sc + dot(a, b, 16, 2, 0, True), sc + dot(a, b, 16, 2, 2, True),
        c + dot(a, b, 16, 2, 0, False), c + dot(a, b, 16, 2, 2, False),
        c + abs(sa - sb), c + abs(a - b), (sa * sb) >> 32, (a * b) >> 32,
        (sa + sb) >> 1, (sa + sb + 1) >> 1, (a + b) >> 1, (a + b + 1) >> 1,
        _brev(a, 32), 32 - a.bit_length(),
        (a & -a).bit_length(), bin(a).count("1"), _fns(a, c & 31, b % 7 - 3),
    ]
    for name in ("vadd", "vsub", "vaddss", "vsubss", "vaddus", "vsubus", "vabsdiffs",
                 "vabsdiffu", "vavgs", "vavgu", "vhaddu", "vmaxs", "vmaxu", "vmins", "vminu",
                 *(f"vcmp{k}" for k in _CMP), *(f"vset{k}" for k in _CMP)):
        rows += [_simd(a, b, 16, _SIMD[name]), _simd(a, b, 8, _SIMD[name])]
    for signed in (True, False):
        rows += [sum(abs(x - y) for x, y in zip(_lanes(a, w, signed), _lanes(b, w, signed),
                                                strict=True)) for w in (16, 8)]
    rows += [_pack([abs(v) for v in _lanes(a, w, True)], w) for w in (16, 8)]
    lo = [-(1 << (w - 1)) for w in (16, 8)]
    rows += [_pack([min(abs(v), -lo[k] - 1) for v in _lanes(a, w, True)], w)
             for k, w in enumerate((16, 8))]
    rows += [_pack([-v for v in _lanes(a, w, True)], w) for w in (16, 8)]
    rows += [_pack([max(lo[k], min(-lo[k] - 1, -v)) for v in _lanes(a, w, True)], w)
             for k, w in enumerate((16, 8))]
    x, y = (a << 32) | b, (c << 32) | a
    sx, sy = (v - (1 << 64) if v >> 63 else v for v in (x, y))
    wide = [(sx * sy) >> 64, (x * y) >> 64, _brev(x, 64),
            64 - (x >> (c & 63)).bit_length(),
            ((x << (c & 63)) & (2**64 - 1) & -((x << (c & 63)) & (2**64 - 1))).bit_length(),
            bin(x).count("1")]
    return [v & 0xFFFFFFFF for v in rows], [v & (2**64 - 1) for v in wide]


def integer_ops(d: types.SimpleNamespace) -> tuple:
    rng = _rng()
    n = 64
    special = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80008000, 0x7F7F7F7F, 0x80808080]
    a, b, c = (np.concatenate([special, rng.integers(0, 2**32, n - 8)]).astype(np.uint32)
               for _ in range(3))
    b = np.roll(b, 3)
    rows = [integer_rows(int(a[t]), int(b[t]), int(c[t])) for t in range(n)]
    nrows, nwide = len(rows[0][0]), len(rows[0][1])
    out = np.zeros(nrows * n, np.uint32)
    wide = np.zeros(nwide * n, np.uint64)
    d.mod("intrinsics.cu").get_function("integer_ops")(
        d.drv.In(a), d.drv.In(b), d.drv.In(c), np.int32(n), d.drv.Out(out), d.drv.Out(wide),
        block=(64, 1, 1))
    want = np.array([rows[t][0][k] for k in range(nrows) for t in range(n)], dtype=object)
    wwant = np.array([rows[t][1][k] for k in range(nwide) for t in range(n)], dtype=object)
    got = np.concatenate([out.astype(object), wide.astype(object)])
    same = got == np.concatenate([want, wwant])
    return same.astype(np.int64), np.ones(len(same), np.int64)


def _erfinv(y: float) -> float:
    if y in (1.0, -1.0):
        return math.copysign(math.inf, y)
    x = 0.0
    for _ in range(100):  # Newton on math.erf, from 0
        step = (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if abs(step) < 1e-17 * max(1.0, abs(x)):
            break
    return x


def _bessel_i(nu: int, x: float) -> float:
    return sum((x / 2) ** (2 * k + nu) / (math.factorial(k) * math.factorial(k + nu))
               for k in range(60))


def _sinpi(x: float) -> float:
    """sin(pi x) with the argument reduced exactly (0 at integers, +-1 at halves)."""
    r = math.remainder(x, 2.0)
    if abs(r) > 0.5:
        r = math.copysign(1.0, r) - r
    return math.sin(math.pi * r)


def _math_row(x: float, p: float) -> list[float]:
    """sinpif ... fdividef for one thread, in float64 (x in float32, p = 0.5 + x / 8.1)."""
    sinpi, cospi = _sinpi(x), _sinpi(x + 0.5)
    r = math.sqrt(x * x + p * p + 2.25)
    r4 = math.sqrt(x * x + p * p + 2.25 + 4.0)
    erfcx = math.exp(x * x) * math.erfc(x)
    return [sinpi, cospi, sinpi, cospi, 1 / math.copysign(abs(x) ** (1 / 3), x),
            0.5 * math.erfc(-x / math.sqrt(2)), math.sqrt(2) * _erfinv(2 * p - 1),
            _erfinv(2 * p - 1), _erfinv(1 - 2 * p), erfcx, 10.0 ** x,
            1 / math.hypot(x, p), r, 1 / r, r4, 1 / r4, r, 1 / r, _bessel_i(0, x),
            _bessel_i(1, x), x / p]


def cuda_math(d: types.SimpleNamespace) -> tuple:
    n = 64
    x = _rng().uniform(-3.9, 3.9, n).astype(np.float32)
    x[:4] = [0.25, -1.5, 3.0, 1e-3]
    nf, nd = 21, 20
    out, dout = np.zeros(nf * n, np.float32), np.zeros(nd * n)
    d.mod("intrinsics.cu").get_function("cuda_math")(d.drv.In(x), np.int32(n), d.drv.Out(out),
                                                     d.drv.Out(dout), block=(64, 1, 1))
    xs = [float(v) for v in x]
    ps = [float(np.float32(0.5) + v / np.float32(8.1)) for v in x]
    rows = [_math_row(xs[t], ps[t]) for t in range(n)]
    want = np.array([[rows[t][k] for t in range(n)] for k in range(nf)])
    dps = [float(np.float64(np.float32(0.5) + v / np.float32(8.1))) for v in x]
    drows = [_math_row(xs[t], dps[t]) for t in range(n)]
    dwant = np.array([[drows[t][k] for t in range(n)] for k in range(nd)])
    # within CUDA's documented bound in ulps (plus one for the reference's rounding) for
    # float, and 1e-13 for double
    ulps = np.array([1, 1, 1, 1, 1, 5, 5, 2, 4, 4, 2, 2, 2, 2, 2, 2, 4, 4, 6, 6, 2])[:, None] + 1
    ok_f = np.abs(out.reshape(nf, n) - want) <= ulps * np.spacing(np.abs(want).astype(np.float32))
    ok_d = np.abs(dout.reshape(nd, n) - dwant) <= 1e-13 * np.abs(dwant) + 1e-300
    ok = np.concatenate([ok_f.ravel(), ok_d.ravel()])
    return ok.astype(np.int64), np.ones(len(ok), np.int64)


# ---- 8. shuffles of every width ------------------------------------------------------------------
def ptx_shuffle(mode: str, lane: int, b: int, width: int) -> int:
    """The source lane of PTX's shfl.sync for ``__shfl*_sync(mask, v, b, width)`` (CUDA's
    c operand: ((32 - width) << 8) | (up ? 0 : 31)), or the lane itself."""
    seg, bval = (32 - width) & 31, b & 31
    clamp = 0 if mode == "up" else 31
    max_lane = (lane & seg) | (clamp & ~seg & 31)
    if mode == "idx":
        j = (lane & seg) | (bval & ~seg & 31)
        return j if j <= max_lane else lane
    j = {"up": lane - bval, "down": lane + bval, "xor": lane ^ bval}[mode]
    ok = j >= max_lane if mode == "up" else j <= max_lane
    return j if ok else lane


def shuffle_widths(d: types.SimpleNamespace) -> tuple:
    offsets = [*range(8), 8, 13, 18, 23, 28, 33]
    widths = [1, 2, 4, 8, 16, 32, 3, 12, 64]
    out = np.zeros(len(widths) * len(offsets) * 4 * 32, np.int32)
    d.mod("shuffle_width.cu").get_function("shfl_widths")(d.drv.Out(out), block=(32, 1, 1))
    want = [10 * ptx_shuffle(mode, lane, off, w) + 1 for w in widths for off in offsets
            for mode in ("idx", "up", "down", "xor") for lane in range(32)]
    return out, np.array(want)


def segment_sums(d: types.SimpleNamespace) -> tuple:
    x = _rng().integers(-20, 20, 128).astype(np.float32)
    s16, s8, last = (np.zeros(128, np.float32) for _ in range(3))
    d8 = np.zeros(128)
    d.mod("shuffle_width.cu").get_function("segment_sums")(
        d.drv.In(x), d.drv.Out(s16), d.drv.Out(s8), d.drv.Out(d8), d.drv.Out(last),
        block=(64, 1, 1), grid=(2, 1))
    seg16 = np.repeat(x.reshape(-1, 16).sum(1), 16)
    seg8 = np.repeat(x.reshape(-1, 8).sum(1), 8)
    return (np.concatenate([s16, s8, d8, last]),
            np.concatenate([seg16, seg8, seg8, np.repeat(x.reshape(-1, 8)[:, 7], 8)]))


# ---- 9. shared arrays in device functions, constant memory from the host --------------------
def block_reduce_sum(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(100_000).astype(np.float32)
    blocks = 24
    out, pos = np.zeros(blocks, np.float32), np.zeros(blocks, np.int32)
    d.mod("device_scope.cu").get_function("deviceReduceKernel")(
        d.drv.In(x), d.drv.Out(out), d.drv.Out(pos), np.int32(len(x)), block=(512, 1, 1),
        grid=(blocks, 1))
    first = x[:blocks * 512].reshape(blocks, 512)
    return (np.concatenate([[out.astype(np.float64).sum()], pos]),
            np.concatenate([[x.astype(np.float64).sum()], (first > 0).sum(1)]))


def constant_mask_2d(d: types.SimpleNamespace) -> tuple:
    mod = d.mod("device_scope.cu")
    n = 37
    rng = _rng()
    m = rng.integers(-3, 4, 25).astype(np.int32)
    ptr, size = mod.get_global("mask")
    d.drv.memcpy_htod(ptr, m)
    a = rng.integers(0, 10, (n, n)).astype(np.int32)
    r = np.zeros_like(a)
    mod.get_function("convolution_2d")(d.drv.In(a), d.drv.Out(r), np.int32(n),
                                       block=(16, 16, 1), grid=(3, 3))
    pad = np.pad(a.astype(np.int64), 2)
    want = sum(m[i * 5 + j] * pad[i:i + n, j:j + n] for i in range(5) for j in range(5))
    return np.append(r, size), np.append(want, 100)


def constant_filter_tiled(d: types.SimpleNamespace) -> tuple:
    mod = d.mod("device_scope.cu")
    rng = _rng()
    f = rng.standard_normal((5, 5)).astype(np.float32)
    ptr, size = mod.get_global("F_c")
    d.drv.memcpy_htod(ptr, f)
    h, w = 70, 90
    a = rng.standard_normal((h, w)).astype(np.float32)
    p = np.zeros_like(a)
    mod.get_function("convolution_tiled_2D_const_mem_kernel")(
        d.drv.In(a), d.drv.Out(p), np.int32(w), np.int32(h), block=(32, 32, 1),
        grid=((w + 27) // 28, (h + 27) // 28))
    pad = np.pad(a.astype(np.float64), 2)
    want = sum(float(f[i, j]) * pad[i:i + h, j:j + w] for i in range(5) for j in range(5))
    return np.append(p, size), np.append(want, 100)


# ---- 10. cooperative groups --------------------------------------------------------------------
def coop(d: types.SimpleNamespace) -> object:
    """coop.cu, compiled as nvcc takes cooperative_groups: outside PyCUDA's extern "C"."""
    return d.mod("coop.cu", no_extern_c=True)


def cg_block_sum(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(4 * 256).astype(np.float32)
    out = np.zeros(4, np.float32)
    coop(d).get_function("block_sum")(d.drv.In(x), d.drv.Out(out), block=(256, 1, 1),
                                               grid=(4, 1))
    return out, x.reshape(4, 256).astype(np.float64).sum(1)


def _tile_rows(x: np.ndarray, s: int) -> list[np.ndarray]:
    n = len(x)
    t = x.reshape(-1, s).astype(np.int64)
    rank = np.arange(n) % s
    own = x.astype(np.int64)

    def tiled(v: np.ndarray) -> np.ndarray:
        return np.repeat(v, s)

    src1 = np.arange(n) - rank + (1 % s)
    xor1 = np.arange(n) ^ 1 if s > 1 else np.arange(n)
    up = np.where(rank >= 1, np.arange(n) - 1, np.arange(n))
    down = np.where(rank + 1 < s, np.arange(n) + 1, np.arange(n))
    ballot = tiled(np.array([sum(1 << k for k in range(s) if row[k] > 0) for row in t]))
    incl = np.cumsum(t, 1).ravel()
    return [tiled(t.sum(1)), tiled(t.max(1)), tiled(t.min(1)), own[src1], own[xor1], own[up],
            own[down], ballot, tiled((t > 90).any(1)), tiled((t > -90).all(1)), incl,
            incl - own, rank, np.arange(n) // s]


def cg_tiles(d: types.SimpleNamespace) -> tuple:
    x = _rng().integers(-100, 100, 128).astype(np.int32)
    out = np.zeros(56 * 128, np.int32)
    coop(d).get_function("tiles")(d.drv.In(x), d.drv.Out(out), block=(128, 1, 1))
    want = np.concatenate([np.concatenate(_tile_rows(x, s)) for s in (16, 8, 4, 2)])
    return out.astype(np.int64), want


def cg_groups(d: types.SimpleNamespace) -> tuple:
    x = _rng().integers(0, 100, 64).astype(np.int32)
    outs = [np.zeros(64, np.int32) for _ in range(3)]
    coop(d).get_function("groups")(d.drv.In(x), *(d.drv.Out(o) for o in outs),
                                            block=(64, 1, 1))
    part = np.arange(64) % 8 + 800
    odd_sum, odd_rank = np.full(64, -1), np.full(64, -1)
    for w in range(2):
        lanes = [i for i in range(32 * w, 32 * w + 32) if x[i] % 2]
        for r, i in enumerate(lanes):
            odd_sum[i] = sum(int(x[j]) for j in lanes)
            odd_rank[i] = r + 100 * len(lanes)
    return np.concatenate(outs).astype(np.int64), np.concatenate([part, odd_sum, odd_rank])


def misaligned_rows(k: int) -> Callable:
    """float4 loads of a matrix's rows (no alignment test): right at K = 32, a
    "misaligned address" at K = 33 (row 1 starts 4 bytes past a multiple of 16)."""
    def run(d: types.SimpleNamespace) -> tuple:
        a = _rng().standard_normal(4 * k).astype(np.float32)
        out = np.zeros(4 * k, np.float32)
        d.mod("misaligned.cu").get_function("rows_vec4")(
            d.drv.In(a), d.drv.InOut(out), np.int32(k), block=(32, 1, 1), grid=(4, 1))
        want = np.zeros(4 * k, np.float64)
        for r in range(4):
            for q in range(k // 4):
                want[r * k + 4 * q] = a[r * k + 4 * q:r * k + 4 * q + 4].astype(np.float64).sum()
        return out, want
    return run


def misaligned_carve(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    d.mod("misaligned.cu").get_function("carved_double")(
        d.drv.In(x), d.drv.Out(out), block=(64, 1, 1), shared=100 + 64 * 8)
    return out, np.roll(x, -1).astype(np.float64) + 1


def misaligned_tile(d: types.SimpleNamespace) -> tuple:
    x = _rng().standard_normal(8 * 33).astype(np.float32)
    out = np.zeros(64, np.float32)
    d.mod("misaligned.cu").get_function("padded_tile_vec4")(
        d.drv.In(x), d.drv.Out(out), block=(64, 1, 1))
    t = x.reshape(8, 33)[:, :32].reshape(8, 8, 4).sum(2).ravel()
    return out, t.astype(np.float64)


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
    Case("casts_saturate_nan_to_zero", "numeric", conversions("casts")),
    Case("conversion_intrinsics_4_modes", "numeric", conversions("convert_modes")),
    Case("implicit_conversions", "numeric", implicit_conversions),
    Case("narrow_casts_char_short", "numeric", narrow_casts, rtol=0, atol=0),
    Case("histogram_clamp_nan_inf", "numeric", histogram_clamp),
    Case("fmad_default_fused", "numeric", fmad(), rtol=0, atol=0),
    Case("fmad_false_rounds_twice", "numeric", fmad("--fmad=false"), rtol=0, atol=0),
    Case("rounding_mode_arithmetic", "numeric", rounding),
    Case("integer_intrinsics", "intrinsics", integer_ops),
    Case("cuda_only_math", "intrinsics", cuda_math),
    Case("shuffle_every_width_offset", "shuffle_width", shuffle_widths, rtol=0, atol=0),
    Case("segment_sums_width_16_8", "shuffle_width", segment_sums),
    Case("block_reduce_static_shared_in_device_fn", "device_scope", block_reduce_sum,
         rtol=1e-4, atol=1e-2),
    Case("constant_mask_2d_get_global", "device_scope", constant_mask_2d, rtol=0, atol=0),
    Case("constant_filter_tiled_2d", "device_scope", constant_filter_tiled),
    Case("cg_block_sum_tiles", "cooperative_groups", cg_block_sum),
    Case("cg_tiles_16_8_4_2", "cooperative_groups", cg_tiles, rtol=0, atol=0),
    Case("cg_dynamic_partition_coalesced", "cooperative_groups", cg_groups, rtol=0, atol=0),
    Case("vec4_rows_k32_aligned", "misaligned", misaligned_rows(32)),
    Case("vec4_rows_k33_misaligned", "misaligned", misaligned_rows(33),
         refuse=r"misaligned address"),
    Case("double_after_char100_dynamic", "misaligned", misaligned_carve,
         refuse=r"misaligned address"),
    Case("float4_from_tile_padded_by_one", "misaligned", misaligned_tile,
         refuse=r"misaligned address"),
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


#: cases that take many seconds on a CPU (marked slow: `make quick` leaves them out)
SLOW_CASES = {"matmul_regblock_missing_barrier_race"}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.id in SLOW_CASES else [])
    for c in CASES])
def test_fidelity_case(case: Case, emu_backend: types.SimpleNamespace) -> None:
    if case.nvcc and not shutil.which(os.environ.get("TILELAB_EMU_NVCC", "nvcc") or "-"):
        pytest.skip("the emulator counts registers with nvcc's ptxas, which is not installed")
    outcome, detail = classify(case, emu_backend)
    assert outcome == "right", detail


# What a CPU cannot do: refused before compiling, saying so and what to do instead.
CPU_LIMITS = {
    "grid_sync": ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
                  "__global__ void k(float* x) {\n  cg::grid_group g = cg::this_grid();\n"
                  "  x[g.thread_rank()] = 1.0f;\n  g.sync();\n}\n",
                  r"blocks that wait on each other.*run this kernel on a GPU, or split the "
                  r"kernel into two launches"),
    "half": ("#include <cuda_fp16.h>\n__global__ void k(__half* x) { x[0] = x[1]; }\n",
             r"half precision.*run this kernel on a GPU \(or use float\)"),
}


@pytest.mark.parametrize("key", CPU_LIMITS)
def test_what_a_cpu_cannot_do_is_refused_with_what_to_do(key):
    src, message = CPU_LIMITS[key]
    with pytest.raises(emu.UnsupportedConstruct, match=message):
        emu.SourceModule(src)


def test_a_block_waiting_for_another_is_stopped_with_what_to_do():
    src = ("__global__ void k(volatile int* flag) {\n"  # each block waits for the other
           "  flag[blockIdx.x] = 1;\n"
           "  while (flag[1 - blockIdx.x] == 0) {}\n}\n")
    f = emu.SourceModule(src).get_function("k")
    flag = np.zeros(2, np.int32)
    with pytest.raises(emu.KernelTimeout, match="blocks cannot wait on each other"):
        f(emu.InOut(flag), block=(1, 1, 1), grid=(2, 1), timeout=2)


@pytest.mark.parametrize(("options", "fused"), [
    ((), True), (("--fmad=false",), False), (("-fmad=false",), False),
    (("--fmad", "false"), False), (("--fmad=false", "--fmad=true"), True),
    (("--use_fast_math",), True), (("-DX=1", "--fmad=0"), False),
])
def test_fmad_option_is_read_as_nvcc_reads_it(options, fused):
    assert fmad_option(options) is fused


def per_class(outcomes: dict[str, tuple[str, str]]) -> str:
    """``class: right/total`` for each feature class of the suite."""
    by: dict[str, list[int]] = {}
    for c in CASES:
        if c.id in outcomes:
            row = by.setdefault(c.feature, [0, 0])
            row[0] += outcomes[c.id][0] == "right"
            row[1] += 1
    return ", ".join(f"{k} {r}/{t}" for k, (r, t) in by.items())


def summary(outcomes: dict[str, tuple[str, str]]) -> str:
    counts = {k: sum(1 for o, _ in outcomes.values() if o == k)
              for k in ("right", "refused", "wrong")}
    return (f"{counts['right']} right, {counts['refused']} refused with a message, "
            f"{counts['wrong']} wrong (of {len(outcomes)})")


def gpu_outcomes(case_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Cases on the GPU through PyCUDA, in one fresh process; if it fails (a kernel that
    faults leaves the CUDA context unusable), each of them again in a process of its own."""
    code = (
        "import json, sys, types\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
        "import pycuda.autoinit\n"
        "import pycuda.driver as drv, pycuda.gpuarray as gpuarray\n"
        "from pycuda.compiler import SourceModule\n"
        "import test_emu_fidelity as t\n"
        "gpu = t.backend(types.SimpleNamespace(**{k: getattr(drv, k) for k in dir(drv)},"
        " SourceModule=SourceModule), gpuarray)\n"
        f"for case in [c for c in t.CASES if c.id in {case_ids!r}]:\n"
        "    outcome = t.classify(case, gpu)\n"
        "    drv.Context.synchronize()\n"
        "    print(json.dumps([case.id, *outcome]), flush=True)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    found = {}
    for line in p.stdout.strip().splitlines():
        with contextlib.suppress(ValueError):
            cid, outcome, detail = json.loads(line)
            found[cid] = (outcome, detail)
    if p.returncode == 0 and len(found) == len(case_ids):
        return found
    if len(case_ids) > 1:
        return {cid: gpu_outcomes([cid])[cid] for cid in case_ids}
    err = " ".join((p.stderr or "").split())[-300:]
    return {case_ids[0]: ("wrong", f"the process failed (rc {p.returncode}): {err}")}


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
    # cases that may fault on a GPU (a bug it shows, a launch it refuses) run on their own
    risky = [c.id for c in cases if c.buggy or c.refuse]
    on_gpu = gpu_outcomes([c.id for c in cases if c.id not in risky])
    on_gpu.update({cid: gpu_outcomes([cid])[cid] for cid in risky})
    on_emu = {c.id: classify(c, emu_backend) for c in cases}
    differ = [c.id for c in cases if disagree(c, on_gpu[c.id], on_emu[c.id])]
    hidden = [c.id for c in cases if c.buggy and on_gpu[c.id][0] == "wrong"]
    print(f"\nper class on the GPU: {per_class(on_gpu)}\nper class on the emulator: "
          f"{per_class(on_emu)}")
    print(f"\nfidelity suite on the GPU: {summary(on_gpu)}; on the emulator: {summary(on_emu)}; "
          f"disagreements: {len(differ)}; bugs this GPU run hid and the emulator showed: "
          f"{hidden}" + "".join(
              f"\n  {c}: GPU {on_gpu[c][0]} ({on_gpu[c][1]}) / emulator {on_emu[c][0]} "
              f"({on_emu[c][1]})" for c in differ))
    assert not differ


def test_cooperative_groups_inside_extern_c_are_refused_as_nvcc_refuses_them():
    """PyCUDA wraps a source in extern "C" { } unless no_extern_c: nvcc rejects
    cooperative_groups' headers there (measured on an H100), and so does the emulator."""
    src = (KERNELS / "coop.cu").read_text()
    with pytest.raises(emu.CompileError, match="no_extern_c=True"):
        emu.SourceModule(src)
    assert emu.SourceModule(src, no_extern_c=True).get_function("tiles")


@pytest.mark.parametrize("tune", ["generic", "znver3", "sapphirerapids"])
def test_an_accumulating_loop_is_fused_whatever_the_cpu_tuning(tune, tmp_path):
    """nvcc fuses a loop's ``acc += x * y``; g++ tuned for some CPUs (znver, and generic from
    GCC 13) leaves such "FMA chains" unfused unless told otherwise, which made a dot product
    differ from the H100's in its last bit. The emulator's flags fuse it under every tuning."""
    flags = fma_flags()
    if flags is None or os.uname().machine != "x86_64":
        pytest.skip("needs an x86-64 CPU with FMA")
    src = tmp_path / "dot.cpp"
    src.write_text("float dot(const float* a, const float* b, int n) {\n"
                   "  float acc = 0; for (int i = 0; i < n; ++i) acc += a[i] * b[i];\n"
                   "  return acc; }\n")
    asm = subprocess.run([compiler()[0], "-std=c++17", "-O2", *flags, f"-mtune={tune}", "-S",
                          "-o", "-", str(src)], capture_output=True, text=True, check=True)
    assert "vfmadd" in asm.stdout
