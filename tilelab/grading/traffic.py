"""What the emulator's traffic counters say about a kernel, in a course's terms.

The counters (``tilelab.emu.traffic``) give, per source line, the warp-wide global requests
and the 32-byte sectors they touch. Here they become per-kernel figures (global loads and
bytes per multiply-add, sectors per request, shared-memory wavefronts) and the remarks a
learner reads on the emulator, where no timing can show the lesson: a column walk that is
not coalesced, a "tiled" kernel that reuses nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilelab.catalog.problems import Problem, Shape
from tilelab.emu.report import AnalysisReport
from tilelab.emu.traffic import SECTOR, Totals, TrafficLine
from tilelab.grading.counters import MAX_BYTES_PER_MAD, MAX_BYTES_RATIO

#: a line whose requests use less than this share of the bytes they move is called out:
#: counted by the bytes the lanes ask for, as the hardware counts it (a warp of float4
#: loads asks for 512 bytes and touches 16 sectors at best: all of them used)
MIN_EFFICIENCY = 0.5


def multiply_adds(problem: Problem, shape: Shape) -> int:
    """Multiply-adds the problem needs at this shape (0 for a data movement problem)."""
    return int(problem.flops(shape) // 2)


def summary(report: AnalysisReport, problem: Problem, shape: Shape) -> dict[str, Any]:
    """Per-kernel traffic figures of one analysed launch (JSON-ready)."""
    lines = report.traffic
    t = Totals.of(lines)
    mads = multiply_adds(problem, shape)
    elements = int(np.prod(problem.output_shape(shape)))
    wavefronts = sum(b.avg_degree * b.count for b in report.bank_lines)
    out: dict[str, Any] = {
        "shape": list(shape),
        "totals": t.to_dict(),
        "sectors_per_load_request": t.load_sectors / t.load_requests if t.load_requests else 0.0,
        "sectors_per_store_request": (t.store_sectors / t.store_requests
                                      if t.store_requests else 0.0),
        "load_sector_bytes": t.load_sectors * SECTOR,
        "shared_wavefronts": round(wavefronts, 3),
        "shared_requests": sum(b.count for b in report.bank_lines),
        "lines": [
            {"line": x.line, "param": x.param, "kind": x.kind, "requests": x.requests,
             "sectors": x.sectors, "sectors_per_request": round(x.sectors_per_request, 3),
             "max_sectors": x.max_sectors}
            for x in lines
        ],
    }
    if mads:
        out["multiply_adds"] = mads
        out["loads_per_multiply_add"] = t.load_lanes / mads
        out["load_bytes_per_multiply_add"] = t.load_bytes / mads
        out["sector_bytes_per_multiply_add"] = t.load_sectors * SECTOR / mads
    else:
        out["elements"] = elements
        out["sector_bytes_per_element"] = (t.load_sectors + t.store_sectors) * SECTOR / elements
        moved = problem.bytes_moved(shape)
        if moved:
            out["sector_bytes_per_byte_moved"] = ((t.load_sectors + t.store_sectors) * SECTOR
                                                  / moved)
    for row, x in zip(out["lines"], lines, strict=True):
        row["bytes_per_request"] = round(x.bytes / x.requests, 1) if x.requests else 0.0
        row["efficiency"] = round(x.efficiency, 3)
    return out


def _per(x: float) -> str:
    if x >= 1 or x == 0:
        return f"{x:g}"
    inv = 1 / x
    return f"1/{inv:.0f}" if abs(inv - round(inv)) < 1e-9 else f"{x:.3g}"


def _walk(line: TrafficLine) -> str:
    verb = "loads of" if line.kind == "read" else "stores to"
    asked, per = line.bytes / line.requests, line.sectors_per_request
    return (f"your {verb} {line.param} (line {line.line}) touch {per:.0f} sectors per "
            f"request ({per * SECTOR:.0f} bytes moved) for the {asked:.0f} bytes its lanes ask for "
            f"({100 * line.efficiency:.0f}% used): neighbouring threads do not access "
            "neighbouring words (e.g. threadIdx.x walks a column)")


def uncoalesced(line: TrafficLine) -> bool:
    """Whether a line's warp-wide requests use less than :data:`MIN_EFFICIENCY` of the
    sectors they touch (full warps only: a partial warp at an edge is no pattern)."""
    return bool(line.requests) and line.lanes >= 16 * line.requests and \
        line.efficiency < MIN_EFFICIENCY


def remarks(report: AnalysisReport, problem: Problem, shape: Shape,
            tiled_lesson: bool = False) -> list[str]:
    """What the counters teach about this kernel, in sentences (empty when nothing stands
    out). ``tiled_lesson``: the exercise is to reuse tiles, so name a kernel that does not."""
    out = [_walk(x) for x in report.traffic if uncoalesced(x)]
    mads = multiply_adds(problem, shape)
    if mads:
        per = Totals.of(report.traffic).load_lanes / mads
        if tiled_lesson and per >= 1:
            out.append(f"this kernel reads global memory {_per(per)} times per multiply-add, as "
                       "the naive one does: no tile is reused (load a tile into shared memory "
                       "once, then use each value TILE times)")
        elif per:
            out.append(f"this kernel reads global memory {_per(per)} times per multiply-add "
                       f"({_per(4 * per)} bytes)")
    return out


def skipped_lesson(summary: dict[str, Any], reuses_tiles: bool) -> str | None:
    """Why a correct kernel would lose its speed points on a GPU by its traffic (None when
    it would not), by the GPU gate's own rule (:func:`tilelab.grading.counters.
    skipped_lesson`): the whole kernel's sector bytes per byte the problem moves, or per
    multiply-add, past the gate's bound (a line of stores made once per output does not
    tip it); or, where the lesson is tile reuse, a global load per multiply-add."""
    lines = summary.get("lines", [])
    walk = next((x for x in lines if x.get("efficiency", 1.0) < MIN_EFFICIENCY
                 and x["requests"]), None)
    named = (f" (its {'loads of' if walk['kind'] == 'read' else 'stores to'} "
             f"{walk['param']}, line {walk['line']}, touch {walk['sectors_per_request']:.0f} "
             f"sectors per request for {walk.get('bytes_per_request', 0):.0f} bytes)"
             if walk else "")
    ratio = summary.get("sector_bytes_per_byte_moved")
    if ratio is not None and ratio > MAX_BYTES_RATIO:
        return (f"it moves {ratio:.1f} times the bytes the problem needs{named}: its global "
                "accesses are not coalesced")
    per_mad = summary.get("sector_bytes_per_multiply_add")
    if per_mad is not None and per_mad > MAX_BYTES_PER_MAD:
        return (f"its global loads move {per_mad:.1f} bytes per multiply-add{named}: a warp's "
                "threads do not read consecutive addresses")
    if reuses_tiles and summary.get("loads_per_multiply_add", 0.0) >= 1:
        return "it reads global memory once or more per multiply-add (no tile is reused)"
    return None
