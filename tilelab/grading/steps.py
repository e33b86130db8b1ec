"""What a grade's steps share on both backends: the :class:`Run`, the build, and the steps
that refuse, compile and check a kernel's outputs.

Every step takes the :class:`Run` and records what it finds (:meth:`Run.find`, a
:class:`~tilelab.grading.judge.Finding`); the judge alone turns the findings into the
verdict (:mod:`tilelab.grading.judge`). The steps of one backend are in
:mod:`tilelab.grading.emu_steps` and :mod:`tilelab.grading.gpu_steps`; the lists and
their order in :mod:`tilelab.grading.pipeline`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.catalog.exercises import Exercise
from tilelab.device.backend import Backend
from tilelab.device.runtime import Runtime
from tilelab.emu import errors
from tilelab.grading import counters
from tilelab.grading.ahead import Ahead
from tilelab.grading.correctness import (
    ShapeResult,
    check_function,
    check_shapes,
    explain,
    fmt_shape,
)
from tilelab.grading.diagnosis import Diagnosis, diagnose, launch_failure, telling
from tilelab.grading.index_diff import decoded, fault, refine, vague
from tilelab.grading.judge import Findings, Kind, judge
from tilelab.grading.sanitizer import Sanitizers
from tilelab.grading.source_checks import SourceRejected, check_signature, validate_source
from tilelab.grading.subset import check_subset
from tilelab.grading.verdict import Verdict
from tilelab.isolation import gpulock


@dataclass
class Run:
    """What the steps share while grading one source: the exercise, the runtime, the
    source and its build, the findings so far, and the work started for later steps."""

    ex: Exercise
    rt: Runtime
    source: str | bytes
    order: Sequence[str] = ()  # the steps' names in turn (the judge's order)
    speed: bool = True
    sanitize: bool = True
    text: str = ""
    fn: Any = None
    findings: Findings = field(default_factory=Findings)
    step: str = ""  # the step running now: what its findings are recorded under
    timeline: dict[str, float] = field(default_factory=dict)  # see Verdict.timeline
    launched: bool = True  # False once a launch failed (the kernel did not run to its end)
    report: Any = None  # the emulator's analysis, once taken (for a diagnosis)
    fault: Any = None  # where the emulator's analysed build, which checks every access,
    # stopped at one out of bounds (for a diagnosis: the graded build may not see it)
    analysing: Future | None = None  # the emulator's analysis launch, run beside the checks
    ahead: Ahead | None = None  # tools the worker started before CUDA (tilelab.grading.ahead)
    sanitizing: Sanitizers | None = None  # the sanitizer's tools while they run
    counting: counters.Counting | None = None  # Nsight Compute while it runs
    scheduling: Future | None = None  # the emulator's analysis and orders, beside the GPU's
    counting_traffic: Future | None = None  # the emulator's traffic count, beside them
    beside: ThreadPoolExecutor | None = None  # the threads those two run on
    rng: np.random.Generator = field(default_factory=np.random.default_rng)

    @property
    def backend(self) -> Backend:
        return self.rt.name

    def find(self, kind: Kind, message: str | None = None, *, step: str | None = None,
             **fields: Any) -> None:
        """Record a finding of the step running now (or of ``step``)."""
        self.findings.find(step or self.step, kind, message, **fields)

    def so_far(self) -> Verdict:
        """The verdict the findings so far give (for a step that reads what came before)."""
        return judge(Verdict.for_exercise(self.ex, self.backend), self.findings, self.order)

    @property
    def shared_memory(self) -> bool:
        """Whether the kernel's build has shared memory (its static size, as the build
        reports it: no spelling of the source decides it)."""
        return bool(self.fn.shared_size_bytes)


Step = Callable[[Run], None]


@dataclass(frozen=True)
class Built:
    """A build of one kernel: its function, or why there is none (``compiled``: the module
    built, and only the kernel was not found in it)."""

    fn: Any
    why: str = ""
    compiled: bool = True


def build(rt: Runtime, source: str, **kw: Any) -> Any:
    """``rt.SourceModule(source)``; on a GPU, nvcc runs first with nothing held (into
    PyCUDA's cache, which the module's build then reads back) and only the module's load,
    GPU work, holds a shared GPU's lock (:mod:`tilelab.isolation.gpulock`)."""
    if rt.compile_ahead is None:
        return rt.SourceModule(source, **kw)
    rt.compile_ahead(source, options=kw.get("options"),
                     no_extern_c=kw.get("no_extern_c", False), arch=kw.get("arch"),
                     code=kw.get("code"), include_dirs=kw.get("include_dirs", []))
    with gpulock.shared():
        module = rt.SourceModule(source, **kw)
        rt.synchronize()
    return module


def compile_kernel(rt: Runtime, source: str, name: str, **kw: Any) -> Built:
    """The compiled function named ``name``, or why there is none."""
    try:
        module = build(rt, source, **kw)
    except rt.compile_errors as exc:
        return Built(None, f"the kernel does not compile:\n{compiler_text(exc)}", False)
    try:
        return Built(module.get_function(name))
    except Exception as exc:
        return Built(None, f"no kernel named {name!r} was found ({one_line(exc)}). The kernel "
                     f"must be declared exactly as given in the exercise: __global__ void "
                     f"{name}(...).")


# ------------------------------------------------------------------ the steps


def validate(run: Run) -> None:
    """Refuse a source no compiler should see: size, encoding, includes, signature, and
    anything outside the graded subset of CUDA C (:mod:`tilelab.grading.subset`)."""
    try:
        run.text = validate_source(run.source)
        check_subset(run.text)  # first: a macro standing for __restrict__ is named as such
        check_signature(run.text, run.ex.kernel, run.ex.signature)
    except SourceRejected as exc:
        run.find(Kind.WRONG, str(exc))


def compile_candidate(run: Run) -> None:
    """The candidate's build."""
    built = compile_kernel(run.rt, run.text, run.ex.kernel)
    if built.compiled:
        run.find(Kind.NOTE, compiled=True)
    if built.fn is None:
        run.find(Kind.WRONG, built.why)
    run.fn = built.fn


def checking(run: Run, pool: ThreadPoolExecutor | None = None) -> Iterator[
        tuple[Sequence[int], ShapeResult | Exception]]:
    """Every graded shape, fresh random inputs (launched several at once on a ``pool``)."""
    ex = run.ex
    return check_shapes(run.rt, run.fn, ex.problem, ex.launch, ex.shapes, run.rng,
                        quick=True, pool=pool)


def take_shapes(run: Run, checked: Iterator[tuple[Sequence[int], ShapeResult | Exception]]
                ) -> list[ShapeResult] | None:
    """Each shape's outcome, compared with float64, into the verdict; None where a launch
    failed (that is the finding: the kernel did not run to its end)."""
    ex, shapes, results = run.ex, [], []
    for shape, res in checked:
        if isinstance(res, Exception):
            if not isinstance(res, run.rt.launch_errors):
                raise res
            why = launch_failure(ex.problem, ex.launch, shape, res, run.text)
            said = one_line(res, 1500)
            if isinstance(res, errors.OutOfBoundsAccess):
                why = out_of_bounds_told(run, shape, res, why, results)
                if why is not None and not getattr(res, "thread", None):
                    said = said.replace("; found only after the kernel ended, so the thread "
                                        "and line are unknown", "; found after the kernel "
                                        "ended (the emulator's log of each access names the "
                                        "thread and line below)")
            shapes.append({"shape": list(shape), "ok": False, "message": str(res)[:1500]})
            run.find(Kind.CHECKED, shapes=shapes)
            run.find(Kind.WRONG, f"shape {shape}: the launch failed: {said}"
                     + (f" Likely cause: {why}" if why else ""))
            run.launched = False
            checked.close()
            return None
        shapes.append(res.to_dict())
        results.append(res)
    run.find(Kind.CHECKED, shapes=shapes)
    return results


def find_wrong(run: Run, results: list[ShapeResult], races: list | None = None) -> None:
    """Where some shapes are wrong, the finding, with one diagnosis of the most telling."""
    if all(r.ok for r in results):
        return
    ex = run.ex
    worst = telling([r.attempt for r in results if r.attempt is not None], ex.launch)
    res = next(r for r in results if r.attempt is worst)
    passed = [r.shape for r in results if r.ok]
    failed = [r.attempt for r in results if not r.ok and r.attempt is not None]
    rerun = res.cause.startswith("race") and races is None  # the GPU's second run differed
    if run.fault is not None:  # an access out of bounds (a read before a buffer's start,
        # or in the bytes after its end) that the graded build let through: the cause
        at = fmt_shape(ex.problem, ex.problem.analysis_shape)
        why = Diagnosis("out of bounds", "the emulator's analysed build, which checks every "
                        f"global access, stopped at one (at {at}): {run.fault}")
    else:
        why = diagnose(ex.problem, ex.launch, worst, tiled=run.shared_memory, races=races,
                       rerun_differs=rerun, passed=passed, failed=failed, source=run.text)
        if why.cause != "race":  # the threads' accesses against the reference's, where vague
            why = refine(ex, run.text, why, failed) or why
    others = f" Wrong at {len(failed)} of {len(results)} shapes" + (
        f"; correct at {', '.join(str(s) for s in passed)}." if passed else ".")
    explain(res, ex.problem, ex.launch, why, others)
    run.find(Kind.WRONG, res.message)


def out_of_bounds_told(run: Run, shape: Sequence[int], exc: BaseException,
                       why: Diagnosis | None, results: list[ShapeResult]) -> Diagnosis | None:
    """An access out of bounds told from the thread's own accesses: a write caught only
    after the kernel ended, from the thread and line the emulator's log shows made it;
    where the launch's own diagnosis is a catch-all, what the thread did against the
    reference's (:func:`~tilelab.grading.index_diff.fault`), or a stride seen at a smaller
    shape where the kernel stayed inside its buffers (:func:`~tilelab.grading.index_diff.
    refine`). A precise diagnosis of the launch stays."""
    ex = run.ex
    if why is not None and not vague(why) and "past K - 1" not in why.advice:
        return why
    told, access = fault(ex, run.text, shape, exc)
    if why is not None and not vague(why):  # "k past K - 1": unless it is a stride
        return told if told is not None and decoded(told) else why
    if access is not None and not getattr(exc, "thread", None):
        grid = ex.launch.grid(ex.problem.sizes(tuple(shape)))
        made = errors.OutOfBoundsAccess(
            str(exc), buffer=ex.problem.arg_order[access.param], access="write",
            index=access.elem, line=access.line,
            block=(access.block % grid[0], access.block // grid[0], 0),
            thread=tuple(int(v) for v in np.unravel_index(access.thread,
                                                          ex.launch.block[::-1])[::-1]))
        return launch_failure(ex.problem, ex.launch, shape, made, run.text) or told or why
    if told is not None and (decoded(told) or "lets it through" in told.advice):
        return told
    if why is not None:
        smaller = refine(ex, run.text, why, [r.attempt for r in results
                                             if r.attempt is not None])
        if smaller is not None and smaller is not why and (
                decoded(smaller) or smaller.cause != why.cause):
            return smaller
    return told or why


def say_correct(run: Run) -> None:
    """What a kernel right so far is told first: its shapes, and whether speed is graded."""
    run.find(Kind.NOTE, f"correct on {len(run.ex.shapes)} shapes with fresh random inputs")
    if not run.ex.speed_graded:
        run.find(Kind.NOTE, "this step is graded for correctness only (no speed test)")


def analysis_launch(rt: Runtime, ex: Exercise, text: str, shape: Sequence[int],
                    rng: np.random.Generator) -> tuple[Any, Any]:
    """The analysis build's kernel and its checked launch at ``shape`` (an emulator's);
    where that build cannot be made, None and why."""
    built = compile_kernel(rt, text, ex.kernel, analysis=True)
    if built.fn is None:
        return None, built.why[:1500] or "it did not build"
    return built.fn, check_function(rt, built.fn, ex.problem, ex.launch, shape, rng)


def compiler_text(exc: BaseException) -> str:
    """What the learner reads of a failed build: the emulator's errors on kernel.cu with
    their lines (its message, without g++'s notes on the prelude it compiles with), or
    nvcc's output."""
    if isinstance(exc, errors.CompileError):
        return exc.msg.removeprefix(errors.DID_NOT_COMPILE).strip()[:4000]
    text = getattr(exc, "stderr", None) or getattr(exc, "msg", None) or str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.strip()[:4000]


def one_line(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {exc}"[:limit]
