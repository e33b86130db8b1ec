"""``sgemm_ptxas.json``: registers, shared memory, spills and occupancy of every step of
the road to cuBLAS, from ``nvcc --resource-usage`` (no GPU), with each step's traffic model
and, where cuobjdump is installed, its shared loads and FFMAs counted in the SASS."""

from __future__ import annotations

from pathlib import Path

from tilelab.catalog.road import kernel_refs
from tilelab.device.runtime import Runtime
from tilelab.experiments import road
from tilelab.experiments.datafile import write


def run(rt: Runtime | None, out: Path) -> Path:
    """Registers, shared memory and occupancy of every step, from ptxas (no GPU)."""
    # the GPU's limits: a device.json written beside this file, else the book's
    book_data = Path(__file__).resolve().parents[2] / "book" / "data"
    rows, gpu = road.ptxas_rows(out if (out / "device.json").is_file() else book_data)
    return write(
        out,
        "sgemm_ptxas",
        "Resources, occupancy and traffic of each step of the road to cuBLAS",
        "Registers, static shared memory and spills from `nvcc -cubin -arch=sm_90 "
        "--resource-usage` (no GPU involved); blocks per SM from the occupancy formula with "
        f"the limits of the {gpu} recorded in device.json (threads, registers allocated per "
        "warp in units of 256, shared memory plus 1 KiB reserved per block, 32 blocks). "
        "The traffic model counts from the tile sizes, caches ignored: bytes read from "
        "global memory per FMA, values a thread reads from shared memory per FMA, and FMAs "
        "per shared-load instruction at the widest width the step uses.",
        {
            "kernel": "",
            "step": "",
            "label": "",
            "threads_per_block": "",
            "registers": "",
            "shared_bytes": "B",
            "spill_bytes": "B",
            "blocks_per_sm": "",
            "warps_per_sm": "",
            "occupancy": "",
            "global_bytes_per_fma": "B",
            "shared_operands_per_fma": "",
            "fma_per_shared_load": "",
            "lds": "",
            "lds_128": "",
            "ffma": "",
            "ffma_per_lds": "",
        },
        rows,
        gpu=False,
        describes=gpu,
        kernels={k: ref.source() for k, ref in kernel_refs().items()},
        method="static: nvcc --resource-usage for sm_90, no timing; shared loads (LDS) and "
        "FFMAs counted in cuobjdump -sass of the whole kernel where cuobjdump is installed",
    )
