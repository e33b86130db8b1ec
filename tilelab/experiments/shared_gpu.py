"""``shared_gpu.json``: what a second grader on the GPU does to speed verdicts, with and
without the GPU's lock.

The two variants that fix the tiled exercise's margin (the slowest kernel that must pass
its gate and the fastest that must fail it) are graded by the real grader, in its own
process as in a class run: ``repeat`` times each with the GPU to itself, then ``repeat``
times each with a second grader grading the same kernel on the same GPU at the same time,
then the same with the GPU's lock (:mod:`tilelab.isolation.gpulock`: the graders' untimed
GPU work overlaps, each round of timed launches has the GPU alone, one Nsight Compute at a
time), as a class run with several tasks per GPU grades. Each row is one kernel in one
setting: its measured speedups and how many verdicts fell on the wrong side of the gate.
Only speedups are counted: without the lock the two graders' Nsight Compute runs may
collide (the driver serves one profiler per GPU), which leaves a lesson not measured but
changes no measured speedup. ``TILELAB_SHARED_GPU_REPEAT`` (default 5) sets ``repeat``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.catalog.variants import VARIANTS
from tilelab.device.bench import LEAD_MS
from tilelab.experiments.datafile import write
from tilelab.grading.sandbox import grade_source
from tilelab.isolation import gpulock

EXERCISE = "tiled"
KEYS = ("k16", "naive")  # the slowest must-pass and the fastest must-fail (calibration.json)
LOCKED = "two graders on one GPU, each timed round alone"
COLUMNS = {"variant": "", "must": "", "setting": "", "verdicts": "", "median": "x",
           "min": "x", "max": "x", "spread": "", "wrong_side": "", "gate": "x"}


def _speedup(source: str) -> float:
    # a fresh comment: never a cached verdict, always a measurement
    v = grade_source(EXERCISE, f"{source}\n// {uuid.uuid4()}\n", backend_name="gpu",
                     sanitize=False)
    if v.speedup is None:
        raise RuntimeError(f"no speed measured for {EXERCISE}: {v.messages}")
    return v.speedup


def _row(variant: Any, setting: str, speedups: list[float], gate: float) -> dict[str, Any]:
    med = statistics.median(speedups)
    wrong = sum((s < gate) if variant.must == "pass" else (s >= gate) for s in speedups)
    return {"variant": variant.label, "must": variant.must, "setting": setting,
            "verdicts": len(speedups), "median": med, "min": min(speedups),
            "max": max(speedups), "spread": (max(speedups) - min(speedups)) / med,
            "wrong_side": wrong, "gate": gate}


REPEAT_ENV = "TILELAB_SHARED_GPU_REPEAT"


def run(rt: Any, out: Path, repeat: int | None = None) -> Path:
    """Each variant graded alone, then two graders at once on one GPU, without and with
    the GPU's lock."""
    del rt  # the graders run in processes of their own, as in a class run
    repeat = repeat or int(os.environ.get(REPEAT_ENV, "5"))
    gate = exercises.get(EXERCISE).gate
    variants = [v for v in VARIANTS[EXERCISE] if v.key in KEYS]
    rows = []
    t0 = time.monotonic()
    for variant in variants:
        src = variant.source()
        alone = [_speedup(src) for _ in range(repeat)]
        with ThreadPoolExecutor(2) as pool:
            shared = [s for _ in range(repeat) for s in pool.map(_speedup, (src, src))]
        with (tempfile.TemporaryDirectory(prefix="tilelab-gpu-lock-") as scratch,
              settings.environ({gpulock.ENV: str(gpulock.make(Path(scratch), "0"))}),
              ThreadPoolExecutor(2) as pool):
            locked = [s for _ in range(repeat) for s in pool.map(_speedup, (src, src))]
        rows += [_row(variant, "one grader per GPU", alone, gate),
                 _row(variant, "two graders on one GPU", shared, gate),
                 _row(variant, LOCKED, locked, gate)]
    return write(
        out, "shared_gpu", "Speed verdicts with the GPU to itself and shared by two graders",
        f"The real grader (its own process, sandboxed where bubblewrap works) grades each of "
        f"the {EXERCISE} exercise's two variants nearest its gate {repeat} times alone, then "
        f"{repeat} times as one of two graders grading at once on the same GPU "
        f"({2 * repeat} verdicts), then the same with the GPU's lock (each round of timed "
        f"launches alone on the GPU). wrong_side counts verdicts on the wrong side of the "
        f"gate (speedups only: without the lock the graders' Nsight Compute runs may "
        f"collide, which leaves a lesson not measured but no speedup changed). "
        f"Took {time.monotonic() - t0:.0f} s.",
        COLUMNS, rows,
        method="tilelab's speed step: CUDA events, baseline and kernel interleaved, "
               f"L2 flushed and the GPU given a {LEAD_MS:g} ms lead before each timed launch, "
               "median",
    )
