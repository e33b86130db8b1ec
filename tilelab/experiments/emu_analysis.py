"""``emu_analysis.json``: the CPU emulator's race, bank-conflict and global-traffic reports
on the course's kernels (no GPU involved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilelab import emu
from tilelab.catalog import road
from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import Runtime, get_runtime
from tilelab.experiments.datafile import write
from tilelab.experiments.racecheck import variants
from tilelab.grading import traffic
from tilelab.grading.correctness import launch

#: The kernels whose shared accesses the book reads bank-conflict degrees of.
BANK_KERNELS = (
    "tiled32",
    "tiled32_padded",
    "tiled32_at",
    "tiled32_at_padded",
    "transpose_shared",
    "transpose_padded",
)
#: The steps of the road to cuBLAS whose shared accesses chapter 6 shows, and the shape
#: they run at: every block's tiles inside the matrices (the path the GPU times at N=4096).
ROAD_KERNELS = ("vec4", "warptile", "dbuf", "async", "swizzle", "swizzle_plain", "ahead")
ROAD_SHAPE = (256, 256, 64)
#: The kernels whose global traffic (sectors per request, loads per multiply-add) it keeps.
TRAFFIC_KERNELS = ("naive", "naive_xrow", "tiled16", "tiled32", "tiled32_padded", "tiled32_at",
                   "tiled32_at_padded", "transpose_naive", "transpose_reads",
                   "transpose_shared", "transpose_padded")
TRAFFIC_FIGURES = ("loads_per_multiply_add", "sector_bytes_per_multiply_add",
                   "sectors_per_load_request", "sectors_per_store_request", "shared_wavefronts")


def _analyse(key: str, source: str, rng: np.random.Generator) -> emu.AnalysisReport:
    """Launch ``source`` once, as the course kernel ``key``, in analysis mode."""
    k = KERNELS[key]
    fn = emu.SourceModule(source, analysis=True).get_function(k.name)
    shape = k.problem.analysis_shape
    launch(get_runtime("emu"), fn, k.problem, k.launch, shape, k.problem.make_inputs(shape, rng))
    return fn.last_report.analysis


def road_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """Races and bank-conflict degrees of the road's steps (the emulator's portable build of
    each: ``cp.async`` as plain loads and stores), at :data:`ROAD_SHAPE`."""
    rows: list[dict[str, Any]] = []
    for key in ROAD_KERNELS:
        ref = road.kernel_refs()[key]
        fn = emu.SourceModule(road.emulator_source(ref), analysis=True).get_function(ref.name)
        launch(get_runtime("emu"), fn, ref.problem, ref.launch, ROAD_SHAPE,
               ref.problem.make_inputs(ROAD_SHAPE, rng))
        rep = fn.last_report.analysis
        rows.append({"kind": "road_race", "kernel": key,
                     "races": len(rep.races), "excerpt": rep.summary()[:2500]})
        rows.extend(
            {"kind": "road_bank", "kernel": key, "array": b.array, "line": b.line,
             "access": b.kind, "accesses": b.count, "degree": b.avg_degree,
             "max_degree": b.max_degree}
            for b in rep.bank_lines
        )
        rows.append({"kind": "road_bank_average", "kernel": key, "degree": rep.average_degree})
        by: dict[tuple[str, str], list] = {}
        for b in rep.bank_lines:
            by.setdefault((b.array, b.kind), []).append(b)
        rows.extend(  # one row per array and direction: the text names these, not lines
            {"kind": "road_array", "kernel": key, "array": array, "access": kind,
             "accesses": sum(b.count for b in bs),
             "degree": sum(b.avg_degree * b.count for b in bs) / sum(b.count for b in bs),
             "max_degree": max(b.max_degree for b in bs)}
            for (array, kind), bs in by.items()
        )
    return rows


def race_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """Races found in the tiled kernel with and without each barrier."""
    rows = []
    for name, src in variants().items():
        rep = _analyse("tiled32", src, rng)
        rows.append({"kind": "race", "kernel": "tiled32", "variant": name,
                     "races": len(rep.races), "excerpt": rep.summary()[:2500]})
    return rows


def bank_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """The conflict degree of every shared access, and each kernel's average."""
    rows: list[dict[str, Any]] = []
    for key in BANK_KERNELS:
        rep = _analyse(key, KERNELS[key].source(), rng)
        rows.extend(
            {"kind": "bank", "kernel": key, "array": b.array, "line": b.line,
             "access": b.kind, "accesses": b.count, "degree": b.avg_degree,
             "max_degree": b.max_degree}
            for b in rep.bank_lines
        )
        rows.append({"kind": "bank_average", "kernel": key, "degree": rep.average_degree})
    return rows


def traffic_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """Each kernel's global traffic figures (tilelab.grading.traffic.summary)."""
    rows = []
    for key in TRAFFIC_KERNELS:
        k = KERNELS[key]
        s = traffic.summary(_analyse(key, k.source(), rng), k.problem, k.problem.analysis_shape)
        rows.append({"kind": "traffic", "kernel": key,
                     **{f: s[f] for f in TRAFFIC_FIGURES if f in s}})
    return rows


def run(rt: Runtime | None, out: Path) -> Path:
    rng = np.random.default_rng()
    return write(
        out,
        "emu_analysis",
        "The CPU emulator's analysis of the course's kernels",
        "Races between barriers, the bank-conflict degree of every warp-wide shared access, "
        "and global traffic (32-byte sectors per warp-wide request, loads per multiply-add), "
        "from the emulator's analysis mode (no GPU involved).",
        {
            "kind": "",
            "kernel": "",
            "variant": "",
            "races": "",
            "array": "",
            "access": "",
            "degree": "way",
            "max_degree": "way",
            "loads_per_multiply_add": "",
            "sector_bytes_per_multiply_add": "B",
            "sectors_per_load_request": "",
            "sectors_per_store_request": "",
            "shared_wavefronts": "",
        },
        race_rows(rng) + bank_rows(rng) + traffic_rows(rng) + road_rows(rng),
        gpu=False,
        kernels={**{k: KERNELS[k].source() for k in (*BANK_KERNELS, *TRAFFIC_KERNELS)
                    if k in KERNELS},
                 **{k: road.kernel_refs()[k].source() for k in ROAD_KERNELS}},
        method="tilelab CPU emulator, analysis mode, one launch at N=64 (the steps of the "
        "road to cuBLAS at M=N=256, K=64)",
    )
