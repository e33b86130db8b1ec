"""``counters_load.json``: whether the counts the lesson gate reads change when another
process keeps the GPU busy.

The lesson gate (:mod:`tilelab.grading.counters`) reads counts of one launch: shared-memory
requests and wavefronts, global requests and sectors. Counts, not times; but whether
Nsight Compute's counts of a launch leave out another process's kernels that the GPU runs
meanwhile is the driver's matter, not the course's. So each case here (the reference of an
exercise whose lesson is graded, and a kernel that skips that lesson) is counted by the
grader's own command (:func:`tilelab.grading.counters.measure`) with the GPU to itself,
then again while a second process launches a tiled product back to back on the same GPU.
Two readings alone differ a little already (an H100's shared-memory wavefronts, by
tenths of a percent), so "equal" means within :data:`TOLERANCE`, or within that spread.
Where every case's counts are equal, a class run may count beside other tasks' untimed
work (``TILELAB_COUNTERS_LOCK=shared``, see :mod:`tilelab.isolation.gpulock`); where any
differs, or one could not be read, the counted launches keep the GPU alone (the default).

    python -m tilelab.experiments.counters_load setting book/data/counters_load.json
prints the setting this file supports: ``shared`` or ``alone``.
"""

from __future__ import annotations

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
from tilelab.catalog.variants import VARIANTS
from tilelab.device.bench import prepared_launch
from tilelab.device.runtime import get_runtime
from tilelab.experiments.datafile import print_setting, write
from tilelab.grading import counters
from tilelab.isolation import gpulock

#: (exercise, variant): a kernel for each lesson the counters grade (an uncoalesced walk,
#: tiles reused, bank conflicts in a transpose, a padded tile in a matrix product), every
#: figure of the gate read in each
CASES = (("naive", "xrow"), ("tiled", "reference"), ("transpose_padded", "unpadded"),
         ("matmul_at_padded", "reference"))
#: the load: the tiled product's reference at this size, launched back to back
LOAD_SHAPE = (1024, 1024, 1024)
LOAD_SECONDS = 300.0
#: a count under load "equal" to the alone one: within this fraction of it, or within what
#: two readings alone already differ by (an H100's shared-memory wavefronts vary by up to
#: 0.3 % between two identical launches on an idle GPU; requests and sectors do not vary)
TOLERANCE = 0.01
COLUMNS = {"exercise": "", "kernel": "", "equal": "", "differing": "", "alone_spread": "%",
           "load_spread": "%", "load_launches": "", "error": ""}


def load(seconds: float, stop: Path) -> None:
    """The busy process: launch the tiled product until ``stop`` exists (or ``seconds``
    pass), printing ``ready`` once launching and the launches made at its end."""
    rt = get_runtime("gpu")
    ex = exercises.get("tiled")
    fn = rt.SourceModule(ex.reference.source()).get_function(ex.kernel)
    keep: list = []
    inputs = ex.problem.make_inputs(LOAD_SHAPE, np.random.default_rng(0))
    launch = prepared_launch(rt, fn, ex.problem, ex.launch, LOAD_SHAPE, inputs, keep)
    launches, end = 0, time.monotonic() + seconds
    launch()
    rt.synchronize()
    print("ready", flush=True)
    while time.monotonic() < end and not stop.exists():
        for _ in range(8):
            launch()
        rt.synchronize()
        launches += 8
    print(launches, flush=True)


class Busy:
    """A second process keeping the GPU busy for the ``with`` block; ``launches`` after it:
    how many kernels it ran meanwhile."""

    def __enter__(self) -> Busy:
        self._tmp = tempfile.TemporaryDirectory(prefix="tilelab-busy-")
        self.stop = Path(self._tmp.name) / "stop"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, "load", str(LOAD_SECONDS), str(self.stop)],
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            raise RuntimeError("the busy process did not start launching")
        self.launches = 0
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.touch()
        out, _ = self.proc.communicate(timeout=120)
        self.launches = int(out.split()[-1]) if out.split() else 0
        self._tmp.cleanup()


def _counts(exercise_id: str, source: str) -> dict[str, float] | str:
    try:
        return counters.measure(exercise_id, source)
    except counters.CountersUnavailable as exc:
        return f"not read: {str(exc).splitlines()[0]}"


def spread(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Each count's relative difference between two readings (0 where both are 0)."""
    return {k: abs(a.get(k, 0.0) - b.get(k, 0.0)) / max(abs(a.get(k, 0.0)), abs(b.get(k, 0.0)))
            if a.get(k) or b.get(k) else 0.0 for k in counters.METRICS}


def case(exercise_id: str, key: str) -> dict[str, Any]:
    """One kernel counted alone twice (how much two readings differ anyway), then beside the
    busy process: equal where every count under load is within :data:`TOLERANCE` of the
    first reading, or within the two alone readings' own difference."""
    source = next(v for v in VARIANTS[exercise_id] if v.key == key).source()
    alone, again = _counts(exercise_id, source), _counts(exercise_id, source)
    with Busy() as busy:
        loaded = _counts(exercise_id, source)
    error = next((c for c in (alone, again, loaded) if isinstance(c, str)), "")
    noise = {} if error else spread(alone, again)  # type: ignore[arg-type]
    drift = {} if error else spread(alone, loaded)  # type: ignore[arg-type]
    differing = sorted(k for k in drift if drift[k] > max(TOLERANCE, noise[k]))
    return {"exercise": exercise_id, "kernel": key, "equal": not error and not differing,
            "differing": ", ".join(differing),
            "alone_spread": round(100 * max(noise.values(), default=0.0), 3),
            "load_spread": round(100 * max(drift.values(), default=0.0), 3),
            "load_launches": busy.launches, "error": error,
            "alone": alone if not isinstance(alone, str) else {},
            "under_load": loaded if not isinstance(loaded, str) else {}}


def run(rt: Any, out: Path) -> Path:
    """Every case of :data:`CASES`, alone and under load."""
    del rt  # ncu's child and the busy process start CUDA themselves
    t0 = time.monotonic()
    with settings.environ({gpulock.ENV: None}):  # nothing keeps the two apart here
        rows = [case(e, k) for e, k in CASES]
    return write(out, "counters_load", "The lesson gate's counts, alone and beside a busy "
                 "process", description(rows, time.monotonic() - t0), COLUMNS, rows,
                 method="ncu --clock-control none, the grader's metrics")


def description(rows: list[dict[str, Any]], seconds: float) -> str:
    """The data file's description: what was read, and the setting ``rows`` support."""
    return (
        "Each kernel counted by the grader's Nsight Compute command (one timed launch at the "
        "exercise's speed shape) with the GPU to itself, then while a second process "
        "launched the tiled product at 1024 x 1024 x 1024 back to back on the same GPU "
        "(load_launches: how many it ran meanwhile). equal: every count the lesson gate "
        f"reads was within {TOLERANCE:.0%} of the first reading alone, or within what a "
        "second reading alone differed by (alone_spread and load_spread: the largest "
        "relative difference of any count, alone twice and alone against loaded). Setting "
        f"this supports: {setting(rows)}. Took {seconds:.0f} s.")


def setting(rows: Sequence[dict[str, Any]]) -> str:
    """``shared`` where every case was read both ways, with the busy process running, and
    equal; ``alone`` otherwise."""
    ok = bool(rows) and all(r["equal"] and r["load_launches"] > 0 for r in rows)
    return gpulock.SHARED if ok else gpulock.ALONE


def main(argv: list[str]) -> int:
    if argv[:1] == ["load"] and len(argv) == 3:
        load(float(argv[1]), Path(argv[2]))
        return 0
    return print_setting(argv, "tilelab.experiments.counters_load", setting)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
