"""What limits each course kernel: counts from its geometry, times from the GPU's rates.

Three resources are counted for every kernel, from the addresses its warps touch:

- **DRAM bytes**: the compulsory traffic (each input read once, the output written once),
  at the measured device-copy bandwidth;
- **L1/shared-memory data-path wavefronts**: on Volta to Hopper, L1 and shared memory are
  one SRAM with one data path that returns one *wavefront* (128 bytes, one 4-byte word for
  each of 32 threads) per clock per SM. A warp's access costs one wavefront per distinct
  128-byte line (global loads and stores, through L1) or one per pass of the shared-memory
  banks (the bank-conflict degree); a 128-bit shared load that all threads of a warp read
  at one address costs two (confirmed by the ``counters`` experiment);
- **issue slots**: the FFMA and memory instructions counted, four warp instructions per
  clock per SM (one per sub-partition).

The predicted time is the largest of the three times, on the SM with the most blocks.
The rates come from the bench's data files: the SM count and the device copy from
``device.json``, the data path's bytes per clock from ``shared_bw.json``, the SM clock the
kernels ran at from ``counters.json`` (Nsight Compute).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelab.experiments import provenance

LINE = 128  # bytes: an L1 line, and the data of one wavefront
BANKS = 32
ISSUE_PER_CLOCK = 4  # warp instructions per clock per SM: 4 sub-partitions, 1 dispatch each
WAVEFRONT_BYTES = 128  # bytes one wavefront returns (32 banks x 4 bytes)
LDS128_UNIFORM = 2  # wavefronts of a 128-bit shared load at <= 8 distinct 16-byte words
MISS = 0.25  # a prediction off by more than this fraction is called a miss

Lane = tuple[int, int]  # (threadIdx.x, threadIdx.y)


def warp_lanes(block: tuple[int, int], warp: int = 0) -> list[Lane]:
    """The (tx, ty) of the 32 threads of one warp of a ``block = (bx, by)`` block."""
    bx, by = block
    ids = range(32 * warp, min(32 * (warp + 1), bx * by))
    return [(i % bx, i // bx) for i in ids]


def lines(byte_addresses: Sequence[int]) -> int:
    """Wavefronts of a global access: distinct 128-byte lines touched by the warp."""
    return len({a // LINE for a in byte_addresses})


def bank_passes(word_addresses: Sequence[int]) -> int:
    """Wavefronts of a 32-bit shared access: the most distinct words in any one bank
    (threads reading the same word share a pass)."""
    per_bank: dict[int, set[int]] = {}
    for w in word_addresses:
        per_bank.setdefault(w % BANKS, set()).add(w)
    return max(len(s) for s in per_bank.values())


def lds128_passes(word_addresses: Sequence[int]) -> int:
    """Wavefronts of a 128-bit shared load whose threads start at these (4-aligned) words:
    one per 128 bytes of distinct data, at least ``LDS128_UNIFORM``."""
    chunks = {w // 4 for w in word_addresses}
    return max(LDS128_UNIFORM, math.ceil(16 * len(chunks) / WAVEFRONT_BYTES))


@dataclass(frozen=True)
class Counts:
    """What one launch asks of the GPU, summed over all its warps."""

    kernel: str
    blocks: int
    wavefronts: float  # L1/shared data-path wavefronts
    instructions: float  # warp instructions counted (FFMA and memory; a lower bound)
    dram_bytes: float  # compulsory DRAM traffic
    ffma: float = 0.0  # warp-wide FFMA instructions (matrix multiplies)
    per_unit: str = ""  # what wavefronts_per_unit counts per (e.g. "per FFMA")
    wavefronts_per_unit: float = 0.0


@dataclass(frozen=True)
class Rates:
    """The GPU's rates, from the bench's data files."""

    sm_count: int
    clock_hz: float  # the SM clock the kernels ran at
    wavefronts_per_clock: float  # per SM: the data path's bytes per clock / 128
    dram_bytes_per_s: float  # the measured device copy

    def seconds(self, c: Counts) -> dict[str, float]:
        """The time each resource needs, on the SM that gets the most blocks."""
        busiest = math.ceil(c.blocks / self.sm_count) / c.blocks  # share of the work
        per_sm_clock = self.clock_hz
        return {
            "dram": c.dram_bytes / self.dram_bytes_per_s,
            "data_path": c.wavefronts * busiest / (self.wavefronts_per_clock * per_sm_clock),
            "issue": c.instructions * busiest / (ISSUE_PER_CLOCK * per_sm_clock),
        }


LIMITS = {"dram": "DRAM bandwidth", "data_path": "L1/shared data path", "issue": "issue slots"}


def predict(c: Counts, r: Rates) -> dict[str, Any]:
    """Each resource's time, the largest (the prediction) and which resource it is."""
    t = r.seconds(c)
    limit = max(t, key=lambda k: t[k])
    return {"predicted_s": t[limit], "limit": LIMITS[limit], **{f"{k}_s": v for k, v in t.items()}}


# --- counts from each kernel's geometry -------------------------------------------------


def naive_counts(key: str, n: int, x_along_rows: bool = False) -> Counts:
    """The naive product, 16 x 16 blocks: per k, each warp loads A[row][k] and B[k][col]."""
    lanes = warp_lanes((16, 16))
    rc = [(tx, ty) if x_along_rows else (ty, tx) for tx, ty in lanes]  # (row, col)
    k = 0
    per_k = lines([4 * (r * n + k) for r, _ in rc]) + lines([4 * (k * n + c) for _, c in rc])
    ffma = n * n * n / 32
    return Counts(key, (n // 16) ** 2, ffma * per_k, ffma * 3, 12.0 * n * n, ffma,
                  "per FFMA", per_k)


def a_loads_are_128_bit(tile: int, pad_a: int, a_transposed: bool) -> bool:
    """Whether nvcc reads ``As[ty][k..k+3]`` with one 128-bit load: it can when the row
    ``As[ty]`` is 16-byte aligned (a row of 4 x (tile + pad) bytes) and k runs along it."""
    return not a_transposed and (tile + pad_a) % 4 == 0


def tiled_counts(key: str, n: int, tile: int, pad_a: int = 0, pad_b: int = 0,
                 a_transposed: bool = False) -> Counts:
    """The tiled product: per phase, each warp loads one element of each tile, stores them
    in shared memory, then runs ``tile`` multiply-adds out of the tiles."""
    lanes = warp_lanes((tile, tile))
    pa, pb = tile + pad_a, tile + pad_b
    loads = lines([4 * (ty * n + tx) for tx, ty in lanes])  # A and B: the same pattern
    store_a = bank_passes([tx * pa + ty if a_transposed else ty * pa + tx for tx, ty in lanes])
    store_b = bank_passes([ty * pb + tx for tx, ty in lanes])
    per_phase = 2 * loads + store_a + store_b
    lds = 0
    vector = a_loads_are_128_bit(tile, pad_a, a_transposed)
    for k in range(tile):
        if vector:
            if k % 4 == 0:
                per_phase += lds128_passes([ty * pa + k for _, ty in lanes])
                lds += 1
        else:
            a = [k * pa + ty if a_transposed else ty * pa + k for _, ty in lanes]
            per_phase += bank_passes(a)
            lds += 1
        per_phase += bank_passes([k * pb + tx for tx, _ in lanes])
        lds += 1
    warp_phases = (n / tile) ** 2 * (tile * tile / 32) * (n / tile)
    instr = tile + lds + 2 + 2 + 2  # FFMA, LDS, LDG, STS, BAR
    ffma = warp_phases * tile
    return Counts(key, (n // tile) ** 2, warp_phases * per_phase, warp_phases * instr,
                  12.0 * n * n, ffma, "per FFMA", per_phase / tile)


def transpose_counts(key: str, n: int) -> Counts:
    """The transpose family, 32 x 8 blocks over 32 x 32 tiles, 4 rows per thread."""
    lanes = warp_lanes((32, 8))
    read = lines([4 * (ty * n + tx) for tx, ty in lanes])  # in[(y + j) * cols + x]
    per = {
        "copy": read + read,
        "transpose_naive": read + lines([4 * (tx * n + ty) for tx, ty in lanes]),
        "transpose_shared": read + bank_passes([ty * 32 + tx for tx, ty in lanes])
        + bank_passes([tx * 32 + ty for tx, ty in lanes]) + read,
        "transpose_padded": read + bank_passes([ty * 33 + tx for tx, ty in lanes])
        + bank_passes([tx * 33 + ty for tx, ty in lanes]) + read,
    }[key]
    instr = 2 if key in ("copy", "transpose_naive") else 4
    warp_steps = n * n / 32
    return Counts(key, (n // 32) ** 2, warp_steps * per, warp_steps * instr, 8.0 * n * n,
                  0.0, "per warp row", per)


def bank_stride_counts(stride: int, blocks: int = 1024, iters: int = 4096) -> Counts:
    """The bank-stride microbenchmark: each warp reads s[lane * stride] ``iters`` times."""
    per = bank_passes([(lane * stride) % 4096 for lane in range(32)])
    loads = blocks * 8 * iters
    return Counts(f"stride {stride}", blocks, loads * per, loads * 2, 0.0, 0.0,
                  "per load", per)


COUNTERS: dict[str, Callable[[int], Counts]] = {
    "naive": lambda n: naive_counts("naive", n),
    "naive_xrow": lambda n: naive_counts("naive_xrow", n, x_along_rows=True),
    "tiled16": lambda n: tiled_counts("tiled16", n, 16),
    "tiled32": lambda n: tiled_counts("tiled32", n, 32),
    "tiled32_padded": lambda n: tiled_counts("tiled32_padded", n, 32, 1, 1),
    "tiled32_at": lambda n: tiled_counts("tiled32_at", n, 32, a_transposed=True),
    "tiled32_at_padded": lambda n: tiled_counts("tiled32_at_padded", n, 32, 1, 0, True),
    "copy": lambda n: transpose_counts("copy", n),
    "transpose_naive": lambda n: transpose_counts("transpose_naive", n),
    "transpose_shared": lambda n: transpose_counts("transpose_shared", n),
    "transpose_padded": lambda n: transpose_counts("transpose_padded", n),
}


# --- the experiment: predictions beside the measurements ---------------------------------


def _load(data: Path, name: str) -> dict | None:
    path = data / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def rates_from(data: Path) -> tuple[Rates, list[dict[str, Any]]]:
    """The model's rates from the data files, and one row per rate saying where from."""
    dev = _load(data, "device")
    if dev is None:
        raise FileNotFoundError(f"{data}/device.json is missing: run `tilelab bench device`")
    d = dev["rows"][0]
    sm = int(d["sm_count"])
    clock, clock_from = d["clock_mhz"] * 1e6, "device.json: the driver's maximum SM clock"
    cnt = _load(data, "counters")
    if cnt:
        clocks = [r["sm__cycles_elapsed_avg_per_second"] for r in cnt["rows"]
                  if r.get("sm__cycles_elapsed_avg_per_second")]
        if clocks:
            clock = sum(clocks) / len(clocks)
            clock_from = "counters.json: mean SM clock while the kernels ran (Nsight Compute)"
    wf, wf_from = 1.0, "published: 32 banks x 4 bytes per clock per SM"
    sbw = _load(data, "shared_bw")
    if sbw:
        wf = sbw["rows"][0]["gbps"] * 1e9 / sm / clock / WAVEFRONT_BYTES
        wf_from = "shared_bw.json: conflict-free 128-bit shared loads, at the clock above"
    dram = d["copy_gbps"] * 1e9
    rates = Rates(sm, clock, wf, dram)
    peak = sm * 128 * 2 * clock / 1e9
    table = [
        ("sm_count", "SM count", sm, "", "device.json"),
        ("clock_mhz", "SM clock", clock / 1e6, "MHz", clock_from),
        ("wavefronts_per_clock", "data-path wavefronts per clock per SM", wf, "", wf_from),
        ("issue_per_clock", "issue slots per clock per SM", ISSUE_PER_CLOCK, "",
         "published: 4 sub-partitions, one warp instruction each"),
        ("dram_gbps", "DRAM bandwidth", d["copy_gbps"], "GB/s",
         "device.json: measured device-to-device copy"),
        ("fp32_peak_gflops", "FP32 peak at this clock", peak, "GFLOP/s",
         "published: 128 FP32 lanes per SM (compute capability 9.0), 2 FLOP per FMA"),
    ]
    rows = [{"kind": "rate", "key": k, "rate": name, "value": v, "unit": unit, "source": src}
            for k, name, v, unit, src in table]
    return rates, rows


def _measured_wavefronts(cnt: dict | None, kernel: str, n: int) -> float | None:
    for r in (cnt or {}).get("rows", []):
        if r["kernel"] == kernel and r["n"] == n:
            return r.get("l1tex__data_pipe_lsu_wavefronts_sum")
    return None


def kernel_rows(data: Path, rates: Rates) -> list[dict[str, Any]]:
    """One row per measured (kernel, n) of matmul.json, transpose.json, bank_stride.json."""
    rows = []
    cnt = _load(data, "counters")
    measured: list[tuple[str, str, int, float]] = []
    for r in (_load(data, "matmul") or {}).get("rows", []):
        if r["kernel"] in COUNTERS:
            measured.append(("matmul", r["kernel"], r["n"], r["median_ms"]))
    for r in (_load(data, "transpose") or {}).get("rows", []):
        key = r["kernel"] if r["kernel"] == "copy" else f"transpose_{r['kernel']}"
        measured.append(("transpose", key, r["n"], r["median_ms"]))
    for family, key, n, ms in measured:
        c = COUNTERS[key](n)
        p = predict(c, rates)
        count_n = 1024 if family == "matmul" else 2048
        seen = _measured_wavefronts(cnt, key, count_n)
        model_then = COUNTERS[key](count_n).wavefronts
        rows.append(_row(family, key, n, ms, c, p) | {
            "counted_wavefronts_ratio": seen / model_then if seen else None,
        })
    bank = _load(data, "bank_stride")
    for r in (bank or {}).get("rows", []):
        c = bank_stride_counts(r["stride"])
        rows.append(_row("bank_stride", f"stride{r['stride']}", r["stride"], r["median_ms"],
                         c, predict(c, rates)) | {"counted_wavefronts_ratio": None})
    return rows


def _row(family: str, key: str, n: int, ms: float, c: Counts, p: dict) -> dict[str, Any]:
    ratio = p["predicted_s"] * 1e3 / ms
    return {
        "kind": "kernel",
        "family": family,
        "kernel": key,
        "n": n,
        "wavefronts_per_unit": c.wavefronts_per_unit,
        "per": c.per_unit,
        "predicted_ms": p["predicted_s"] * 1e3,
        "measured_ms": ms,
        "ratio": ratio,
        "limit": p["limit"],
        "dram_ms": p["dram_s"] * 1e3,
        "data_path_ms": p["data_path_s"] * 1e3,
        "issue_ms": p["issue_s"] * 1e3,
        "miss": abs(ratio - 1) > MISS,
    }


SOURCES = ("device", "shared_bw", "counters", "matmul", "transpose", "bank_stride")


def experiment(out: Path, data: Path | None = None) -> Path:
    """Write ``model.json``: the rates, then each kernel's predicted and measured time."""
    data = data or out
    rates, rate_rows = rates_from(data)
    rows = rate_rows + kernel_rows(data, rates)
    method = ("model: DRAM bytes, L1/shared data-path wavefronts and issue slots counted "
              "from each kernel's geometry (tilelab.experiments.perfmodel); predicted time = "
              "the largest of the three on the busiest SM; ratio = predicted / measured")
    prov = provenance.collect(method, gpu=False)
    prov.pop("backend", None)
    prov.pop("compiler", None)
    used = {name: _load(data, name) for name in SOURCES}
    gpu_prov = (used.get("matmul") or used["device"] or {})["provenance"]
    for field in ("gpu", "compute_capability", "driver", "cuda_driver", "nvcc", "pycuda"):
        prov[field] = gpu_prov.get(field)
    prov["derived_from"] = {k: v["provenance"]["date"] for k, v in used.items() if v}
    doc = {
        "experiment": "model",
        "title": "What limits each kernel: the model's prediction beside the measurement",
        "description": "Rates from the data files named in derived_from; counts from each "
        "kernel's launch geometry. No new measurement.",
        "provenance": prov,
        "columns": {"key": "", "kernel": "", "n": "", "counted_wavefronts_ratio": "",
                    "wavefronts_per_unit": "", "predicted_ms": "ms", "measured_ms": "ms",
                    "ratio": "", "limit": "", "rate": "", "value": "", "source": ""},
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path
