"""``cublas_check.json``: every size's cuBLAS time held against two other measures of it.

The book's cuBLAS numbers come from one binding (:class:`tilelab.experiments.cublas.Cublas`,
ctypes on PyCUDA's buffers, CUDA events, interleaved with a course kernel). Here, at every
size of the road's sweep, that median is set beside

- Nsight Compute's duration of the same cuBLAS kernel, plus the events' own overhead,
  measured as the difference between the course kernel's event median and its Nsight
  Compute duration (the few microseconds every event-timed launch carries);
- the median of cuBLAS through a second binding in a process of its own (PyTorch, else
  CuPy: :mod:`tilelab.experiments.blas_second`), timed the same way.

Where either differs from the events' median by more than :data:`TOLERANCE`, the size is
timed once more, and if it still differs, the experiment fails with the table (and writes
it as ``cublas_check.rejected.json``): a time that is not cuBLAS's kernel cannot reach the
book. The other experiments that time cuBLAS (``sgemm``, ``matmul``) hold their own
medians against this file's (:func:`verify`).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.catalog import road
from tilelab.catalog.problems import MATMUL
from tilelab.device.bench import time_interleaved
from tilelab.device.runtime import get_runtime
from tilelab.experiments import blas_second, counters
from tilelab.experiments.cublas import Cublas, package_version
from tilelab.experiments.datafile import DataFileError, read, write
from tilelab.experiments.ladder import METHOD

#: the sizes of chapter 6's sweep: powers of two, and shapes that are not tile multiples
SIZES = (1024, 2048, 3072, 4000, 4095, 4096, 6144, 8192)
#: the course kernel whose event overhead is measured beside cuBLAS's
REFERENCE = "ahead"
TOLERANCE = 0.02
REPEAT = 30
REPEAT_LARGE = 15  # at N > 4096, where one launch is 9 to 22 ms
NCU_LAUNCHES = 3  # of each kernel at each size, under Nsight Compute
METRICS = ["gpu__time_duration.sum"]


class CrossCheckFailed(RuntimeError):
    """A cuBLAS median that two other measures of the same kernel do not confirm."""


def _repeat(n: int) -> int:
    return REPEAT if n <= 4096 else REPEAT_LARGE


def _launches(rt, n: int, keep: list) -> dict[str, Any]:
    """cuBLAS and the reference kernel at N x N x N on one set of inputs (launchers)."""
    ref = road.kernel_refs()[REFERENCE]
    inputs = MATMUL.make_inputs((n, n, n), np.random.default_rng(n))
    a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
    c1, c2 = rt.mem_alloc(n * n * 4), rt.mem_alloc(n * n * 4)
    blas = Cublas()
    fn = rt.SourceModule(ref.source()).get_function(ref.name)
    grid = ref.launch.grid({"M": n, "N": n, "K": n})
    keep.extend([a, b, c1, c2, blas])
    n32 = np.int32(n)
    return {
        "cublas": lambda: blas.sgemm(a, b, c1, n, n, n),
        REFERENCE: lambda: fn(a, b, c2, n32, n32, n32, block=ref.launch.block, grid=grid),
    }


def child(sizes: tuple[int, ...]) -> None:
    """Under ncu: cuBLAS then the reference kernel, :data:`NCU_LAUNCHES` times each, per N."""
    rt = get_runtime("gpu")
    for n in sizes:
        keep: list = []
        runs = _launches(rt, n, keep)
        for key in ("cublas", REFERENCE):
            for _ in range(NCU_LAUNCHES):
                runs[key]()
                rt.synchronize()
        for obj in keep:
            if isinstance(obj, Cublas):
                obj.close()


def ncu_durations(sizes: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    """Nsight Compute's median duration (ms) of one cuBLAS call (its kernels summed, where it
    launches more than one) and of the reference kernel at each N, and the name of the
    kernel(s) cuBLAS chose. Launches are told apart by name: the reference kernel's
    :data:`NCU_LAUNCHES` close each size, and what comes before them is cuBLAS's."""
    launches, names = counters.profile(
        ["tilelab.experiments.cublas_check", "child", *map(str, sizes)], METRICS, None)
    ref_name = road.kernel_refs()[REFERENCE].name
    out, i = {}, 0
    for n in sizes:
        blas: list[tuple[str, float]] = []
        while i < len(launches) and ref_name not in names[i]:
            blas.append((names[i], launches[i]["gpu__time_duration_sum"] / 1e6))
            i += 1
        mine = [launches[j]["gpu__time_duration_sum"] / 1e6 for j in range(i, i + NCU_LAUNCHES)]
        if len(mine) != NCU_LAUNCHES or len(blas) % NCU_LAUNCHES or not blas:
            raise RuntimeError(f"ncu's launches at N = {n} do not split into {NCU_LAUNCHES} "
                               f"cuBLAS calls and {NCU_LAUNCHES} of {ref_name}: {names}")
        i += NCU_LAUNCHES
        per_call = len(blas) // NCU_LAUNCHES
        calls = [sum(ms for _, ms in blas[c * per_call:(c + 1) * per_call])
                 for c in range(NCU_LAUNCHES)]
        out[n] = {"ncu_ms": statistics.median(calls),
                  "reference_ncu_ms": statistics.median(mine),
                  "ncu_kernel": " + ".join(name for name, _ in blas[:per_call]),
                  "cublas_kernels": per_call}
    return out


def disagreements(event_ms: float, reference_event_ms: float, ncu: dict[str, Any],
                  second_ms: float) -> dict[str, float]:
    """How far the events' median is from the other two measures (fractions)."""
    overhead = reference_event_ms - ncu["reference_ncu_ms"]
    return {
        "event_overhead_ms": overhead,
        "ncu_disagreement": (event_ms - ncu["ncu_ms"] - overhead) / ncu["ncu_ms"],
        "second_disagreement": (event_ms - second_ms) / second_ms,
    }


def _time(rt, n: int) -> dict[str, Any]:
    keep: list = []
    t = time_interleaved(_launches(rt, n, keep), repeat=_repeat(n))
    for obj in keep:
        if isinstance(obj, Cublas):
            obj.close()
    return {
        "event_ms": t["cublas"].median_ms,
        "spread": t["cublas"].spread,
        "reference_event_ms": t[REFERENCE].median_ms,
        "submit_max_ms": max(t["cublas"].submitted_ms),
        "redone": t["cublas"].redone + t[REFERENCE].redone,
    }


def _within(d: dict[str, float]) -> bool:
    return abs(d["ncu_disagreement"]) <= TOLERANCE and abs(d["second_disagreement"]) <= TOLERANCE


def run(rt, out: Path, sizes: tuple[int, ...] = SIZES) -> Path:
    """Time, profile and cross-check cuBLAS at every size; raise where they disagree."""
    second = blas_second.measure(sizes, REPEAT)
    ncu = ncu_durations(sizes)
    rows, bad = [], []
    for n in sizes:
        row: dict[str, Any] = {"n": n, **_time(rt, n)}
        d = disagreements(row["event_ms"], row["reference_event_ms"], ncu[n], second["ms"][n])
        retimed = not _within(d)
        if retimed:  # once more, before the size counts as a disagreement
            row = {"n": n, **_time(rt, n)}
            d = disagreements(row["event_ms"], row["reference_event_ms"], ncu[n],
                              second["ms"][n])
        row.update({**ncu[n], "second_ms": second["ms"][n], "second_binding": second["binding"],
                    **d, "retimed": retimed, "agrees": _within(d),
                    "tflops": MATMUL.flops((n, n, n)) / row["event_ms"] / 1e9})
        rows.append(row)
        if not row["agrees"]:
            bad.append(row)
    columns = {"n": "", "event_ms": "ms", "spread": "", "reference_event_ms": "ms",
               "submit_max_ms": "ms", "redone": "", "ncu_ms": "ms", "reference_ncu_ms": "ms",
               "ncu_kernel": "", "cublas_kernels": "", "event_overhead_ms": "ms", "second_ms": "ms",
               "second_binding": "", "ncu_disagreement": "", "second_disagreement": "",
               "retimed": "", "agrees": "", "tflops": "TFLOP/s"}
    name = "cublas_check" if not bad else "cublas_check.rejected"
    path = write(
        out, name, "cuBLAS's SGEMM time, held against Nsight Compute and a second binding",
        f"At each N: cuBLAS (nvidia-cublas {package_version()}, ctypes on PyCUDA's buffers) "
        f"timed with CUDA events interleaved with the course kernel {REFERENCE!r}; Nsight "
        f"Compute's median duration of {NCU_LAUNCHES} launches of each; and cuBLAS through "
        f"{second['binding']} in a process of its own. ncu_disagreement: the events' median "
        "less the events' own overhead (the course kernel's event median less its ncu "
        "duration), against ncu's duration; second_disagreement: against the second "
        f"binding's median. A size off by more than {TOLERANCE:.0%} is timed again once; "
        "if it still is, the run fails.",
        columns, rows, method=METHOD,
        kernels={REFERENCE: road.kernel_refs()[REFERENCE].source()})
    if bad:
        raise CrossCheckFailed(
            "cuBLAS's event median disagrees with Nsight Compute or the second binding by "
            f"more than {TOLERANCE:.0%} at N = " + ", ".join(str(r["n"]) for r in bad)
            + f" (the table: {path})")
    return path


def verify(out: Path, medians: dict[int, float], what: str) -> dict[int, dict[str, Any]]:
    """Hold another experiment's cuBLAS medians (by N) against this file's, written in
    ``out`` by the same run (raise where one is off by more than :data:`TOLERANCE` or the
    file is missing); each N's cross-checked figures, to record beside the median."""
    path = Path(out) / "cublas_check.json"
    try:
        ref = {int(r["n"]): r for r in read(path).rows}
    except (DataFileError, KeyError, ValueError) as exc:
        raise CrossCheckFailed(f"{what} times cuBLAS, and its medians are held against "
                               f"{path}, written first by `tilelab bench cublas_check` in "
                               f"the same run ({exc})") from None
    got, bad = {}, []
    for n, ms in medians.items():
        if n not in ref:
            bad.append(f"N = {n}: not in {path.name}")
            continue
        r = ref[n]
        off = (ms - r["event_ms"]) / r["event_ms"]
        got[n] = {"check_event_ms": r["event_ms"], "ncu_ms": r["ncu_ms"],
                  "second_ms": r["second_ms"], "check_disagreement": off}
        if abs(off) > TOLERANCE:
            bad.append(f"N = {n}: {ms:.4f} ms here, {r['event_ms']:.4f} ms cross-checked")
    if bad:
        raise CrossCheckFailed(f"{what}'s cuBLAS medians are off the cross-checked ones by "
                               f"more than {TOLERANCE:.0%}: " + "; ".join(bad))
    return got


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(tuple(int(a) for a in sys.argv[2:]))
    else:
        print(json.dumps({"usage": f"python -m {__name__} child N..."}))
        sys.exit(2)
