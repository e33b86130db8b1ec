"""Print the road-to-cuBLAS table from the data files: ``python benchmarks/sgemm_table.py DIR``.

One line per kernel timed at every size: TFLOP/s at each N and, last, % of cuBLAS at each
N for step 9's choice; then cuBLAS's event median beside Nsight Compute's duration and the
second binding's median (cublas_check.json), where that file is there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: str) -> None:
    d = Path(folder)
    rows = json.loads((d / "sgemm.json").read_text())["rows"]
    sizes = sorted({r["n"] for r in rows})
    kernels = [k for k in dict.fromkeys(r["kernel"] for r in rows)
               if {r["n"] for r in rows if r["kernel"] == k} == set(sizes)]
    print(f"{'TFLOP/s':24} " + " ".join(f"{n:>7}" for n in sizes))
    for k in kernels:
        by_n = {r["n"]: r for r in rows if r["kernel"] == k}
        print(f"{k:24} " + " ".join(f"{by_n[n]['tflops']:7.2f}" for n in sizes))
    chosen = {r["n"]: r for r in rows if r.get("chosen")}
    if chosen:
        print(f"{'step 9 % of cuBLAS':24} "
              + " ".join(f"{chosen[n]['pct_cublas']:7.1f}" if n in chosen else "      -"
                         for n in sizes))
        print(f"{'step 9 chose':24} " + " ".join(
            f"{chosen[n]['kernel'].replace('shapes_', '').replace('shapes', 'big'):>7}"
            if n in chosen else "      -" for n in sizes))
    check = d / "cublas_check.json"
    if check.is_file():
        print(f"\n{'N':>5} {'events ms':>10} {'ncu ms':>9} {'second ms':>10} "
              f"{'ncu off':>8} {'2nd off':>8}  kernel")
        for r in json.loads(check.read_text())["rows"]:
            print(f"{r['n']:5} {r['event_ms']:10.4f} {r['ncu_ms']:9.4f} {r['second_ms']:10.4f} "
                  f"{100 * r['ncu_disagreement']:7.2f}% {100 * r['second_disagreement']:7.2f}%  "
                  f"{r.get('ncu_kernel', '')[:60]}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/data")
