"""Run the book's experiments by name: ``tilelab bench NAME... --out book/data``."""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tilelab.device.runtime import get_runtime
from tilelab.experiments import EXPERIMENTS, check_names


def run(names: list[str], out: Path, rt: Any = None) -> Iterator[Path]:
    """Run experiments by name, in the order given, yielding each data file written;
    ``rt``: the GPU runtime for the experiments that need one (``get_runtime("gpu")`` when
    not given). One that fails does not stop the others (a GPU session is short): each
    prints its seconds, and the failures are raised together at the end."""
    check_names(names)
    if rt is None and any(EXPERIMENTS[n] for n in names):
        rt = get_runtime("gpu")
    package = __name__.rpartition(".")[0]
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            path = importlib.import_module(f"{package}.{name}").run(rt, out)
        except Exception as exc:  # the next experiment still runs; this one is reported
            traceback.print_exc(file=sys.stderr)
            failed.append(f"{name}: {exc}")
            print(f"{name}: FAILED after {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            continue
        print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        yield path
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(names)} experiments failed: "
                           + "; ".join(failed))
