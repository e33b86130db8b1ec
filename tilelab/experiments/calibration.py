"""Speed gates placed from measurement: ``tilelab calibrate`` and ``calibration.json``.

Each exercise's reference solution and a slow-but-right kernel (one that skips the
lesson) are timed against the gate's baseline on this GPU; the gate is placed between
their speedups. ``tilelab calibrate`` writes the gates file the grader loads
(:mod:`tilelab.grading.gates`); the experiment writes the same numbers for the book.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilelab import exercises
from tilelab.bench import prepared_launch, time_interleaved
from tilelab.experiments import provenance
from tilelab.experiments.datafile import write
from tilelab.experiments.ladder import METHOD
from tilelab.reference import slow_but_right
from tilelab.runtime import Runtime, get_runtime


def measure(ex: exercises.Exercise, rt: Runtime, rng: np.random.Generator,
            slow: bool = False) -> dict[str, float]:
    """Median ms of the reference, the baseline (and, with ``slow``, the slow-but-right
    kernel) at the exercise's speed shape, timed interleaved on one GPU."""
    inputs = ex.problem.make_inputs(ex.speed_shape, rng)
    keep: list = []
    kernels = {
        "reference": (ex.reference.source(), ex.reference.name, ex.reference.launch),
        "baseline": (ex.baseline.source(), ex.baseline.name, ex.baseline.launch),
    }
    if slow:
        kernels["slow"] = (slow_but_right(ex.id), ex.kernel, ex.launch)
    runs = {
        role: prepared_launch(
            rt, rt.SourceModule(src).get_function(name), ex.problem, launch,
            ex.speed_shape, inputs, keep,
        )
        for role, (src, name, launch) in kernels.items()
    }
    return {role: t.median_ms for role, t in time_interleaved(runs).items()}


def placed_gate(reference: float, slow: float, fraction: float) -> float:
    """A gate ``fraction`` of the way from the lesson-skipping kernel's speedup to the
    reference's, so both pass and fail with margin (never below 1x)."""
    return round(max(1.0, slow + fraction * (reference - slow)), 3)


def calibrate(fraction: float | None = None, rt: Runtime | None = None) -> dict[str, Any]:
    """Measure each reference solution and a slow-but-right kernel against the baseline on
    this GPU; place each gate between them."""
    rt = rt or get_runtime("gpu")
    rng = np.random.default_rng()
    gates: dict[str, Any] = {}
    for ex in exercises.EXERCISES.values():
        frac = ex.calibration_fraction if fraction is None else fraction
        t = measure(ex, rt, rng, slow=True)
        speedup, slow = t["baseline"] / t["reference"], t["baseline"] / t["slow"]
        gates[ex.id] = {
            "gate": placed_gate(speedup, slow, frac),
            "reference_speedup": speedup,
            "slow_speedup": slow,
            "fraction": frac,
            "default_gate": ex.gate,
            "reference_ms": t["reference"],
            "baseline_ms": t["baseline"],
            "slow_ms": t["slow"],
            "shape": list(ex.speed_shape),
        }
    return {
        "provenance": provenance.collect(
            "calibration: reference, slow-but-right and baseline kernels, interleaved"
        ),
        "gates": gates,
    }


def run(rt: Runtime, out: Path) -> Path:
    """Each exercise's reference and a slow-but-right kernel against the gate's baseline."""
    rows = [
        {
            "exercise": name,
            "baseline": exercises.get(name).baseline.label,
            "shape": " x ".join(map(str, g["shape"])),
            "reference_speedup": g["reference_speedup"],
            "slow_speedup": g["slow_speedup"],
            "gate": g["default_gate"],
            "calibrated_gate": g["gate"],
        }
        for name, g in calibrate(rt=rt)["gates"].items()
    ]
    return write(
        out,
        "calibration",
        "The speed gates against what the kernels measure",
        "For each graded kernel: the reference solution's speedup over the gate's baseline, "
        "the speedup of a correct kernel that skips the lesson (uncoalesced, untiled or "
        "unpadded), the default gate, and the gate `tilelab calibrate` would set.",
        {
            "exercise": "",
            "baseline": "",
            "shape": "",
            "reference_speedup": "x",
            "slow_speedup": "x",
            "gate": "x",
            "calibrated_gate": "x",
        },
        rows,
        method=METHOD,
    )
