"""``occupancy.json``: registers, shared memory and blocks per SM of each kernel."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD, compile_kernel

#: The kernels whose resources the book compares.
KERNEL_KEYS = (
    "naive",
    "tiled16",
    "tiled32",
    "tiled32_padded",
    "tiled32_at",
    "tiled32_at_padded",
    "transpose_shared",
    "transpose_padded",
)


def blocks_per_sm(limits: dict[str, int], threads: int, regs: int, smem: int) -> int:
    """The occupancy formula: the tightest of the block, thread, register (allocated per
    warp in units of 256) and shared-memory (plus 1 KiB reserved per block) limits."""
    warps = math.ceil(threads / 32)
    regs_block = math.ceil(regs * 32 / 256) * 256 * warps
    return min(
        limits["blocks"],
        limits["threads"] // threads,
        limits["registers"] // max(regs_block, 1),
        limits["shared"] // (smem + 1024) if smem else limits["blocks"],
    )


def run(rt: Runtime, out: Path) -> Path:
    import pycuda.driver as cuda

    dev = cuda.Context.get_device()
    attr = cuda.device_attribute
    limits = {
        "registers": dev.get_attribute(attr.MAX_REGISTERS_PER_MULTIPROCESSOR),
        "threads": dev.get_attribute(attr.MAX_THREADS_PER_MULTIPROCESSOR),
        "shared": dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        "blocks": dev.get_attribute(attr.MAX_BLOCKS_PER_MULTIPROCESSOR),
    }
    rows = []
    for key in KERNEL_KEYS:
        fn = compile_kernel(rt, key)
        threads = int(np.prod(KERNELS[key].launch.block))
        regs, smem = fn.num_regs, fn.shared_size_bytes
        limit = blocks_per_sm(limits, threads, regs, smem)
        rows.append(
            {
                "kernel": key,
                "threads_per_block": threads,
                "registers": regs,
                "shared_bytes": smem,
                "blocks_per_sm": limit,
                "occupancy": limit * threads / limits["threads"],
            }
        )
    return write(
        out,
        "occupancy",
        "Resources and occupancy of each kernel",
        "Registers and static shared memory as compiled (PyCUDA's function attributes); "
        "blocks per SM from the occupancy formula (threads, registers allocated per warp "
        "in units of 256, shared memory plus 1 KiB reserved per block).",
        {
            "kernel": "",
            "threads_per_block": "",
            "registers": "",
            "shared_bytes": "B",
            "blocks_per_sm": "",
            "occupancy": "",
        },
        rows,
        method=METHOD,
        kernels={k: KERNELS[k].source() for k in KERNEL_KEYS},
    )
