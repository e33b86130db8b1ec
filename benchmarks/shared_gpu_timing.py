"""Why a class run gives each GPU one grader: the speed verdict measured alone and with a
second grader on the same GPU.

Grades the reference kernel of one exercise ``--repeat`` times with the GPU to itself, then
``--repeat`` times as two graders at once on the same GPU, and prints each set's measured
speedups (median and spread). Run on a GPU machine from the repository root::

    python benchmarks/shared_gpu_timing.py [--exercise tiled] [--repeat 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tilelab import exercises


def grade_once(exercise: str, path: Path) -> dict:
    """One ``tilelab check --json`` in its own process: the grader a class run starts."""
    out = subprocess.run([sys.executable, "-m", "tilelab.cli", "check", exercise, str(path),
                          "--json", "--backend", "gpu"], capture_output=True, text=True,
                         timeout=600)
    return json.loads(out.stdout)


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return (f"median {med:.2f}x, min {min(values):.2f}x, max {max(values):.2f}x, "
            f"spread {(max(values) - min(values)) / med:.0%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exercise", default="tiled")
    ap.add_argument("--repeat", type=int, default=6)
    a = ap.parse_args()
    ex = exercises.get(a.exercise)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reference.cu"
        path.write_text(ex.reference.source(), encoding="utf-8")
        alone = [grade_once(ex.id, path)["speedup"] for _ in range(a.repeat)]
        with ThreadPoolExecutor(2) as pool:
            pairs = [list(pool.map(lambda _: grade_once(ex.id, path), range(2)))
                     for _ in range(a.repeat)]
        shared = [v["speedup"] for pair in pairs for v in pair]
    print(f"{ex.id} reference, gate {ex.gate:g}x")
    print(f"  one grader per GPU:  {spread(alone)}")
    print(f"  two graders, 1 GPU:  {spread(shared)}")
    print(f"  below the gate: alone {sum(s < ex.gate for s in alone)}/{len(alone)}, "
          f"shared {sum(s < ex.gate for s in shared)}/{len(shared)}")


if __name__ == "__main__":
    main()
