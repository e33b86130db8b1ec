"""Run each solutions notebook top to bottom, as a learner's "run all" would, and time it.

    python benchmarks/run_notebooks.py [--backend emu|gpu] [--json out.json] [NOTEBOOK ...]

Prints, per notebook, its total seconds and every check and hidden test cell's seconds, and
fails (exit 1) when a cell raised: the solutions must pass every hidden test. On the CPU
emulator the speed tests of the gated steps fail by design (no GPU to time them) unless
TILELAB_AWARD_SPEED_WITHOUT_GPU=1, which this script sets there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]


def run(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=1200, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    cells: dict[str, float] = {}
    errors: list[str] = []
    t0 = time.perf_counter()
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            t = time.perf_counter()
            try:
                client.execute_cell(cell, i)
            except Exception as exc:  # a failing hidden test: record it, go on
                errors.append(f"{(cell.metadata.get('nbgrader') or {}).get('grade_id')}: "
                              f"{str(exc).splitlines()[-1][:200] if str(exc) else exc!r}")
            gid = (cell.metadata.get("nbgrader") or {}).get("grade_id", "")
            if gid.startswith(("check_", "test_")):
                cells[gid] = round(time.perf_counter() - t, 2)
    return {"notebook": str(path.relative_to(REPO)), "seconds": round(time.perf_counter() - t0, 1),
            "cells": cells, "errors": errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--backend", choices=("emu", "gpu"), default="emu")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    os.environ["TILELAB_BACKEND"] = a.backend
    if a.backend == "emu":
        os.environ.setdefault("TILELAB_AWARD_SPEED_WITHOUT_GPU", "1")
    paths = [p.resolve() for p in a.notebooks] or sorted(REPO.glob("solutions/*/*.ipynb"))
    results = []
    for path in paths:
        r = run(path)
        results.append(r)
        checks = [s for k, s in r["cells"].items() if k.startswith("check_")]
        print(f"{r['notebook']}: {r['seconds']:.1f} s, {len(checks)} checks "
              f"({min(checks):.1f}-{max(checks):.1f} s each), errors: {r['errors'] or 'none'}")
        for k, s in r["cells"].items():
            print(f"    {k:<34} {s:7.2f} s")
        sys.stdout.flush()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
