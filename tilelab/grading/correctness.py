"""Correctness checks: fresh random inputs, a float64 reference, and a diagnosis.

Outputs are poisoned with a marked NaN before every launch, so an element the kernel
never wrote is told apart from one it computed wrongly. The message names the first wrong
element and its likely cause: never written, boundary, race, or indexing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.device.backend import Backend
from tilelab.device.runtime import Runtime
from tilelab.emu.errors import KernelTimeout
from tilelab.grading.budget import emu_check_seconds, emu_lanes, emu_launch_seconds
from tilelab.grading.diagnosis import POISON_BITS, RTOL, Attempt, diagnose
from tilelab.isolation import gpulock

__all__ = ["POISON_BITS", "RTOL", "ShapeResult", "check_function", "compare", "launch"]


def poisoned(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 array filled with the marked NaN."""
    return np.full(shape, POISON_BITS, dtype=np.uint32).view(np.float32)


class CheckOverBudget(KernelTimeout):
    """A launch stopped, or not started, because the check's launches together had spent
    their :class:`Budget` (each within its own limit)."""


@dataclass(frozen=True)
class Budget:
    """The time a check's emulated launches have together (:func:`emu_check_seconds`):
    ``seconds`` in all, ending at ``ends`` (``time.monotonic()``); setting ``stop`` ends
    every launch under way at once (the check no longer needs their results)."""

    seconds: float
    ends: float
    stop: threading.Event = field(default_factory=threading.Event, compare=False)

    @classmethod
    def starting_now(cls, seconds: float) -> Budget:
        return cls(seconds, time.monotonic() + seconds)

    def error(self, problem: Problem, shape: Shape) -> Exception:
        """The error of a launch the budget stopped, or did not let start."""
        return CheckOverBudget(
            f"the check's launches together did not finish within {self.seconds:g} s, the "
            f"time the grader allows all of them (the launch at "
            f"{fmt_shape(problem, shape)} was stopped there). Each launch alone stayed "
            "within its own limit, so the kernel is very slow at every shape: look for a "
            "loop that runs far longer than the work needs (a delay or a spin), or, if the "
            "kernel is merely slow, set TILELAB_EMU_TIMEOUT (seconds per launch) for your "
            "own checks.")


@dataclass
class ShapeResult:
    """The outcome of one launch at one shape."""

    shape: Shape
    ok: bool
    wrong: int = 0
    total: int = 0
    max_error: float = 0.0
    first_wrong: tuple[int, int] | None = None
    got: float | None = None
    expected: float | None = None
    cause: str = ""
    message: str = ""
    attempt: Attempt | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "attempt"}


def launch(
    rt: Runtime,
    fn: Any,
    problem: Problem,
    launch_: Launch,
    shape: Shape,
    inputs: dict[str, np.ndarray],
    budget: Budget | None = None,
) -> np.ndarray:
    """Run ``fn`` once on these inputs with a poisoned output; return the output. On the
    emulator the launch's time limit scales with the work (:func:`emu_launch_seconds`),
    cut to what is left of a check's ``budget`` where one is given; on
    a GPU a class run shares, the copies and the launch hold its lock shared, and its
    buffers are freed before it is let go (:mod:`tilelab.isolation.gpulock`)."""
    if rt.name is not Backend.GPU:
        return _launch(rt, fn, problem, launch_, shape, inputs, budget)
    with gpulock.shared():
        return _launch(rt, fn, problem, launch_, shape, inputs)


def _launch(rt: Runtime, fn: Any, problem: Problem, launch_: Launch, shape: Shape,
            inputs: dict[str, np.ndarray], budget: Budget | None = None) -> np.ndarray:
    sizes = problem.sizes(shape)
    limit = emu_launch_seconds(problem, shape) if rt.name is Backend.EMU else None
    cut = False
    if limit is not None and budget is not None:  # the check's time left, if less
        left = budget.ends - time.monotonic()
        if left <= 0:
            raise budget.error(problem, shape)
        limit, cut = min(limit, left), left < limit
    out = poisoned(problem.output_shape(shape))
    bufs = {name: rt.to_device(arr) for name, arr in inputs.items()}
    bufs[problem.output] = rt.to_device(out)
    args = problem.arguments(bufs, shape)
    emu_args: dict[str, Any] = {}
    if limit:  # the emulator's: its time limit, and the check's stop (see _in_order)
        emu_args["timeout"] = limit
        if budget is not None:
            emu_args["stop"] = budget.stop
    try:
        fn(*args, block=launch_.block, grid=launch_.grid(sizes), **emu_args)
    except Exception as exc:
        if cut and budget is not None and isinstance(exc, KernelTimeout):
            raise budget.error(problem, shape) from None
        raise
    rt.synchronize()
    return rt.from_device(bufs[problem.output], out.shape, np.float32)


def compare(
    problem: Problem,
    shape: Shape,
    inputs: dict[str, np.ndarray],
    got: np.ndarray,
    launch_: Launch,
    again: np.ndarray | None = None,
    quick: bool = False,
    known: tuple[np.ndarray, np.ndarray | None] | None = None,
) -> ShapeResult:
    """Compare a kernel's output with the float64 reference and explain the first miss
    (``quick``: a first word; the grader diagnoses the most telling shape in full).
    ``known``: the reference and the error scale of these inputs, made before
    (:func:`expectation`), for outputs of several kernels on the same inputs."""
    expected, scale = known if known is not None else expectation(problem, inputs)
    if problem.exact:
        bad = ~(got.astype(np.float64) == expected)
        err = np.where(np.isnan(got), np.inf, np.abs(got - expected))
    else:
        err = np.abs(got.astype(np.float64) - expected) / scale
        err = np.where(np.isnan(got), np.inf, err)
        bad = ~(err <= RTOL)
    result = ShapeResult(
        shape=tuple(shape),
        ok=not bad.any(),
        wrong=int(bad.sum()),
        total=int(bad.size),
        max_error=float(np.max(err, initial=0.0)),
    )
    if result.ok:
        result.message = f"shape {fmt_shape(problem, shape)}: correct"
        return result
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    result.first_wrong = idx  # type: ignore[assignment]
    result.got = float(got[idx])
    result.expected = float(expected[idx])
    result.attempt = Attempt(tuple(shape), inputs, got, expected, bad)
    rerun = again is not None and not np.array_equal(again.view(np.uint32), got.view(np.uint32))
    explain(result, problem, launch_, diagnose(problem, launch_, result.attempt,
                                               rerun_differs=rerun, quick=quick))
    return result


def expectation(problem: Problem, inputs: dict[str, np.ndarray],
                magnitude: Callable[[str], np.ndarray] | None = None,
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """The float64 reference of ``inputs`` and, unless the problem is exact, each element's
    error scale (:meth:`Problem.error_bound`, given ``magnitude``)."""
    expected = problem.reference(inputs)
    if problem.exact:
        return expected, None
    return expected, problem.error_bound(inputs, magnitude) + np.finfo(np.float32).tiny


def explain(result: ShapeResult, problem: Problem, launch_: Launch, why: Any,
            others: str = "") -> None:
    """Set ``result``'s cause and message from a diagnosis (``others``: the other shapes)."""
    idx = result.first_wrong
    assert idx is not None and result.attempt is not None
    result.cause = str(why)
    result.message = (
        f"shape {fmt_shape(problem, result.shape)}: {result.wrong} of {result.total} elements "
        f"wrong; first at {problem.output}[{idx[0]}][{idx[1]}]: got "
        f"{describe_value(result.attempt.got[idx])}, expected {result.expected:.6g}."
        f"{others} Likely cause: {result.cause}"
    )


def describe_value(v: np.float32) -> str:
    if np.isnan(v):
        if np.float32(v).view(np.uint32) == POISON_BITS:
            return "never written (still the NaN poison)"
        return "NaN"
    return f"{float(v):.6g}"


def fmt_shape(problem: Problem, shape: Shape) -> str:
    return ", ".join(f"{d}={s}" for d, s in zip(problem.dims, shape, strict=True))


def check_function(
    rt: Runtime,
    fn: Any,
    problem: Problem,
    launch_: Launch,
    shape: Shape,
    rng: np.random.Generator,
    repeat_on_error: bool = True,
    quick: bool = False,
    budget: Budget | None = None,
) -> ShapeResult:
    """Check one compiled kernel at one shape with fresh random inputs (``quick``: see
    :func:`compare`; ``budget``: see :func:`launch`)."""
    return check_inputs(rt, fn, problem, launch_, shape, problem.make_inputs(shape, rng),
                        repeat_on_error, quick, budget)


def check_inputs(rt: Runtime, fn: Any, problem: Problem, launch_: Launch, shape: Shape,
                 inputs: dict[str, np.ndarray], repeat_on_error: bool = True,
                 quick: bool = False, budget: Budget | None = None) -> ShapeResult:
    """:func:`check_function` on inputs drawn before."""
    got = launch(rt, fn, problem, launch_, shape, inputs, budget)
    return _judged(rt, fn, problem, launch_, shape, inputs, got,
                   repeat_on_error and rt.name is Backend.GPU, quick)


def _judged(rt: Runtime, fn: Any, problem: Problem, launch_: Launch, shape: Shape,
            inputs: dict[str, np.ndarray], got: np.ndarray, again_if_wrong: bool,
            quick: bool) -> ShapeResult:
    """``got``, one launch's output on ``inputs``, compared with float64; where it is wrong
    and ``again_if_wrong``, the kernel launched once more on the same inputs, so that the
    diagnosis can tell a race (the two outputs differ) from a steady mistake."""
    result = compare(problem, shape, inputs, got, launch_, quick=quick)
    if not result.ok and again_if_wrong:
        again = launch(rt, fn, problem, launch_, shape, inputs)
        result = compare(problem, shape, inputs, got, launch_, again=again, quick=quick)
    return result


def lanes(rt: Runtime, fn: Any) -> int:
    """How many launches of ``fn`` a check may run at once: on the emulator, where each
    launch is a process of its own, :func:`~tilelab.grading.budget.emu_lanes`, unless the
    kernel's module keeps device globals (a launch then starts from what the one before
    left there, as on a GPU); on a GPU, one."""
    return emu_lanes() if rt.name is Backend.EMU and getattr(fn, "stateless", False) else 1


def check_shapes(
    rt: Runtime,
    fn: Any,
    problem: Problem,
    launch_: Launch,
    shapes: Sequence[Shape],
    rng: np.random.Generator,
    quick: bool = False,
    pool: ThreadPoolExecutor | None = None,
    budget_s: float | None = None,
) -> Iterator[tuple[Shape, ShapeResult | Exception]]:
    """:func:`check_function` at each shape, in order: its result, or the exception its
    launch raised. Once the caller stops reading, no further launch starts.

    Given a ``pool`` of several threads (where :func:`lanes` allows launches at once),
    every shape's inputs are drawn now, in shape order, and the launches queued on it: the
    first shape's (the smallest, where a broken kernel fails soonest), then the others
    largest first (the check waits for its longest launch); the results still come in
    shape order, and when the caller stops reading the queue is emptied and the launches
    under way are stopped. Else one launch at a time, each when its result is asked for.

    On the emulator the launches have, together, ``budget_s`` seconds from now (by default
    :func:`~tilelab.grading.budget.emu_check_seconds`): the launch it stops, and every one
    not yet started, fails with a KernelTimeout that says so. On a GPU every shape's inputs
    are drawn first, then all the launches run in one shared hold of a class run's GPU lock
    (:func:`_held_once`)."""
    seconds = budget_s if budget_s is not None else (
        emu_check_seconds(problem, shapes) if rt.name is Backend.EMU else None)
    budget = Budget.starting_now(seconds) if seconds is not None else None
    if rt.name is Backend.GPU:
        return _held_once(rt, fn, problem, launch_, shapes, rng, quick)
    if pool is None:
        return _one_by_one(rt, fn, problem, launch_, shapes, rng, quick, budget)
    inputs = [problem.make_inputs(shape, rng) for shape in shapes]
    jobs: list[Future | None] = [None] * len(shapes)
    for i in [0, *sorted(range(1, len(shapes)), key=lambda i: -problem.work(shapes[i]))]:
        jobs[i] = pool.submit(check_inputs, rt, fn, problem, launch_, shapes[i], inputs[i],
                              quick=quick, budget=budget)
    return _in_order(list(zip(shapes, jobs, strict=True)), budget)


def _one_by_one(rt: Runtime, fn: Any, problem: Problem, launch_: Launch,
                shapes: Sequence[Shape], rng: np.random.Generator, quick: bool,
                budget: Budget | None) -> Iterator[tuple[Shape, ShapeResult | Exception]]:
    for shape in shapes:
        try:
            yield shape, check_function(rt, fn, problem, launch_, shape, rng, quick=quick,
                                        budget=budget)
        except Exception as exc:
            yield shape, exc


def _held_once(rt: Runtime, fn: Any, problem: Problem, launch_: Launch,
               shapes: Sequence[Shape], rng: np.random.Generator,
               quick: bool) -> Iterator[tuple[Shape, ShapeResult | Exception]]:
    """On a GPU: the inputs of every shape drawn in shape order, then each shape's copies,
    launch and copy back in one shared hold of the GPU's lock (each hold waits behind any
    timed round awaiting the GPU: one wait, not one per shape), up to the first launch
    that fails; then the float64 comparisons, holding nothing, and where a shape is wrong
    its launch again (:func:`_judged`)."""
    inputs = [problem.make_inputs(shape, rng) for shape in shapes]
    outputs: list[np.ndarray | Exception] = []
    with gpulock.shared():
        for shape, given in zip(shapes, inputs, strict=True):
            try:
                outputs.append(launch(rt, fn, problem, launch_, shape, given))
            except Exception as exc:
                outputs.append(exc)
                break
    for shape, given, got in zip(shapes, inputs, outputs, strict=False):
        if isinstance(got, Exception):
            yield shape, got
            return
        try:
            result = _judged(rt, fn, problem, launch_, shape, given, got, True, quick)
        except Exception as exc:  # its launch again failed
            yield shape, exc
            return
        yield shape, result


def _in_order(jobs: list[tuple[Shape, Future]], budget: Budget | None) -> Iterator[
        tuple[Shape, ShapeResult | Exception]]:
    try:
        for shape, job in jobs:
            try:
                yield shape, job.result()
            except Exception as exc:
                yield shape, exc
    finally:
        for _, job in jobs:
            job.cancel()  # only those not started
        if budget is not None:  # and those under way: an endless one would hold the check
            budget.stop.set()
