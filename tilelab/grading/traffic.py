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
from tilelab.emu.traffic import COALESCED_SECTORS, SECTOR, Totals, TrafficLine

UNCOALESCED = 2 * COALESCED_SECTORS  # more sectors per request than this: call it out


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
    return out


def _per(x: float) -> str:
    if x >= 1 or x == 0:
        return f"{x:g}"
    inv = 1 / x
    return f"1/{inv:.0f}" if abs(inv - round(inv)) < 1e-9 else f"{x:.3g}"


def _walk(line: TrafficLine) -> str:
    verb = "loads of" if line.kind == "read" else "stores to"
    return (f"your {verb} {line.param} (line {line.line}) touch "
            f"{line.sectors_per_request:.0f} sectors per request, where 32 consecutive floats "
            f"touch {COALESCED_SECTORS}: threadIdx.x walks a column (neighbouring threads are "
            "a row apart), so each warp moves several times the bytes it uses")


def remarks(report: AnalysisReport, problem: Problem, shape: Shape,
            tiled_lesson: bool = False) -> list[str]:
    """What the counters teach about this kernel, in sentences (empty when nothing stands
    out). ``tiled_lesson``: the exercise is to reuse tiles, so name a kernel that does not."""
    out = [_walk(x) for x in report.traffic
           if x.requests and x.sectors_per_request > UNCOALESCED and x.lanes >= 16 * x.requests]
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
    """Why a correct kernel skips the lesson by its traffic (None when it does not): an
    uncoalesced walk, or, where the lesson is tile reuse, a global load per multiply-add."""
    walk = next((x for x in summary.get("lines", [])
                 if x["sectors_per_request"] > UNCOALESCED), None)
    if walk is not None:
        return (f"its {'loads of' if walk['kind'] == 'read' else 'stores to'} {walk['param']} "
                f"touch {walk['sectors_per_request']:.0f} sectors per request (uncoalesced)")
    if reuses_tiles and summary.get("loads_per_multiply_add", 0.0) >= 1:
        return "it reads global memory once or more per multiply-add (no tile is reused)"
    return None
