"""Wall time of ``tilelab check`` on the CPU emulator, per exercise, traffic counters on.

Each run is the command a learner types (a fresh process: import, grade in a child,
correctness on every shape, the analysis launch with races, banks and traffic), on the
exercise's reference solution with the emulator's compile cache warm. Prints p50 and p95.

    python benchmarks/check_times.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tilelab.catalog import exercises


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    a = parser.parse_args()
    env = {**os.environ, "TILELAB_BACKEND": "emu"}
    print(f"{'exercise':<18} {'p50 s':>7} {'p95 s':>7}  (n={a.repeat}, warm compile cache)")
    with tempfile.TemporaryDirectory() as tmp:
        for ex in exercises.EXERCISES.values():
            src = Path(tmp) / f"{ex.id}.cu"
            src.write_text(ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "("))
            cmd = [sys.executable, "-m", "tilelab.cli", "check", ex.id, str(src), "--json"]
            subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the cache
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, capture_output=True, check=True)
                times.append(time.perf_counter() - t0)
            p50, p95 = np.percentile(times, [50, 95])
            print(f"{ex.id:<18} {p50:>7.2f} {p95:>7.2f}")


if __name__ == "__main__":
    main()
