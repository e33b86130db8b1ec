"""``model.json``: what limits each kernel, predicted from the other data files
(:mod:`tilelab.experiments.perfmodel`); no GPU, no new measurement."""

from __future__ import annotations

from pathlib import Path

from tilelab.experiments import perfmodel as model


def run(rt: object, out: Path) -> Path:
    """Predict every measured kernel's time from the data files in ``out``."""
    return model.experiment(out)
