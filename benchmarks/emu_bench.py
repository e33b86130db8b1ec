"""Wall time of the CPU emulator on the textbook 16x16-tiled matmul, fast and analysis mode.

Compilation is excluded (done once per mode, before timing); each time covers a whole
launch: fork, guarded copies, the grid, results back. Prints the median of ``--repeat`` runs.

    python benchmarks/emu_bench.py [--sizes 64 128 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tilelab.emu as cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.emu_samples import TILE, TILED_MATMUL


def time_launch(func: cuda.Function, n: int, repeat: int, rng: np.random.Generator) -> float:
    """Median seconds of one launch at ``n x n x n``; checks the result too."""
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    expect = a.astype(np.float64) @ b
    times = []
    for _ in range(repeat):
        c = np.zeros((n, n), np.float32)
        t0 = time.perf_counter()
        func(cuda.In(a), cuda.In(b), cuda.Out(c), np.int32(n), np.int32(n), np.int32(n),
             block=(TILE, TILE, 1), grid=((n + TILE - 1) // TILE, (n + TILE - 1) // TILE))
        times.append(time.perf_counter() - t0)
        np.testing.assert_allclose(c, expect, rtol=1e-3, atol=1e-3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    rng = np.random.default_rng()
    funcs = {}
    for mode in ("fast", "analysis"):
        t0 = time.perf_counter()
        mod = cuda.SourceModule(TILED_MATMUL, analysis=mode == "analysis")
        funcs[mode] = mod.get_function("matmul_tiled")
        print(f"compile ({mode}): {time.perf_counter() - t0:.2f} s (cached after the first run)")
    print(f"\n16x16-tiled matmul, median of {opts.repeat} launches (seconds)")
    print(f"{'N':>6} {'fast':>10} {'analysis':>10}")
    for n in opts.sizes:
        fast = time_launch(funcs["fast"], n, opts.repeat, rng)
        slow = time_launch(funcs["analysis"], n, opts.repeat, rng)
        print(f"{n:>6} {fast:>10.3f} {slow:>10.3f}")


if __name__ == "__main__":
    main()
