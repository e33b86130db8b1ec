"""``start_load.json``: whether other processes' CUDA starts and ends move a timed launch.

In a class run that shares a GPU, every submission starts CUDA in four processes (the
grading worker, compute-sanitizer's two tools and Nsight Compute), and each one's start and
teardown hold the GPU's lock shared (:func:`tilelab.isolation.gpulock.start_cuda`): a timed
round waits until none is in flight. Whether a context's start or end, in another process,
changes the time of a kernel running meanwhile is the driver's matter, not the course's.
So the grader's own speed run (:func:`tilelab.grading.timed.measure_speed`: the tiled
exercise's reference against its baseline, checked launches, medians) is measured with the
GPU to itself, then while :data:`CHURN` processes of one kind start and end back to back
on the same GPU, taking no lock (each the grading worker that starts CUDA and waits for a
source that never comes, as a tool started ahead of a grade does, plain or under
compute-sanitizer's memcheck or racecheck or under Nsight Compute, which also makes its
profiled warm-up launch, :func:`tilelab.grading.counters.warm_up`), for each kind, then
alone again. "Equal" means every figure (the speedup and both kernels' median times) is
within :data:`TOLERANCE` of the first reading alone, or within what the second reading
alone differs by. Where every kind is equal, a class run's CUDA starts and ends may take
no lock (``TILELAB_START_LOCK=none``); otherwise they keep taking it shared (the default).

    python -m tilelab.experiments.start_load setting book/data/start_load.json
prints the setting this file supports: ``none`` or ``shared``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.experiments.datafile import print_setting, write
from tilelab.grading import counters, sanitizer
from tilelab.grading.judge import Findings, judge
from tilelab.grading.steps import build
from tilelab.grading.timed import measure_speed
from tilelab.grading.verdict import Verdict
from tilelab.isolation import gpulock

#: the exercise whose speed run is measured, and whose tools start beside it
EXERCISE = "tiled"
#: the kinds of start: the grading worker's own, and each tool's
KINDS = ("cuda", "memcheck", "racecheck", "ncu")
#: processes of one kind starting and ending at once beside the speed runs
CHURN = 4
#: speed runs per reading (each figure is their median)
RUNS = 5
#: seconds the churning processes run before the first speed run of a reading
SETTLE = 3.0
#: a figure under churn "equal" to the alone one: within this fraction of it, or within
#: what two readings alone differ by
TOLERANCE = 0.01
FIGURES = ("speedup", "candidate_ms", "baseline_ms")
COLUMNS = {"kind": "", "processes": "", "starts": "", "equal": "", "differing": "",
           "speedup_alone": "x", "speedup_beside": "x", "shift": "%", "alone_spread": "%",
           "error": ""}


def command(kind: str, source: str) -> list[str]:
    """The process a tool of ``kind`` starts ahead of a grade: the grading worker, which
    starts CUDA and waits for a source (its standard input closed: it never gets one)."""
    ex = exercises.get(EXERCISE)
    worker = [sys.executable, "-m", "tilelab.grading.worker", "--launch-once", "--exercise",
              EXERCISE, "--source", source, "--wait"]
    if kind == "cuda":
        return worker
    if kind in sanitizer.TOOLS:
        exe = sanitizer.find_sanitizer()
        if exe is None:
            raise RuntimeError("compute-sanitizer is not installed")
        return sanitizer.command(exe, kind, EXERCISE, source,
                                 shape=sanitizer.grading_shape(EXERCISE), wait=True)
    if kind == "ncu":
        ncu = counters.find_ncu()
        if ncu is None:
            raise RuntimeError("ncu is not installed")
        return counters.command(ncu, ex, source, counters.draw(), gpulock.counted_mode(),
                                wait=True, sections=os.path.dirname(source))
    raise ValueError(f"no start of kind {kind!r}; choose from {', '.join(KINDS)}")


def churn(kind: str, seconds: float, stop: Path) -> None:
    """A churning process: start ``kind``'s process again and again until ``stop`` exists
    (or ``seconds`` pass); print how many started and ended."""
    done, end = 0, time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="tilelab-churn-") as tmp:
        argv = command(kind, os.path.join(tmp, "kernel.cu"))
        while time.monotonic() < end and not stop.exists():
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120, check=False)
            done += 1
    print(done, flush=True)


class Churn:
    """:data:`CHURN` processes of ``kind`` starting and ending CUDA for the ``with`` block;
    ``starts`` after it: how many ended meanwhile, all processes together."""

    def __init__(self, kind: str, processes: int = CHURN) -> None:
        self.kind, self.processes, self.starts = kind, processes, 0

    def __enter__(self) -> Churn:
        self._tmp = tempfile.TemporaryDirectory(prefix="tilelab-churn-")
        self.stop = Path(self._tmp.name) / "stop"
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", __name__, "churn", self.kind, "600", str(self.stop)],
            stdout=subprocess.PIPE, text=True) for _ in range(self.processes)]
        time.sleep(SETTLE)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.touch()
        for p in self.procs:
            out, _ = p.communicate(timeout=180)
            self.starts += int(out.split()[-1]) if out.split() else 0
        self._tmp.cleanup()


def reading(rt: Any, fn: Any, runs: int = RUNS) -> dict[str, float]:
    """The median of each figure over ``runs`` graded speed runs of the reference."""
    ex = exercises.get(EXERCISE)
    got: dict[str, list[float]] = {f: [] for f in FIGURES}
    rng = np.random.default_rng()
    for _ in range(runs):
        found = Findings()
        measure_speed(rt, fn, ex, rng, found)
        v = judge(Verdict(exercise=EXERCISE, backend="gpu"), found)
        if not v.speed_measured or v.speedup is None:
            raise RuntimeError(f"the speed run measured nothing: {v.messages}")
        for f in FIGURES:
            got[f].append(float(getattr(v, f)))
    return {f: statistics.median(x) for f, x in got.items()}


def shifts(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Each figure's relative difference from ``a`` to ``b``."""
    return {f: abs(b[f] - a[f]) / a[f] for f in FIGURES}


def compare(kind: str, alone: dict[str, float], again: dict[str, float],
            beside: dict[str, float], starts: int, processes: int = CHURN) -> dict[str, Any]:
    """One kind's row: equal where each figure beside the churn is within
    :data:`TOLERANCE` of the first reading alone, or within the two alone readings' own
    difference."""
    noise, drift = shifts(alone, again), shifts(alone, beside)
    differing = [f for f in FIGURES if drift[f] > max(TOLERANCE, noise[f])]
    return {"kind": kind, "processes": processes, "starts": starts,
            "equal": not differing and starts > 0, "differing": ", ".join(differing),
            "speedup_alone": alone["speedup"], "speedup_beside": beside["speedup"],
            "shift": round(100 * max(drift.values()), 3),
            "alone_spread": round(100 * max(noise.values()), 3), "error": "",
            "alone": alone, "beside": beside}


def run(rt: Any, out: Path) -> Path:
    """The speed run alone, beside each kind of churn, and alone again."""
    t0 = time.monotonic()
    ex = exercises.get(EXERCISE)
    with settings.environ({gpulock.ENV: None}):  # nothing keeps them apart here
        fn = build(rt, ex.reference.source()).get_function(ex.kernel)
        reading(rt, fn, 1)  # warm: the baseline's build, the first launches
        alone = reading(rt, fn)
        beside: dict[str, dict[str, float] | str] = {}
        starts: dict[str, int] = {}
        for kind in KINDS:
            try:
                command(kind, "kernel.cu")
            except RuntimeError as exc:
                beside[kind], starts[kind] = str(exc), 0
                continue
            with Churn(kind) as c:
                beside[kind] = reading(rt, fn)
            starts[kind] = c.starts
        again = reading(rt, fn)
    rows = []
    for kind in KINDS:
        b = beside[kind]
        if isinstance(b, str):
            rows.append({"kind": kind, "processes": CHURN, "starts": 0, "equal": False,
                         "differing": "", "speedup_alone": alone["speedup"],
                         "speedup_beside": None, "shift": None, "alone_spread": None,
                         "error": b})
        else:
            rows.append(compare(kind, alone, again, b, starts[kind]))
    return write(out, "start_load", "A timed speed run, alone and beside other processes' "
                 "CUDA starts", description(rows, time.monotonic() - t0), COLUMNS, rows,
                 method="the grader's speed run (tilelab.grading.timed.measure_speed)")


def description(rows: list[dict[str, Any]], seconds: float) -> str:
    """The data file's description: what was measured, and the setting ``rows`` support."""
    return (
        f"The grader's speed run of the {EXERCISE} exercise's reference against its baseline "
        f"({RUNS} runs per reading, each figure their median), with the GPU to itself, then "
        f"while {CHURN} processes of one kind started CUDA and ended back to back on the "
        "same GPU, taking no lock (the grading worker as a tool starts it ahead of a grade: "
        "plain, under compute-sanitizer's memcheck or racecheck, or under Nsight Compute "
        "with its profiled warm-up launch of an empty kernel; "
        "starts: how many ended meanwhile), then alone again. equal: the speedup and both "
        f"kernels' median times beside the starts were within {TOLERANCE:.0%} of the first "
        "reading alone, or within what the second reading alone differed by (shift and "
        "alone_spread: the largest relative difference of any figure, alone against beside "
        f"and alone twice). Setting this supports: TILELAB_START_LOCK={setting(rows)}. "
        f"Took {seconds:.0f} s.")


def setting(rows: Sequence[dict[str, Any]]) -> str:
    """``none`` where every kind of start was measured, with starts made meanwhile, and
    equal; ``shared`` otherwise."""
    kinds = {r["kind"] for r in rows}
    ok = kinds == set(KINDS) and all(r["equal"] and r["starts"] > 0 for r in rows)
    return gpulock.NONE if ok else gpulock.SHARED


def main(argv: list[str]) -> int:
    if argv[:1] == ["churn"] and len(argv) == 4:
        churn(argv[1], float(argv[2]), Path(argv[3]))
        return 0
    return print_setting(argv, "tilelab.experiments.start_load", setting)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
