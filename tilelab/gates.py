"""Speed gates: the registry's defaults, calibrated overrides, and calibration itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import exercises, provenance
from tilelab.bench import prepared_launch, time_interleaved
from tilelab.reference import slow_but_right
from tilelab.runtime import Runtime, get_runtime


class GatesError(ValueError):
    """A gates file that cannot be used; the message says why and what to do."""


def load(path: str | Path | None) -> dict[str, float]:
    """Gate overrides written by ``tilelab calibrate`` ({} when no file is named)."""
    if path is None:
        return {}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        found = {k: float(v["gate"]) for k, v in doc["gates"].items()}
    except FileNotFoundError:
        raise GatesError(f"no gates file {path}; write one with `tilelab calibrate`") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GatesError(
            f"{path} is not a gates file written by `tilelab calibrate` ({exc!r}); "
            "calibrate again, or grade with the default gates (no --gates)"
        ) from None
    unknown = sorted(set(found) - set(exercises.EXERCISES))
    if unknown:
        raise GatesError(f"{path} names unknown exercises {unknown}; calibrate again")
    return found


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
