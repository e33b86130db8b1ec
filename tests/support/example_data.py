"""Made-up data files in the bench's current format, for the book's tests (tests/data/book).

``python tests/support/example_data.py`` rewrites the example files whose format the bench
changed (the sizes of chapter 6's sweep, step 9's choice, the cuBLAS cross-check, the bank
rule's patterns, the strided-reads transpose, the FP32 peak from the clock): every value
comes from a simple formula, never from a measurement, and every file says so. The other
example files are left as they are. Deterministic: a rerun writes the same bytes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tilelab.catalog import road  # noqa: E402
from tilelab.experiments import bank_wide  # noqa: E402
from tilelab.experiments.cublas_check import SIZES  # noqa: E402

OUT = REPO / "tests" / "data" / "book"
NOTE = ("EXAMPLE values for the tests of the book extension, made up by a formula, not a "
        "measurement.")
PROVENANCE = {"date": "2026-12-01T00:00:00+00:00", "command": "tests/support/example_data.py",
              "gpu": "EXAMPLE GPU", "compute_capability": "9.0", "sm_count": 132,
              "revision": "0" * 40, "dirty": False, "code_digest": "example",
              "method": "made up for the tests"}
SM_COUNT, PEAK = 132, 66.9
FULL = (1024, 2048, 4096)
SWEEP = (*road.LADDER, *road.CANDIDATES, "shapes_aligned", "dbuf_64x128x16", "ahead_256x128x8")


def _load(name: str) -> dict:
    return json.loads((OUT / f"{name}.json").read_text(encoding="utf-8"))


def _save(name: str, doc: dict) -> None:
    rest = doc.get("description", "").removeprefix(NOTE).strip()
    doc["description"] = f"{NOTE} {rest}".strip()
    (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _rate(key: str) -> float:
    """A made-up speed at N = 4096 that climbs the ladder (TFLOP/s)."""
    return 4.0 + 4.5 * road.step_of(key) + (sum(map(ord, key)) % 7) * 0.3


def sgemm() -> None:
    refs = road.kernel_refs()
    rows = []
    for n in (4096, *[s for s in SIZES if s != 4096]):
        keys = list(refs) if n in FULL else [
            k for k in SWEEP if not (n > 4096 and k in ("naive", "tiled32"))]
        flops = 2.0 * n ** 3
        blas_t = 48.0 * (0.9 if n % 1024 else 1.0) * min(1.0, n / 2048)
        at_n = []
        for key in keys:
            ref = refs[key]
            gx, gy = ref.launch.grid({"M": n, "N": n, "K": n})
            per_sm = 1 if math.prod(ref.launch.block) >= 256 else 2
            tiles = gx * gy
            waves = tiles / (per_sm * SM_COUNT)
            fill = waves / math.ceil(waves)
            t = _rate(key) * fill * (0.85 if n % 4 else 1.0)
            at_n.append({"kernel": key, "step": road.step_of(key), "label": ref.label, "n": n,
                         "median_ms": flops / t / 1e9, "spread": 0.01, "tflops": t,
                         "rel_error": 1e-6, "bitwise_cublas": n != 3072, "registers": 128,
                         "tiles": tiles, "blocks_per_sm": per_sm, "waves": waves,
                         "full_waves": math.ceil(waves), "submit_max_ms": 0.05, "redone": 0})
        at_n.append({"kernel": "cublas", "step": road.step_of("cublas"), "label": "cuBLAS",
                     "n": n, "median_ms": flops / blas_t / 1e9, "spread": 0.01,
                     "tflops": blas_t, "rel_error": 1e-6, "bitwise_cublas": True,
                     "submit_max_ms": 0.1, "redone": 0, "cublas_version": 130100})
        rows.extend(at_n)
    rates = {r["kernel"]: r["tflops"] for r in rows
             if r["n"] == 4096 and r["kernel"] in road.CANDIDATES}
    for n in SIZES:
        at_n = [r for r in rows if r["n"] == n]
        blas = next(r for r in at_n if r["kernel"] == "cublas")
        best = max((r for r in at_n if r["kernel"] != "cublas"), key=lambda r: r["tflops"])
        chosen = road.choose(n, n, n, SM_COUNT, rates)
        blas.update({"kernels_timed": len(at_n) - 1,
                     "bitwise_kernels": sum(r["bitwise_cublas"] for r in at_n) - 1,
                     "check_event_ms": blas["median_ms"], "ncu_ms": blas["median_ms"] * 0.99,
                     "second_ms": blas["median_ms"], "check_disagreement": 0.0})
        for r in at_n:
            r.update({"pct_cublas": 100 * r["tflops"] / blas["tflops"],
                      "pct_peak": 100 * r["tflops"] / PEAK, "peak_tflops": PEAK,
                      "best_config": r is best, "chosen": r["kernel"] == chosen})
            if r["kernel"] in road.CANDIDATES:
                r["predicted_ms"] = road.predicted_ms(r["kernel"], n, n, n, SM_COUNT,
                                                      rates[r["kernel"]])
                r["predicted_ratio"] = r["predicted_ms"] / r["median_ms"]
            if r["chosen"] or r["kernel"] == "cublas":
                r.update({"ncu_ms": r["median_ms"] * 0.99, "sm_busy": 0.9,
                          "ncu_kernel": "matmul_shapes" if r["chosen"] else "example_sgemm",
                          "ncu_smsp__issue_active_avg_pct_of_peak_sustained_active": 80.0,
                          "ncu_smsp__warps_active_avg_per_cycle_active": 2.0,
                          **{f"ncu_smsp__average_warps_issue_stalled_{s}"
                             "_per_issue_active_ratio": 0.5
                             for s in ("barrier", "short_scoreboard", "long_scoreboard",
                                       "wait", "dispatch_stall")}})
    doc = _load("sgemm")
    doc["rows"] = rows
    doc["provenance"] = PROVENANCE
    doc["columns"] = {**{k: "" for r in rows for k in r}, "median_ms": "ms", "tflops": "TFLOP/s",
                      "pct_cublas": "%", "pct_peak": "%", "peak_tflops": "TFLOP/s",
                      "ncu_ms": "ms", "predicted_ms": "ms", "submit_max_ms": "ms",
                      "check_event_ms": "ms", "second_ms": "ms"}
    _save("sgemm", doc)


def sgemm_ptxas() -> None:
    doc = _load("sgemm_ptxas")
    have = {r["kernel"] for r in doc["rows"]}
    base = doc["rows"][0]
    for key, ref in road.kernel_refs().items():
        if key not in have:
            t = road.traffic(key)
            doc["rows"].append({**base, "kernel": key, "step": road.step_of(key),
                                "label": ref.label,
                                "threads_per_block": math.prod(ref.launch.block),
                                "registers": 128, "spill_bytes": 0,
                                "global_bytes_per_fma": t.global_bytes_per_fma,
                                "shared_operands_per_fma": t.shared_operands_per_fma,
                                "fma_per_shared_load": t.fma_per_shared_load})
    _save("sgemm_ptxas", doc)


def cublas_check() -> None:
    rows = []
    for n in SIZES:
        ms = 2.0 * n ** 3 / 48.0 / 1e9
        rows.append({"n": n, "event_ms": ms, "spread": 0.01, "reference_event_ms": ms * 1.04,
                     "submit_max_ms": 0.1, "redone": 0, "ncu_ms": ms - 0.003,
                     "reference_ncu_ms": ms * 1.04 - 0.003, "ncu_kernel": "example_sgemm",
                     "cublas_kernels": 1, "event_overhead_ms": 0.003, "second_ms": ms * 1.001,
                     "second_binding": "example binding", "ncu_disagreement": 0.0,
                     "second_disagreement": -0.001, "retimed": False, "agrees": True,
                     "tflops": 48.0})
    doc = {"experiment": "cublas_check", "title": "cuBLAS held against ncu and a second binding",
           "description": "", "provenance": PROVENANCE,
           "columns": {**{k: "" for k in rows[0]}, "event_ms": "ms", "ncu_ms": "ms",
                       "second_ms": "ms", "event_overhead_ms": "ms"}, "rows": rows}
    _save("cublas_check", doc)


def bank_wide_file() -> None:
    rows = []
    for kernel, name, pattern in bank_wide.cases():
        width, load = bank_wide.KERNELS[kernel]
        pred = bank_wide.predictions(pattern, width, load)
        rows.append({"kind": "pattern", "kernel": kernel, "pattern": name, "width": width,
                     "op": "load" if load else "store", "course": name in bank_wide._course(),
                     "active_lanes": sum(w is not None for w in pattern), "offsets": "",
                     "measured": float(pred["predicted"]), "ncu_conflicts": 0.0, **pred,
                     "emu_degree": float(pred["degree"]), "match": True,
                     "quarter_warp_match": pred["quarter_warp"] == pred["predicted"],
                     "merged_match": pred["merged"] == pred["predicted"]})
    rows += bank_wide.summary_rows(rows)
    doc = {"experiment": "bank_wide", "title": "Wide shared accesses", "description": "",
           "provenance": PROVENANCE, "columns": {k: "" for r in rows for k in r}, "rows": rows}
    _save("bank_wide", doc)


def transpose() -> None:
    doc = _load("transpose")
    doc["rows"] = [r for r in doc["rows"] if r["kernel"] != "reads"]
    for n in sorted({r["n"] for r in doc["rows"]}):
        shared = next(r for r in doc["rows"] if r["n"] == n and r["kernel"] == "shared")
        ms = shared["median_ms"] * 0.85
        doc["rows"].append({"kernel": "reads", "label": "strided reads", "n": n,
                            "median_ms": ms, "spread": 0.01, "gbps": 8.0 * n * n / ms / 1e6,
                            "speedup_vs_shared": shared["median_ms"] / ms})
    _save("transpose", doc)


def counters() -> None:
    doc = _load("counters")
    doc["rows"] = [r for r in doc["rows"] if r["kernel"] != "transpose_reads"]
    naive = next(r for r in doc["rows"] if r["kernel"] == "transpose_naive")
    doc["rows"].append({**naive, "kernel": "transpose_reads", "ncu_kernel": "transpose_reads"})
    for r in doc["rows"]:
        r.setdefault("lts__t_sectors_srcunit_tex_op_read_sum", 1.0e6)
        r.setdefault("lts__t_sectors_srcunit_tex_op_write_sum", 1.0e6)
        r.setdefault("l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate_pct", 50.0)
        r.setdefault("lts__t_sector_hit_rate_pct", 60.0)
    for k in ("lts__t_sectors_srcunit_tex_op_read_sum",
              "lts__t_sectors_srcunit_tex_op_write_sum",
              "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate_pct",
              "lts__t_sector_hit_rate_pct"):
        doc["columns"].setdefault(k, "")
    _save("counters", doc)


def device() -> None:
    doc = _load("device")
    row = doc["rows"][0]
    row["fp32_theoretical_gflops"] = row["sm_count"] * 128 * 2 * row["clock_mhz"] / 1e3
    row["max_resident_threads"] = row["sm_count"] * row["max_threads_per_sm"]
    row["fp32_lanes"] = row["sm_count"] * 128
    _save("device", doc)


def calibration() -> None:
    doc = _load("calibration")
    for r in doc["rows"]:
        r.setdefault("caught_by_counters", None)
    doc["columns"].setdefault("caught_by_counters", "")
    _save("calibration", doc)


if __name__ == "__main__":
    for make in (sgemm, sgemm_ptxas, cublas_check, bank_wide_file, transpose, counters, device,
                 calibration):
        make()
        print(f"wrote {make.__name__}")
