"""Run the book's experiments by name: ``tilelab bench NAME... --out book/data``."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from tilelab.device.runtime import get_runtime
from tilelab.experiments import EXPERIMENTS, check_names


def run(names: list[str], out: Path, rt: Any = None) -> list[Path]:
    """Run experiments by name, in the order given; ``rt``: the GPU runtime for the
    experiments that need one (``get_runtime("gpu")`` when not given)."""
    check_names(names)
    if rt is None and any(EXPERIMENTS[n] for n in names):
        rt = get_runtime("gpu")
    package = __name__.rpartition(".")[0]
    return [importlib.import_module(f"{package}.{n}").run(rt, out) for n in names]
