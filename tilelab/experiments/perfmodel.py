"""What limits each course kernel: counts from its geometry, times from the GPU's rates.

Three resources are counted for every kernel, from the addresses its warps touch:

- **DRAM bytes**: the compulsory traffic (each input read once, the output written once),
  at the measured device-copy bandwidth;
- **L1/shared-memory data-path wavefronts**: on Volta to Hopper, L1 and shared memory are
  one SRAM with one data path that returns one *wavefront* (128 bytes, one 4-byte word for
  each of 32 threads) per clock per SM. A warp's access costs one wavefront per distinct
  128-byte line (global loads and stores, through L1) or one per pass of the shared-memory
  banks, by the one rule of :mod:`tilelab.catalog.banks` (which ``tilelab bench
  bank_wide`` holds against the GPU's counts);
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

from tilelab.catalog import road
from tilelab.catalog.banks import bank_passes, wavefronts
from tilelab.experiments import provenance

LINE = 128  # bytes: an L1 line, and the data of one wavefront
ISSUE_PER_CLOCK = 4  # warp instructions per clock per SM: 4 sub-partitions, 1 dispatch each
WAVEFRONT_BYTES = 128  # bytes one wavefront returns (32 banks x 4 bytes)
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


def wide_passes(word_addresses: Sequence[int], load: bool = True) -> int:
    """Wavefronts of a 128-bit shared load (or store) whose lanes start at these
    (4-aligned) words, in lane order (:func:`tilelab.catalog.banks.wavefronts`)."""
    return wavefronts([4 * w for w in word_addresses], 16, load)


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
                per_phase += wide_passes([ty * pa + k for _, ty in lanes])
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
        # in[x * cols + (y + j)]: a column of in (a line per thread), out written in rows
        "transpose_reads": lines([4 * (tx * n + ty) for tx, ty in lanes]) + read,
        "transpose_shared": read + bank_passes([ty * 32 + tx for tx, ty in lanes])
        + bank_passes([tx * 32 + ty for tx, ty in lanes]) + read,
        "transpose_padded": read + bank_passes([ty * 33 + tx for tx, ty in lanes])
        + bank_passes([tx * 33 + ty for tx, ty in lanes]) + read,
    }[key]
    instr = 2 if key in ("copy", "transpose_naive", "transpose_reads") else 4
    warp_steps = n * n / 32
    return Counts(key, (n // 32) ** 2, warp_steps * per, warp_steps * instr, 8.0 * n * n,
                  0.0, "per warp row", per)


def bank_stride_counts(stride: int, blocks: int = 1024, iters: int = 4096) -> Counts:
    """The bank-stride microbenchmark: each warp reads s[lane * stride] ``iters`` times."""
    per = bank_passes([(lane * stride) % 4096 for lane in range(32)])
    loads = blocks * 8 * iters
    return Counts(f"stride {stride}", blocks, loads * per, loads * 2, 0.0, 0.0,
                  "per load", per)


def _defines(key: str) -> dict[str, int]:
    return {k: int(v) for k, v in road.kernel_refs()[key].defines}


def _scalar_tile_counts(key: str, d: dict[str, int], nt: int) -> tuple[float, float, float]:
    """Steps 1 and 2 (scalar tiles, ``e -> (e / width, e % width)``): wavefronts, issue slots
    and FFMAs of one warp for one tile along K, warp 0's lanes standing for every warp."""
    bm, bn, bk, tm = d["BM"], d["BN"], d["BK"], d["TM"]
    lanes = range(32)
    wf = instr = 0.0
    for rows, cols in ((bm, bk), (bk, bn)):  # A's tile, then B's: one element per slot
        slots = rows * cols // nt
        g = lines([4 * ((e // cols) * 4096 + e % cols) for e in lanes])
        st = bank_passes([(e // cols) * cols + e % cols for e in lanes])
        wf += slots * (g + st)
        instr += slots * 2
    if road.base_of(key) == "regblock_1d":  # block (BN, BM / TM): a warp is x of one y
        # As[ty + i * ROWS][k..k+3] (one address: broadcast), Bs[k][tx] (32 words)
        a_lds, b_lds = tm * bk // 4, bk
        wf += a_lds * wide_passes([0] * 32) + b_lds * bank_passes([tx for tx in lanes])
        ffma = bk * tm
    else:  # block (BN / TN, BM / TM) = 16 x 16: a warp is two rows of 16 threads
        tn, cols = d["TN"], bn // d["TN"]
        a_lds, b_lds = tm * bk // 4, tn * bk
        wf += a_lds * wide_passes([(i // cols) * bk for i in lanes])
        wf += b_lds * bank_passes([i % cols for i in lanes])
        ffma = bk * tm * tn
    instr += a_lds + b_lds + ffma + 2  # + two barriers
    return wf, instr, ffma


def _wide_tile_counts(key: str, d: dict[str, int], nt: int) -> tuple[float, float, float]:
    """Steps 3 to 6 (float4 tiles, A stored transposed): wavefronts, issue slots and FFMAs
    of one warp for one tile along K."""
    bm, bn, bk, tm, tn = d["BM"], d["BN"], d["BK"], d["TM"], d["TN"]
    lanes = range(32)
    la, lb = bm * bk // 4 // nt, bk * bn // 4 // nt  # float4 slots per thread
    if d.get("A_BY_ROW"):
        a_rc = [(e % bm, (e // bm) * 4) for e in lanes]
    else:
        a_rc = [(e // (bk // 4), (e % (bk // 4)) * 4) for e in lanes]
    b_rc = [(e // (bn // 4), (e % (bn // 4)) * 4) for e in lanes]
    a_lines = lines([4 * (r * 4096 + c) for r, c in a_rc])
    b_lines = lines([4 * (r * 4096 + c) for r, c in b_rc])
    a_store = bank_passes([c * bm + r for r, c in a_rc])  # As[c][r]: one of four STS.32
    b_store = wide_passes([r * bn + c for r, c in b_rc], load=False)
    if key.startswith("async"):  # four 4-byte copies of A, one 16-byte copy of B
        wf = la * 4 * (a_lines + a_store) + lb * (b_lines + b_store)
        instr = la * 4 + lb
    else:
        wf = la * (a_lines + 4 * a_store) + lb * (b_lines + b_store)
        instr = (la + lb) + (4 * la + lb)
    if "WM" in d:
        wn, wniter = d["WN"], d["WNITER"]
        wmiter = d["WM"] * wn // (32 * tm * tn * wniter)
        wsubm, wsubn = d["WM"] // wmiter, wn // wniter
        a_lds, b_lds = wmiter * tm // 4, wniter * tn // 4
        a_words = [(lane // (wsubn // tn)) * tm for lane in lanes]
        b_words = [(lane % (wsubn // tn)) * tn for lane in lanes]
        tm_all, tn_all = wmiter * tm, wniter * tn
        del wsubm
    else:  # step 3: a contiguous TM x TN block per thread
        a_lds, b_lds = tm // 4, tn // 4
        a_words = [(t // (bn // tn)) * tm for t in lanes]
        b_words = [(t % (bn // tn)) * tn for t in lanes]
        tm_all, tn_all = tm, tn
    wf += bk * (a_lds * wide_passes(a_words) + b_lds * wide_passes(b_words))
    ffma = bk * tm_all * tn_all
    barriers = 2 if key.startswith(("vec4", "warptile")) else 1
    instr += bk * (a_lds + b_lds) + ffma + barriers
    return wf, instr, ffma


def _swizzle_tile_counts(key: str, d: dict[str, int], nt: int) -> tuple[float, float, float]:
    """Step 7 (16-byte copies of both tiles, A's rows kept and swizzled or padded):
    wavefronts, issue slots and FFMAs of one warp for one tile along K."""
    bm, bn, bk, tm, tn = d["BM"], d["BN"], d["BK"], d["TM"], d["TN"]
    kc, lcols = bk // 4, d["WN"] // tn
    row = bk + d.get("PAD", 0)
    rpl = 1 if kc >= 8 else 8 // kc

    def a_at(m: int, c: int) -> int:  # the kernel's a_at: floats from the stage's start
        return m * row + 4 * (c ^ ((m // rpl) % kc) if d.get("SWIZZLE", 1) else c)

    lanes = range(32)
    la, lb = bm * kc // nt, bk * bn // 4 // nt  # 16-byte copies per thread
    a_rc = [(e // kc, e % kc) for e in lanes]
    b_rc = [(e // (bn // 4), (e % (bn // 4)) * 4) for e in lanes]
    wf = la * (lines([4 * (r * 4096 + 4 * c) for r, c in a_rc])
               + wide_passes([a_at(r, c) for r, c in a_rc], load=False))
    wf += lb * (lines([4 * (r * 4096 + c) for r, c in b_rc])
                + wide_passes([r * bn + c for r, c in b_rc], load=False))
    # per four steps along k: TM loads of A (four k each), 4 x TN / 4 loads of B
    a_words = [a_at(lane // lcols, 0) for lane in lanes]
    b_words = [4 * (lane % lcols) for lane in lanes]
    wf += kc * (tm * wide_passes(a_words) + tn * wide_passes(b_words))
    ffma = bk * tm * tn
    instr = (la + lb) + kc * (tm + tn) + ffma + 1  # copies, shared loads, FFMAs, a barrier
    return wf, instr, ffma


def road_counts(key: str, n: int) -> Counts:
    """A step or configuration of the road to cuBLAS (chapter 6) at N x N x N: per tile
    along K, each warp's tile copies (global lines, shared passes), its shared loads and
    its FFMAs, counted from the kernel's geometry (``road.kernel_refs``)."""
    ref = road.kernel_refs()[key]
    d = _defines(key)
    nt = int(math.prod(ref.launch.block))
    counts = (_scalar_tile_counts if key.startswith("regblock") else
              _swizzle_tile_counts if key.startswith("swizzle") else _wide_tile_counts)
    wf, instr, ffma = counts(key, d, nt)
    blocks = math.ceil(n / d["BM"]) * math.ceil(n / d["BN"])
    warp_tiles = blocks * (nt // 32) * math.ceil(n / d["BK"])
    return Counts(key, blocks, warp_tiles * wf, warp_tiles * instr, 12.0 * n * n,
                  warp_tiles * ffma, "per FFMA", wf / ffma)


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
    "transpose_reads": lambda n: transpose_counts("transpose_reads", n),
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


def _counted(cnt: dict | None, kernel: str, n: int) -> dict[str, Any]:
    """The counters experiment's row of ``kernel`` at ``n`` ({} where it has none)."""
    for r in (cnt or {}).get("rows", []):
        if r["kernel"] == kernel and r["n"] == n:
            return r
    return {}


def _ratio(seen: float | None, model: float) -> float | None:
    return seen / model if seen and model else None


ROAD_COUNT_N = 4096  # the size the counters experiment profiles the road's steps at


def kernel_rows(data: Path, rates: Rates) -> list[dict[str, Any]]:
    """One row per measured (kernel, n) of matmul.json, transpose.json, bank_stride.json
    and sgemm.json (the road to cuBLAS)."""
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
        seen = _counted(cnt, key, count_n).get("l1tex__data_pipe_lsu_wavefronts_sum")
        rows.append(_row(family, key, n, ms, c, p) | {
            "counted_wavefronts_ratio": _ratio(seen, COUNTERS[key](count_n).wavefronts),
        })
    refs = road.kernel_refs()
    for r in (_load(data, "sgemm") or {}).get("rows", []):
        if r["kernel"] not in refs or r["kernel"] in COUNTERS:
            continue
        c = road_counts(r["kernel"], r["n"])
        rows.append(_row("road", r["kernel"], r["n"], r["median_ms"], c, predict(c, rates))
                    | _road_counted(cnt, r["kernel"], rates))
    bank = _load(data, "bank_stride")
    for r in (bank or {}).get("rows", []):
        c = bank_stride_counts(r["stride"])
        rows.append(_row("bank_stride", f"stride{r['stride']}", r["stride"], r["median_ms"],
                         c, predict(c, rates)) | {"counted_wavefronts_ratio": None})
    return rows


def _road_counted(cnt: dict | None, key: str, rates: Rates) -> dict[str, Any]:
    """Nsight Compute's counts of a road kernel at ``ROAD_COUNT_N`` against the model's:
    wavefronts and instructions (ncu / model), the share of the SMs' issue slots used, and
    the bank conflicts ncu counted per shared load and store instruction."""
    seen = _counted(cnt, key, ROAD_COUNT_N)
    model = road_counts(key, ROAD_COUNT_N)
    inst, cycles = seen.get("smsp__inst_executed_sum"), seen.get("sm__cycles_elapsed_max")
    ld, st = (seen.get("smsp__inst_executed_op_shared_ld_sum"),
              seen.get("smsp__inst_executed_op_shared_st_sum"))
    ld_conf = seen.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld_sum")
    st_conf = seen.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st_sum")
    return {
        "counted_wavefronts_ratio": _ratio(seen.get("l1tex__data_pipe_lsu_wavefronts_sum"),
                                           model.wavefronts),
        "counted_instructions_ratio": _ratio(inst, model.instructions),
        "issue_used": (inst / (ISSUE_PER_CLOCK * rates.sm_count * cycles)
                       if inst and cycles else None),
        "ld_conflicts_per_lds": ld_conf / ld if ld and ld_conf is not None else None,
        "st_conflicts_per_sts": st_conf / st if st and st_conf is not None else None,
    }


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


SOURCES = ("device", "shared_bw", "counters", "matmul", "transpose", "bank_stride", "sgemm")


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
                    "ratio": "", "limit": "", "rate": "", "value": "", "source": "",
                    "counted_instructions_ratio": "", "issue_used": "",
                    "ld_conflicts_per_lds": "", "st_conflicts_per_sts": ""},
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path
