"""The timed run: a kernel's speed measured on a GPU so that nothing it keeps between
launches can stand in for work.

The candidate, the gate's baseline and, where the exercise names one, a kernel that skips
the lesson are timed interleaved (:func:`tilelab.device.bench.time_checked`): every timed
launch gets new inputs, its output refilled with NaN and buffers at new addresses, and its
output checked on sampled rows against float64 (:func:`launch_check`). The grader's speed
step (:func:`tilelab.grading.gpu_steps.time_speed`), the calibration of the gates
(:mod:`tilelab.experiments.calibration`) and the measurement of a loaded GPU
(:mod:`tilelab.experiments.start_load`) all time through here.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from tilelab.catalog import exercises
from tilelab.catalog.exercises import Exercise
from tilelab.device.backend import Backend
from tilelab.device.bench import (
    UNWRITTEN,
    UNWRITTEN_SOURCE,
    HeldUp,
    Sample,
    Timed,
    Wide,
    WrongLaunch,
    sampled_rows,
    time_checked,
)
from tilelab.device.runtime import Runtime, get_runtime
from tilelab.grading.correctness import compare, describe_value, expectation, fmt_shape
from tilelab.grading.diagnosis import POISON_BITS
from tilelab.grading.judge import Findings, Kind
from tilelab.grading.steps import build, one_line
from tilelab.isolation import gpulock


def measure_speed(rt: Runtime, fn: Any, ex: Exercise, rng: np.random.Generator,
                  found: Findings, step: str = "time_speed",
                  timeline: dict[str, float] | None = None) -> None:
    """The candidate and the gate's baseline (and a lesson-skipping kernel, where the
    exercise names one), timed interleaved on this GPU so that no launch can replay another
    (:func:`tilelab.device.bench.time_checked`): every timed launch gets new inputs, fresh
    poison and its output checked; one wrong launch and the kernel earns nothing at all.
    What it finds is recorded in ``found`` as ``step``'s; when it held the GPU, in
    ``timeline``."""
    kernels = {"candidate": Timed(fn, ex.launch), "baseline": _timed(rt, ex.baseline)}
    if ex.must_beat is not None:
        kernels["lesson-skipping"] = _timed(rt, ex.must_beat)
    counting = {"unwritten": build(rt, UNWRITTEN_SOURCE).get_function(UNWRITTEN)}
    shape = ex.speed_shape
    try:  # each round's timed launches alone on a GPU a class run shares; copies shared
        t = checked_timing(rt, kernels, ex, shape, rng, counting["unwritten"],
                           gpu_work=gpulock.shared, alone=gpulock.exclusive,
                           redo_after_ms=HELD_UP_MS if rt.name is Backend.GPU else None)
    except (gpulock.GpuBusy, HeldUp) as exc:
        found.find(step, Kind.NOTE, f"speed was not measured: {exc}; grade it again",
                   regrade=str(exc))
        return
    except WrongLaunch as exc:
        if exc.label != "candidate":
            raise RuntimeError(f"the grader's own {exc.label} kernel went wrong: {exc}") from None
        found.find(step, Kind.WRONG, wrong_launch_message(ex, exc))
        return
    except rt.kernel_faults as exc:  # the candidate's: the grader's own run at this shape
        found.find(step, Kind.WRONG, f"the speed run's launch at {fmt_shape(ex.problem, shape)} "
                   f"failed: {one_line(exc, 600)} A kernel must be right at every size: check "
                   "its bounds tests and the size of its shared arrays.")
        return
    finally:
        with gpulock.shared(), contextlib.suppress(*rt.kernel_faults):  # the reference
            kernels.clear()  # kernels' modules unload: GPU work (in vain once a launch failed)
            counting.clear()  # and the grader's count of unwritten words
    _found_speed(ex, t, found, step)
    if timeline is not None:
        timeline["speed_lock_wait"] = round(t["candidate"].waited_s, 4)
        timeline["speed_alone"] = round(t["candidate"].alone_s, 4)  # the GPU held alone
        timeline["speed_holds"] = t["candidate"].holds


def _found_speed(ex: Exercise, t: dict[str, Any], found: Findings, step: str) -> None:
    """The timed run's figures, and what costs the speed points: under the gate, or no
    faster than the kernel that skips the lesson."""
    candidate_ms, baseline_ms = t["candidate"].median_ms, t["baseline"].median_ms
    speedup = baseline_ms / candidate_ms
    found.find(step, Kind.TIMED, speed_measured=True, speed_rounds_redone=t["candidate"].redone,
               candidate_ms=candidate_ms, baseline_ms=baseline_ms, speedup=speedup)
    if speedup < ex.gate:
        found.find(step, Kind.SLOW, f"speed: {speedup:.2f}x over {ex.baseline.label} at "
                   f"{ex.speed_shape}; the gate is {ex.gate:g}x. {ex.gate_reason}")
    elif ex.must_beat is not None and candidate_ms >= t["lesson-skipping"].median_ms:
        found.find(step, Kind.SLOW, f"speed: {candidate_ms:.3f} ms, no faster than "
                   f"{ex.must_beat.label} ({t['lesson-skipping'].median_ms:.3f} ms), which "
                   "skips this lesson; the gate also requires beating it.")


def checked_timing(rt: Runtime, kernels: dict[str, Timed], ex: Exercise, shape: tuple,
                   rng: np.random.Generator, unwritten: Any = None,
                   **kw: Any) -> dict[str, Any]:
    """``kernels`` timed by :func:`tilelab.device.bench.time_checked` at ``shape``, each
    launch checked as a graded speed run checks it (:func:`launch_check`), its unwritten
    words counted by ``unwritten`` (built here where not given; ``kw``: the locks and the
    held-up limit)."""
    if unwritten is None:
        unwritten = build(rt, UNWRITTEN_SOURCE).get_function(UNWRITTEN)
    return time_checked(rt, kernels, ex.problem, shape, rng, launch_check(ex, shape),
                        POISON_BITS, unwritten, ROWS_PER_LAUNCH, **kw)


#: a timed round is run again when the grader took longer than this (milliseconds) to
#: queue a launch after its start event: the CPU, shared with other grading tasks, held
#: it up, and past the GPU's lead (:data:`tilelab.device.bench.LEAD_MS`) its time would
#: count the wait (normally a few hundredths: the launch is queued during the lead)
HELD_UP_MS = 0.25


def _timed(rt: Runtime, ref: Any) -> Timed:
    return Timed(build(rt, ref.source()).get_function(ref.name), ref.launch)


def wrong_launch_message(ex: Exercise, exc: WrongLaunch) -> str:
    """Why a speed run with a wrong launch earns nothing."""
    return (
        f"the speed run's launch {exc.index + 1} of {exc.total} at "
        f"{fmt_shape(ex.problem, ex.speed_shape)} computed a wrong result: {exc.reason} "
        "Every timed launch gets inputs no launch before it saw, an output refilled with NaN "
        "and buffers at new addresses, and its output is checked against float64 on "
        "sampled rows. A kernel must compute its whole output at every launch: one that "
        "returns early when its output already holds a value, keeps results from an earlier "
        "launch (in __device__ variables, keyed on pointers or sizes), or is wrong at this "
        "size earns no points."
    )


#: output rows compared with float64 after each timed launch (all rows are checked for the
#: NaN poison); the correctness step already compared every element at every graded shape
ROWS_PER_LAUNCH = 8


def launch_check(ex: Exercise, shape: tuple) -> Any:
    """The check of one timed launch's output (see :func:`tilelab.device.bench.time_checked`)
    on its :class:`~tilelab.device.bench.Sample`: no element left holding the NaN poison,
    and the round's :data:`ROWS_PER_LAUNCH` rows, drawn at random once its launches ended,
    against float64 (a round's kernels ran on the same inputs and are read on the same
    rows: their reference is made once for all of them)."""

    last: list[Any] = [None, None, None]  # a round's inputs, rows, and their reference

    def check(inputs: dict[str, np.ndarray], got: Sample, wide: Wide | None = None) -> str | None:
        if got.unwritten:
            return (f"{got.unwritten} of {got.size} elements of {ex.problem.output} were never "
                    "written (still the NaN poison filled in before this launch).")
        if last[0] is not inputs or last[1] is not got.rows:  # a new round
            last[:] = [inputs, got.rows, SampledRows(ex, shape, inputs, pick=got.rows,
                                                     wide=wide)]
        res = last[2].compare_rows(got.data)
        where = "every row" if got.rows is None else f"{len(got.rows)} sampled rows"
        return None if res.ok else f"on {where}, {res.message}"

    return check


SAMPLED_ROWS = 64


def compile_speed_kernels() -> None:
    """Build, with the GPU runtime, every kernel a speed run compiles besides the
    submission (baselines, kernels it must beat): run once per class run into a base cache
    (see :func:`tilelab.device.runtime.seed_pycuda_cache`, which makes its folder)."""
    rt = get_runtime(Backend.GPU)
    rt.SourceModule(UNWRITTEN_SOURCE)
    for ex in exercises.EXERCISES.values():
        for ref in (ex.baseline, ex.must_beat) if ex.speed_graded else ():
            if ref is not None:
                rt.SourceModule(ref.source())


class SampledRows:
    """``rows`` output rows drawn at random from ``rng`` (all of them when there are no
    more), or the rows ``pick`` drawn before (None: all), their inputs and their float64
    reference: a matmul's rows of C are A's rows, a transpose's rows of ``out`` are ``in``'s
    columns. :meth:`compare` checks an output's rows. ``wide``: the inputs in float64 and
    their magnitudes, made before (an input read whole is taken from there)."""

    def __init__(self, ex: Exercise, shape: tuple, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator | None = None, rows: int = SAMPLED_ROWS,
                 pick: np.ndarray | None = None, wide: Wide | None = None) -> None:
        self.ex = ex
        n = ex.problem.output_shape(shape)[0]
        if rng is not None:
            pick = sampled_rows(rng, n, rows)
        self.pick = pick  # None: every row
        rows = len(pick) if pick is not None else n
        sub, self.shape = inputs, shape
        if self.pick is not None:
            if ex.problem.name == "transpose":
                sub, self.shape = {"in": inputs["in"][:, self.pick]}, (shape[0], rows)
            else:
                first = ex.problem.arg_order[0]  # A: its rows are C's rows
                sub, self.shape = {**inputs, first: inputs[first][self.pick]}, (rows, *shape[1:])
        self.sub = sub  # the reference and error scale from one float64 copy of each input
        # inputs read whole (not a pick of their rows) from ``wide``, the rest widened here
        whole = {k for k, a in sub.items() if wide is not None and a is inputs[k]}
        wide_sub = {k: wide.value(k) if wide is not None and k in whole
                    else a.astype(np.float64) for k, a in sub.items()}
        self.known = expectation(ex.problem, wide_sub, lambda k: (
            wide.magnitude(k) if wide is not None and k in whole else np.abs(wide_sub[k])))

    def compare(self, got: np.ndarray) -> Any:
        """``got``'s sampled rows against their reference (a :class:`ShapeResult`)."""
        return self.compare_rows(got if self.pick is None else got[self.pick])

    def compare_rows(self, rows: np.ndarray) -> Any:
        """The sampled rows, already taken from an output, against their reference; where
        some are wrong, the message names the output's own row (no diagnosis: the rows of
        an output are no shape of their own)."""
        res = compare(self.ex.problem, self.shape, self.sub, rows, self.ex.launch,
                      known=self.known, quick=True)
        if not res.ok and self.pick is not None and res.first_wrong is not None:
            i, j = res.first_wrong
            res.message = (f"{res.wrong} of {res.total} elements wrong; first at "
                           f"{self.ex.problem.output}[{int(self.pick[i])}][{j}]: got "
                           f"{describe_value(rows[i, j])}, expected {res.expected:.6g}.")
        return res


def sampled_compare(ex: Exercise, shape: tuple, inputs: dict[str, np.ndarray],
                    got: np.ndarray, rng: np.random.Generator,
                    rows: int = SAMPLED_ROWS) -> Any:
    """Compare ``got`` with the float64 reference on ``rows`` output rows drawn at random
    (:class:`SampledRows`)."""
    return SampledRows(ex, shape, inputs, rng, rows).compare(got)
