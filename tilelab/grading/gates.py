"""Speed gates: the registry's defaults and the overrides ``tilelab calibrate`` writes
(calibration itself is an experiment: :mod:`tilelab.experiments.calibration`)."""

from __future__ import annotations

import json
from pathlib import Path

from tilelab.catalog import exercises


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
