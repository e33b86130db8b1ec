"""Wall time of the CPU emulator, fast and analysis mode: the textbook 16x16-tiled matmul,
a warp-shuffle reduction and a register-blocked (64x64 tile, 4x4 per thread, float4) matmul.

Compilation is excluded (done once per mode, before timing); each time covers a whole
launch: fork, guarded copies, the grid, results back. Prints the median of ``--repeat`` runs.

    python benchmarks/emu_bench.py [--sizes 64 128 256] [--repeat 3] [--all]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tilelab.emu as cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.emu_samples import REGBLOCK_MATMUL, TILE, TILED_MATMUL, WARP_REDUCE


def median_time(run: Callable[[], None], repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``run``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tiled(func: cuda.Function, n: int, repeat: int, rng: np.random.Generator) -> float:
    """The 16x16-tiled matmul at ``n x n x n``; checks the result too."""
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    g = (n + TILE - 1) // TILE
    t = median_time(lambda: func(cuda.In(a), cuda.In(b), cuda.Out(c), np.int32(n), np.int32(n),
                                 np.int32(n), block=(TILE, TILE, 1), grid=(g, g)), repeat)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    return t


def regblock(func: cuda.Function, n: int, repeat: int, rng: np.random.Generator) -> float:
    """The register-blocked matmul at ``n`` (a multiple of 64)."""
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    t = median_time(lambda: func(cuda.In(a), cuda.In(b), cuda.Out(c), np.int32(n),
                                 block=(16, 16, 1), grid=(n // 64, n // 64)), repeat)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    return t


def reduce(func: cuda.Function, n: int, repeat: int, rng: np.random.Generator) -> float:
    """The warp-shuffle reduction of ``n`` floats."""
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)

    def run() -> None:
        out[0] = 0
        func(cuda.In(x), cuda.InOut(out), np.int32(n), block=(256, 1, 1),
             grid=((n + 255) // 256, 1))
    t = median_time(run, repeat)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-3, atol=0.5)
    return t


def functions(source: str, name: str) -> dict[str, cuda.Function]:
    """The kernel compiled in both modes (compile times printed)."""
    out = {}
    for mode in ("fast", "analysis"):
        t0 = time.perf_counter()
        out[mode] = cuda.SourceModule(source, analysis=mode == "analysis").get_function(name)
        print(f"compile {name} ({mode}): {time.perf_counter() - t0:.2f} s (cached later)")
    return out


def table(title: str, funcs: dict, bench: Callable, sizes: list[int], repeat: int,
          rng: np.random.Generator) -> None:
    print(f"\n{title}, median of {repeat} launches (seconds)")
    print(f"{'N':>8} {'fast':>10} {'analysis':>10}")
    for n in sizes:
        fast = bench(funcs["fast"], n, repeat, rng)
        slow = bench(funcs["analysis"], n, repeat, rng)
        print(f"{n:>8} {fast:>10.3f} {slow:>10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--all", action="store_true",
                        help="also the warp reduction (2^20) and register-blocked matmul "
                             "(256, 512)")
    opts = parser.parse_args()
    rng = np.random.default_rng()
    table("16x16-tiled matmul", functions(TILED_MATMUL, "matmul_tiled"), tiled, opts.sizes,
          opts.repeat, rng)
    if opts.all:
        table("warp-shuffle reduction", functions(WARP_REDUCE, "shuffle_reduce"), reduce,
              [2**20], opts.repeat, rng)
        table("register-blocked matmul (64x64 tile, 4x4 per thread, float4)",
              functions(REGBLOCK_MATMUL, "matmul_regblock"), regblock, [256, 512],
              opts.repeat, rng)


if __name__ == "__main__":
    main()
