"""Run one kernel launch in a forked child and bring its results back.

The parent copies every buffer into one MAP_SHARED mapping made before the fork; the child
loads the library, lets the runtime map guarded copies, run the grid and write the results
back into that mapping, and reports as JSON on a pipe. Results reach the caller's buffers
only when the launch succeeded.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import seccomp
from .args import ArgPlan, BufferPlan
from .compile import Library
from .native import (
    REPORT_FD,
    BufSpec,
    ChildResult,
    KernelDesc,
    LaunchSpec,
    run_forked,
    shared_region,
)

PAGE = mmap.PAGESIZE


@dataclass
class Outcome:
    """The child's JSON report and how the child ended."""

    report: dict
    child: ChildResult


def _round(n: int) -> int:
    return (max(n, 1) + PAGE - 1) // PAGE * PAGE


def run(lib: Library, index: int, plan: ArgPlan, grid: tuple[int, int, int],
        block: tuple[int, int, int], shared: int, timeout: float,
        globals_: Sequence[np.ndarray] = (), stop: threading.Event | None = None,
        trace_block: int | None = None) -> Outcome:
    """Launch kernel ``index`` of ``lib``; copy results into the plan's sinks on success.
    Setting ``stop`` ends the launch at once (:func:`~tilelab.emu.native.run_forked`).
    ``trace_block``: an analysis build logs every global access of this block's threads
    (its linear index; see ``prelude/tilelab_emu_touch.h``).

    ``globals_`` holds the bytes of each of the library's device globals (uint8 arrays):
    they are copied in before the grid runs and updated after it succeeds.
    """
    first_global = len(plan.buffers)
    plan.buffers.extend(BufferPlan(g, 1, 16, g) for g in globals_)
    offsets, total = [], 0
    for b in plan.buffers:
        offsets.append(total)
        total += _round(b.nbytes)
    with shared_region(max(total, PAGE)) as (region, base):
        view = np.frombuffer(region, dtype=np.uint8)
        try:
            return _run(lib, index, plan, grid, block, shared, timeout, globals_, first_global,
                        offsets, view, base, stop, trace_block)
        finally:
            del view


def _run(lib: Library, index: int, plan: ArgPlan, grid: tuple[int, int, int],
         block: tuple[int, int, int], shared: int, timeout: float,
         globals_: Sequence[np.ndarray], first_global: int, offsets: list[int],
         view: np.ndarray, base: int, stop: threading.Event | None,
         trace_block: int | None = None) -> Outcome:
    """:func:`run`, its buffers laid out at ``offsets`` of ``view``, the shared mapping at
    address ``base``."""
    for b, off in zip(plan.buffers, offsets, strict=True):
        view[off:off + b.nbytes] = b.initial
    nparams = len(plan.scalars) + len(plan.pointers)
    keep = []
    args = (ctypes.c_void_p * max(nparams, 1))()
    arg_buf = (ctypes.c_int32 * max(nparams, 1))()
    arg_off = (ctypes.c_uint64 * max(nparams, 1))()
    for i in range(nparams):
        if i in plan.scalars:
            raw = plan.scalars[i]
            slot = ctypes.create_string_buffer(raw, max(len(raw), 16))
            arg_buf[i] = -1
        else:
            slot = ctypes.c_void_p(0)
            arg_buf[i], arg_off[i] = plan.pointers[i]
        keep.append(slot)
        args[i] = ctypes.addressof(slot)
    bufs = (BufSpec * max(len(plan.buffers), 1))()
    for k, (b, off) in enumerate(zip(plan.buffers, offsets, strict=True)):
        bufs[k] = BufSpec(base + off, b.nbytes, b.elem, b.align)
    global_buf = (ctypes.c_int32 * max(len(globals_), 1))(
        *range(first_global, first_global + len(globals_)))
    spec = LaunchSpec(len(plan.buffers), -1, args, bufs, arg_buf, arg_off,
                      (ctypes.c_uint32 * 3)(*grid), (ctypes.c_uint32 * 3)(*block), shared,
                      len(globals_), global_buf)
    path = str(lib.path)
    confined = seccomp.require()  # refuses where no filter can be made
    # both filters made here (once per process: cached), not again in every child
    grid = seccomp.Program(seccomp.grid_filter((1, 2, REPORT_FD))) if confined else None
    seccomp.prepare(confined)

    def child(fd: int, tag: bytes) -> None:
        spec.report_fd = fd
        spec.report_tag = tag
        seccomp.install_loading_filter(confined)
        so = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        if grid is not None:
            ctypes.c_void_p.in_dll(so, "tilelab_grid_filter").value = grid.address
        if trace_block is not None:
            ctypes.c_long.in_dll(so, "tilelab_trace_block").value = trace_block
        table = ctypes.addressof(KernelDesc.in_dll(so, "tilelab_kernels"))
        entry = so.tilelab_launch
        entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        entry.restype = ctypes.c_int
        entry(ctypes.addressof(spec), table + index * ctypes.sizeof(KernelDesc))

    result = run_forked(child, timeout, region=base, stop=stop)
    report = {"status": "forged"} if result.forged else _parse(result.report)
    if report.get("status") == "ok" and not result.timed_out:
        for b, off in zip(plan.buffers, offsets, strict=True):
            if b.sink is not None:
                b.sink[:] = view[off:off + b.nbytes]
    return Outcome(report, result)


def _parse(raw: bytes) -> dict:
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return {}
    try:
        return json.loads(text.splitlines()[0])
    except ValueError:
        return {"status": "error", "message": f"unreadable report: {text[:200]!r}"}
