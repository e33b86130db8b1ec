"""Speed gates: the registry's defaults, calibrated overrides, and calibration itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import exercises, provenance
from tilelab.bench import prepared_launch, time_interleaved
from tilelab.runtime import get_runtime


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


def calibrate(fraction: float | None = None) -> dict[str, Any]:
    """Measure each reference solution against its baseline on this GPU; derive gates."""
    rt = get_runtime("gpu")
    rng = np.random.default_rng()
    gates: dict[str, Any] = {}
    for ex in exercises.EXERCISES.values():
        frac = ex.calibration_fraction if fraction is None else fraction
        inputs = ex.problem.make_inputs(ex.speed_shape, rng)
        keep: list = []
        runs = {}
        for role, ref in (("reference", ex.reference), ("baseline", ex.baseline)):
            fn = rt.SourceModule(ref.source()).get_function(ref.name)
            runs[role] = prepared_launch(
                rt, fn, ex.problem, ref.launch, ex.speed_shape, inputs, keep
            )
        t = time_interleaved(runs)
        speedup = t["baseline"].median_ms / t["reference"].median_ms
        gates[ex.id] = {
            "gate": round(max(1.0, frac * speedup), 3),
            "reference_speedup": speedup,
            "fraction": frac,
            "default_gate": ex.gate,
            "reference_ms": t["reference"].median_ms,
            "baseline_ms": t["baseline"].median_ms,
            "shape": list(ex.speed_shape),
        }
    return {
        "provenance": provenance.collect("calibration: reference vs baseline, interleaved"),
        "gates": gates,
    }
