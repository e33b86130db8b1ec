"""Print the road-to-cuBLAS table from the data files: ``python benchmarks/sgemm_table.py DIR``.

One line per kernel: TFLOP/s at each N, % of cuBLAS and of the FP32 peak at the largest N,
the worst relative error against float64, and registers and occupancy from ptxas.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: str) -> None:
    d = Path(folder)
    rows = json.loads((d / "sgemm.json").read_text())["rows"]
    static = {}
    if (d / "sgemm_ptxas.json").is_file():
        static = {r["kernel"]: r for r in json.loads((d / "sgemm_ptxas.json").read_text())["rows"]}
    sizes = sorted({r["n"] for r in rows})
    top = sizes[-1]
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    head = " ".join(f"{n:>7}" for n in sizes)
    print(f"{'kernel':24} {head} %cublas  %peak   maxerr  regs  occ")
    for k in kernels:
        by_n = {r["n"]: r for r in rows if r["kernel"] == k}
        s = static.get(k, {})
        print(
            f"{k:24} " + " ".join(f"{by_n[n]['tflops']:7.2f}" for n in sizes)
            + f" {by_n[top]['pct_cublas']:7.1f} {by_n[top]['pct_peak']:6.1f}"
            + f" {max(r['rel_error'] for r in by_n.values()):8.1e}"
            + f" {s.get('registers', by_n[top].get('registers'))!s:>5}"
            + f" {s.get('occupancy', float('nan')):4.2f}"
        )
    if (d / "calibration.json").is_file():
        for r in json.loads((d / "calibration.json").read_text())["rows"]:
            print("calibration", r)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/data")
