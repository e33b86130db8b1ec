"""Speed gates placed from variants: ``tilelab calibrate`` and ``calibration.json``.

For each exercise, every variant (:mod:`tilelab.catalog.variants`: correct kernels that must pass
the gate, lesson-skipping ones that must fail it) is timed against the gate's baseline,
interleaved on this GPU. The gate is placed between the slowest must-pass and the fastest
must-fail (at their geometric mean), so each side clears it by the same factor, the
margin. A must-fail variant whose own hardware counters already skip the lesson on a GPU
(:func:`tilelab.grading.counters.skipped_lesson`: no shared tile, uncoalesced traffic, bank
conflicts) earns no speed points whatever its speed, so it does not hold the gate down: the
gate is placed between the slowest must-pass and the fastest must-fail the counters let
through (the baseline itself, speedup 1, where they catch them all). Where the two do not
separate by :data:`SEPARATION`, no gate can grade the lesson fairly on this GPU:
calibration refuses, and says which variants collide. The data file
holds one row per variant (the instructors' page shows it); ``tilelab calibrate`` also
writes the gates file the grader loads (:mod:`tilelab.grading.gates`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog import exercises
from tilelab.catalog.variants import VARIANTS
from tilelab.device.bench import Timed
from tilelab.device.runtime import Runtime, get_runtime
from tilelab.experiments import provenance
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD
from tilelab.grading import counters
from tilelab.grading.timed import checked_timing

SEPARATION = 1.10  # slowest must-pass / fastest must-fail: at least ~5% margin each side
COLUMNS = {"exercise": "", "key": "", "variant": "", "must": "", "origin": "", "shape": "",
           "speedup": "x", "gate": "x", "margin": "x", "default_gate": "x",
           "caught_by_counters": ""}


def measure(ex: exercises.Exercise, rt: Runtime, rng: np.random.Generator
            ) -> tuple[float, dict[str, float]]:
    """Median ms of the baseline and of each variant at the exercise's speed shape, timed
    interleaved on one GPU by the graded speed run's own harness (new inputs, fresh poison
    and a checked output at every launch: :func:`tilelab.device.bench.time_checked`)."""
    kernels = {"baseline": Timed(
        rt.SourceModule(ex.baseline.source()).get_function(ex.baseline.name), ex.baseline.launch)}
    for v in VARIANTS[ex.id]:
        kernels[v.key] = Timed(rt.SourceModule(v.source()).get_function(ex.kernel), ex.launch)
    shape = ex.speed_shape
    timed = checked_timing(rt, kernels, ex, shape, rng)
    t = {key: timing.median_ms for key, timing in timed.items()}
    return t.pop("baseline"), t


def placed_gate(slowest_pass: float, fastest_fail: float) -> tuple[float, float]:
    """The gate between the two speedups (their geometric mean) and the margin, the factor
    by which each side clears it."""
    gate = math.sqrt(slowest_pass * fastest_fail)
    return round(gate, 3), slowest_pass / gate


BASELINE = "baseline"  # the baseline itself: a must-fail of speedup 1


def place(ex: exercises.Exercise, speedups: dict[str, float],
          caught: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The gate for one exercise from its variants' speedups, leaving out the must-fail
    variants the GPU's counters already refuse (``caught``); ``refused`` says why none."""
    variants = {v.key: v for v in VARIANTS[ex.id]}
    passing = [k for k in speedups if variants[k].must == "pass"]
    failing = [k for k in speedups if variants[k].must == "fail" and k not in caught]
    slow = min(passing, key=speedups.__getitem__)
    speedups = {**speedups, BASELINE: 1.0}
    fast = max(failing, key=speedups.__getitem__) if failing else BASELINE
    gate, margin = placed_gate(speedups[slow], speedups[fast])
    out: dict[str, Any] = {"gate": gate, "margin": margin, "slowest_pass": slow,
                           "fastest_fail": fast, "refused": None}
    if speedups[slow] < SEPARATION * speedups[fast]:
        out["gate"] = None
        out["refused"] = (
            f"{ex.id}: no gate separates the variants on this GPU: the slowest that must pass "
            f"({variants[slow].label}, {speedups[slow]:.2f}x) is not {SEPARATION:g}x the "
            f"fastest that must fail ({variants[fast].label if fast in variants else fast}, "
            f"{speedups[fast]:.2f}x). Keep the "
            "default gate, or revise the exercise's variants (tilelab/catalog/variants.py)."
        )
    return out


def calibrate(rt: Runtime | None = None) -> dict[str, Any]:
    """Time every exercise's variants against its baseline here and place each gate."""
    rt = rt or get_runtime("gpu")
    rng = np.random.default_rng()
    gates: dict[str, Any] = {}
    for ex in exercises.EXERCISES.values():
        if not ex.speed_graded:  # a correctness-only step has no gate to place
            continue
        baseline_ms, ms = measure(ex, rt, rng)
        speedups = {k: baseline_ms / t for k, t in ms.items()}
        caught = caught_by_counters(ex, speedups)
        gates[ex.id] = {
            **place(ex, speedups, frozenset(caught)),
            "caught": caught,
            "default_gate": ex.gate,
            "baseline": ex.baseline.label,
            "baseline_ms": baseline_ms,
            "shape": list(ex.speed_shape),
            "variants": {k: {"ms": ms[k], "speedup": speedups[k]} for k in ms},
        }
    return {
        "provenance": provenance.collect(
            "calibration: every variant of each exercise and its baseline, interleaved"
        ),
        "gates": gates,
        "refused": [g["refused"] for g in gates.values() if g["refused"]],
    }


def caught_by_counters(ex: exercises.Exercise, speedups: dict[str, float]
                       ) -> dict[str, str]:
    """The must-fail variants fast enough to matter (within :data:`SEPARATION` of the
    slowest must-pass, or faster) that the GPU's own counters refuse, with why (one ncu
    run each; none where Nsight Compute cannot read the counters here)."""
    variants = {v.key: v for v in VARIANTS[ex.id]}
    slowest = min(s for k, s in speedups.items() if variants[k].must == "pass")
    out = {}
    for key, s in speedups.items():
        v = variants[key]
        if v.must != "fail" or s * SEPARATION < slowest:
            continue
        try:
            figures = counters.figures(ex, counters.measure(ex.id, v.source()))
        except counters.CountersUnavailable:
            continue
        why = counters.skipped_lesson(ex, figures)
        if why:
            out[key] = why
    return out


def rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per variant, with its exercise's gate and margin."""
    out = []
    for ex_id, g in doc["gates"].items():
        for v in VARIANTS[ex_id]:
            out.append({
                "exercise": ex_id, "key": v.key, "variant": v.label, "must": v.must,
                "origin": v.origin,
                "shape": " x ".join(map(str, g["shape"])),
                "speedup": g["variants"][v.key]["speedup"],
                "gate": g["gate"], "margin": g["margin"], "default_gate": g["default_gate"],
                "caught_by_counters": (g.get("caught") or {}).get(v.key),
            })
    return out


def write_data(doc: dict[str, Any], out: Path) -> Path:
    """``out/calibration.json``: the variants' speedups, the gates and their margins."""
    return write(
        out,
        "calibration",
        "The speed gates, placed from variants",
        "For each graded kernel: the speedup over the gate's baseline of every variant (correct "
        "kernels that must pass, lesson-skipping ones that must fail), the gate placed between "
        "the slowest must-pass and the fastest must-fail that the GPU's own counters do not "
        "already refuse (caught_by_counters: why they do), and the margin by which each "
        "clears it (`tilelab calibrate`).",
        COLUMNS,
        rows(doc),
        method=METHOD,
    )


def run(rt: Runtime, out: Path) -> Path:
    """``tilelab bench calibration``: the same measurement as ``tilelab calibrate``."""
    return write_data(calibrate(rt), out)


def table(doc: dict[str, Any]) -> str:
    """A short table: each exercise's slowest must-pass, fastest must-fail, gate, margin."""
    lines = [f"{'exercise':18} {'slowest pass':>13} {'fastest fail':>13} {'gate':>7} "
             f"{'margin':>7}  (default)"]
    for ex_id, g in doc["gates"].items():
        sp = g["variants"][g["slowest_pass"]]["speedup"]
        ff = g["variants"][g["fastest_fail"]]["speedup"]
        gate = f"{g['gate']:6.2f}x" if g["gate"] is not None else "refuse"
        lines.append(f"{ex_id:18} {sp:12.2f}x {ff:12.2f}x {gate:>7} {g['margin']:6.2f}x  "
                     f"({g['default_gate']}x)")
    return "\n".join(lines)

