"""The grader: one kernel source for one exercise becomes one :class:`Verdict`.

:func:`evaluate` runs the steps of :data:`STEPS` in order; each takes the grading
:class:`Run` and the verdict, records what it found, and returns False to stop::

    validate (size, includes, signature, the graded subset) -> compile
      -> (GPU: compute-sanitizer and Nsight Compute given the source, to run beside the
         rest; the grading worker started them ahead: :mod:`tilelab.grading.ahead`)
      -> correctness -> (GPU: the emulator's count of the lesson's traffic, feedback, and
         its schedules, right under varied orders too, both run beside the speed run)
      -> analysis (emulator: feedback)
      -> speed (GPU: timed launches that cannot replay, then the lesson from the GPU's
         own counters) -> the sanitizer's findings (GPU: a problem takes back what was
         done since correctness) -> points

Points rest only on evidence the submission cannot shape: outputs the grader compares,
the GPU's timers on launches that each do the whole work, and the GPU's counters on the
timed build. On the emulator, speed and lessons are "not measured: needs a GPU"; its
analysis is feedback. It runs in the grading worker's clean process
(:mod:`tilelab.grading.worker`), which never imports a learner's Python: only the kernel
source reaches it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.catalog import exercises
from tilelab.catalog.exercises import Exercise
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
from tilelab.emu import errors
from tilelab.grading import counters, gpulock, scoring, traffic
from tilelab.grading.ahead import Ahead
from tilelab.grading.correctness import (
    ShapeResult,
    check_function,
    check_shapes,
    compare,
    describe_value,
    expectation,
    explain,
    fmt_shape,
    lanes,
    launch,
)
from tilelab.grading.diagnosis import POISON_BITS, diagnose, launch_failure, telling
from tilelab.grading.sanitizer import Sanitizers
from tilelab.grading.source_checks import SourceRejected, check_signature, validate_source
from tilelab.grading.subset import check_subset
from tilelab.grading.verdict import Verdict


@dataclass
class Run:
    """What the steps share while grading one source."""

    ex: Exercise
    rt: Runtime
    source: str | bytes
    speed: bool = True
    sanitize: bool = True
    text: str = ""
    fn: Any = None
    launched: bool = True  # False once a launch failed (the kernel did not run to its end)
    report: Any = None  # the emulator's analysis, once run (for a diagnosis or the gates)
    analysing: Future | None = None  # the emulator's analysis launch, run beside correctness
    sanitizing: Sanitizers | None = None  # the sanitizer's tools while they run
    counting: counters.Counting | None = None  # ncu while it runs (see `start_counters`)
    kept: Verdict | None = None  # the verdict as the speed run found it (see `speed`)
    ahead: Ahead | None = None  # tools the worker started before CUDA (tilelab.grading.ahead)
    counting_traffic: Future | None = None  # the emulator's traffic count, beside the rest
    scheduling: Future | None = None  # the emulator's varied orders, beside the speed run
    beside: ThreadPoolExecutor | None = None  # the threads those two run on
    rng: np.random.Generator = field(default_factory=np.random.default_rng)


Step = Callable[[Run, Verdict], bool]


def compile_errors(rt: Runtime) -> tuple[type[BaseException], ...]:
    if rt.name == "gpu":
        import pycuda.driver as cuda

        return (cuda.CompileError,)
    return (errors.CompileError, errors.UnsupportedConstruct)


def kernel_faults(rt: Runtime) -> tuple[type[BaseException], ...]:
    """What a launch raises for a fault of the kernel's own (an illegal address, a launch
    it cannot run): never for the grader's (a wrong argument type, a bad copy)."""
    if rt.name == "gpu":
        import pycuda.driver as cuda

        return (cuda.LaunchError,)
    return (errors.EmulatorError,)


def launch_errors(rt: Runtime) -> tuple[type[BaseException], ...]:
    if rt.name == "gpu":
        import pycuda.driver as cuda

        return (cuda.Error, TypeError, ValueError)
    return (errors.EmulatorError, TypeError, ValueError)


def build(rt: Runtime, source: str, **kw: Any) -> Any:
    """``rt.SourceModule(source)``; on a GPU, nvcc runs first with nothing held (into
    PyCUDA's cache, which the module's build then reads back) and only the module's load,
    GPU work, holds a shared GPU's lock (:mod:`tilelab.grading.gpulock`)."""
    if rt.name != "gpu":
        return rt.SourceModule(source, **kw)
    from pycuda.compiler import compile as nvcc

    nvcc(source, options=kw.get("options"), no_extern_c=kw.get("no_extern_c", False),
         arch=kw.get("arch"), code=kw.get("code"), include_dirs=kw.get("include_dirs", []))
    with gpulock.shared():
        module = rt.SourceModule(source, **kw)
        rt.synchronize()
    return module


def compile_kernel(rt: Runtime, source: str, name: str, v: Verdict, **kw: Any) -> Any | None:
    """The compiled function, or None with the reason in the verdict."""
    try:
        module = build(rt, source, **kw)
    except compile_errors(rt) as exc:
        v.messages.append(f"the kernel does not compile:\n{_compiler_text(exc)}")
        return None
    v.compiled = True
    try:
        return module.get_function(name)
    except Exception as exc:
        v.messages.append(
            f"no kernel named {name!r} was found ({_one_line(exc)}). The kernel must be "
            f"declared exactly as given in the exercise: __global__ void {name}(...)."
        )
        return None


# ------------------------------------------------------------------ the steps


def validate(run: Run, v: Verdict) -> bool:
    """Refuse a source no compiler should see: size, encoding, includes, signature, and
    anything outside the graded subset of CUDA C (:mod:`tilelab.grading.subset`)."""
    try:
        run.text = validate_source(run.source)
        check_subset(run.text)  # first: a macro standing for __restrict__ is named as such
        check_signature(run.text, run.ex.kernel, run.ex.signature)
    except SourceRejected as exc:
        v.messages.append(str(exc))
        return False
    return True


def compile_candidate(run: Run, v: Verdict) -> bool:
    """The candidate's build."""
    run.fn = compile_kernel(run.rt, run.text, run.ex.kernel, v)
    return run.fn is not None


def correctness(run: Run, v: Verdict) -> bool:
    """Every graded shape, fresh random inputs, compared with float64; when some are wrong,
    one diagnosis from the most telling of them (:func:`diagnosed`). A failed launch stops
    here (the next steps still explain a kernel that ran)."""
    width = lanes(run.rt, run.fn)
    if width == 1:
        return _correctness(run, v, None)
    # the emulator's launches several at once, each a process of its own, the analysis
    # launch queued after them (built meanwhile), since nearly every check needs it
    with ThreadPoolExecutor(width, thread_name_prefix="tilelab-launch") as pool:
        return _correctness(run, v, pool)


def _correctness(run: Run, v: Verdict, pool: ThreadPoolExecutor | None) -> bool:
    ex, rt = run.ex, run.rt
    v.correct = True
    results = []
    checked = check_shapes(rt, run.fn, ex.problem, ex.launch, ex.shapes, run.rng, quick=True,
                           pool=pool)
    if pool is not None:
        run.analysing = pool.submit(_analysis_launch, run, run.rng.spawn(1)[0])
    for shape, res in checked:
        if isinstance(res, Exception):
            if not isinstance(res, launch_errors(rt)):
                raise res
            exc = res
            why = launch_failure(ex.problem, ex.launch, shape, exc, run.text)
            v.messages.append(f"shape {shape}: the launch failed: {_one_line(exc, 1500)}"
                              + (f" Likely cause: {why}" if why else ""))
            v.shapes.append({"shape": list(shape), "ok": False, "message": str(exc)[:1500]})
            v.correct, run.launched = False, False
            checked.close()
            if run.analysing is not None:  # not needed: no later step analyses this kernel
                run.analysing.cancel()
                run.analysing = None
            return True
        v.shapes.append(res.to_dict())
        results.append(res)
    if any(not r.ok for r in results):
        v.correct = False
        v.messages.append(diagnosed(run, v, results))
    return True


#: how many of an exercise's smallest graded shapes a GPU submission is also run at on the
#: emulator, under its varied block and thread orders
SCHEDULE_SHAPES = 3


def schedules(run: Run, v: Verdict) -> bool:
    """On a GPU: the same source must also be right on the emulator, whose launches run
    blocks and threads in varied orders, at a few small graded shapes: a kernel that races
    in global memory (one block reading or zeroing what another writes) may pass on a GPU
    by the luck of its schedule, and loses its points on both backends alike. A CPU's work,
    run on a thread beside the speed run; :func:`take_schedules` reads it."""
    if not (v.correct and run.rt.name == "gpu"):
        return True
    run.scheduling = _beside(run).submit(schedule_failure, run.ex, run.text,
                                         run.rng.spawn(1)[0])
    return True


def take_schedules(run: Run, v: Verdict) -> bool:
    """What :func:`schedules` found; False where the kernel is wrong in the emulator's
    orders: then what was done since correctness (the speed run, the lesson) is taken
    back, and the verdict is the one the steps in turn would give."""
    pending, run.scheduling = run.scheduling, None
    if pending is None:
        return True
    why = _joined(pending, v, "schedules_wait")
    if why is None:
        return True
    kept, run.kept = run.kept, None  # wrong before the speed run: no sanitizer verdict
    if kept is not None:
        _take_back(v, kept)
    v.correct = False
    v.messages.append(
        "right on this GPU, but not on the emulator, which runs the blocks and threads "
        f"of a launch in varied orders: {why} A kernel must be right in every order a GPU "
        "may run it (no block may read or overwrite another's output)."
    )
    return False


def _joined(pending: Future, v: Verdict, mark: str) -> Any:
    """The result of work run beside, its wait for it in ``v.timeline[mark]``."""
    t0 = time.perf_counter()
    result = pending.result()
    v.timeline[mark] = round(time.perf_counter() - t0, 4)
    return result


def _take_back(v: Verdict, kept: Verdict) -> None:
    """``v`` back to ``kept``, the verdict before the speed run, keeping what the steps
    took (``step_seconds``, ``timeline``)."""
    seconds, timeline = v.step_seconds, v.timeline
    v.__dict__.update(kept.__dict__)
    v.step_seconds, v.timeline = seconds, timeline


def _beside(run: Run) -> ThreadPoolExecutor:
    """The threads a run's CPU work beside the GPU's runs on (made at the first use)."""
    if run.beside is None:
        run.beside = ThreadPoolExecutor(2, thread_name_prefix="tilelab-beside")
    return run.beside


def schedule_failure(ex: Exercise, text: str, rng: np.random.Generator) -> str | None:
    """Why ``text`` is wrong on the emulator at the exercise's smallest graded shapes but
    the trivial one (None when it is right at all of them)."""
    emu = get_runtime("emu")
    fn = compile_kernel(emu, text, ex.kernel, Verdict(ex.id, emu.name))
    if fn is None:
        return "the emulator could not build it."
    shapes = sorted(ex.shapes, key=lambda s: float(np.prod(s)))[1:SCHEDULE_SHAPES + 1]
    for shape in shapes:
        try:
            r = check_function(emu, fn, ex.problem, ex.launch, shape, rng)
        except launch_errors(emu) as exc:
            return f"its launch failed there: {_one_line(exc, 600)}."
        if not r.ok:
            return r.message
    return None


def diagnosed(run: Run, v: Verdict, results: list[ShapeResult]) -> str:
    """The message for the most telling failing shape: its cause found with every shape's
    outcome and, on the emulator, the race analysis (run here, kept for the next step)."""
    ex = run.ex
    tiled = "__shared__" in run.text
    races = None
    if run.rt.name == "emu" and tiled:
        run.report = _analyse(run, v)
        races = list(run.report.races) if run.report is not None else None
    worst = telling([r.attempt for r in results if r.attempt is not None], ex.launch)
    res = next(r for r in results if r.attempt is worst)
    passed = [r.shape for r in results if r.ok]
    failed = [r.attempt for r in results if not r.ok and r.attempt is not None]
    rerun = res.cause.startswith("race") and races is None  # the GPU's second run differed
    why = diagnose(ex.problem, ex.launch, worst, tiled=tiled, races=races, rerun_differs=rerun,
                   passed=passed, failed=failed, source=run.text)
    others = f" Wrong at {len(failed)} of {len(results)} shapes" + (
        f"; correct at {', '.join(str(s) for s in passed)}." if passed else ".")
    explain(res, ex.problem, ex.launch, why, others)
    return res.message


def analysis(run: Run, v: Verdict) -> bool:
    """On the emulator: races and bank conflicts of one launch at the analysis shape. A
    race fails a correct kernel; for a wrong one the table only helps explain it."""
    if run.rt.name != "emu":
        return True
    if not (v.correct or "__shared__" in run.text):  # only the picture of what it touched
        if run.launched and run.report is None:
            _analyse(run, v)
        return True
    if not run.launched:
        v.analysis = {"error": "the kernel's launch failed (see above)"}
        return True
    report = run.report if run.report is not None else _analyse(run, v)
    if report is None or not v.correct:
        return True
    v.races = len(report.races)
    v.bank_degree = report.worst_degree  # None: no shared-memory access at all
    shape = run.ex.problem.analysis_shape
    v.traffic = traffic.summary(report, run.ex.problem, shape)
    v.messages += traffic.remarks(report, run.ex.problem, shape, run.ex.reuses_tiles)
    if report.has_races:
        v.messages.append(
            "race found by the emulator's analysis (accesses to one word that nothing "
            "orders):\n" + report.summary()
        )
        v.correct = False
    return True


def _analyse(run: Run, v: Verdict) -> Any | None:
    """The analysis report of one launch (kept in the verdict), or None when there is none;
    launched here, or taken from the launch made beside the correctness checks."""
    ex, rt = run.ex, run.rt
    try:  # the analysed build's output is checked too: the gate judges a checked build
        fn, checked = run.analysing.result() if run.analysing is not None else \
            _analysis_launch(run, run.rng)
    except launch_errors(rt) as exc:
        if "__shared__" in run.text:
            v.analysis = {"error": (str(exc) or repr(exc)).splitlines()[0][:300]}
        if v.correct:
            v.messages.append(f"analysis run failed: {_one_line(exc, 1500)}")
            v.correct = False
        return None
    if fn is None:  # the candidate built, its analysed build did not: no race is ruled out
        if "__shared__" in run.text:
            v.analysis = {"error": f"the analysed build could not be made: {checked}"[:300]}
        if v.correct:
            v.messages.append("the build analysed for races and bank conflicts could not be "
                              f"made, so no race can be ruled out: {checked}")
            v.correct = False
        return None
    report = fn.last_report.analysis
    v.touch = report.touch or None
    if "__shared__" in run.text:
        at = fmt_shape(ex.problem, ex.problem.analysis_shape)
        v.analysis = {"at": at, "summary": report.summary(), **report.to_dict()}
    if not checked.ok and v.correct:
        v.messages.append(f"the build analysed for races and bank conflicts computed a wrong "
                          f"result: {checked.message}")
        v.correct = False
    return report


def _analysis_launch(run: Run, rng: np.random.Generator) -> tuple[Any, Any]:
    """The analysis build's kernel and its checked launch at the analysis shape; where that
    build cannot be made, None and why."""
    built = Verdict(run.ex.id, run.rt.name)
    fn = compile_kernel(run.rt, run.text, run.ex.kernel, built, analysis=True)
    if fn is None:
        return None, " ".join(built.messages)[:1500] or "it did not build"
    shape = run.ex.problem.analysis_shape
    return fn, check_function(run.rt, fn, run.ex.problem, run.ex.launch, shape, rng)


#: why racecheck is not run over a kernel whose build has no shared memory
NO_SHARED_MEMORY = ("the kernel has no shared memory (its build declares none, and the "
                    "grader launches it with none), and racecheck looks for races in shared "
                    "memory only; memcheck checks its other accesses")


def sanitizer(run: Run, v: Verdict) -> bool:
    """On a GPU, once the kernel compiles: compute-sanitizer's racecheck and memcheck over
    one launch each, given the source now (started ahead by the worker, or here) and run
    beside the grader's next steps; :func:`sanitizer_verdict` reads them last. racecheck
    only where the build has shared memory (its static size, read from the compiled
    function: no spelling of the source decides it; no launch gives dynamic shared
    memory): it finds hazards in shared memory alone, and its start is the heaviest of the
    tools' (it holds back Nsight Compute's, on a check's longest path)."""
    if not (run.rt.name == "gpu" and run.sanitize):
        return True
    tools = run.ahead.take_sanitizers() if run.ahead is not None else None
    run.sanitizing = tools or Sanitizers(run.ex.id)
    if not run.fn.shared_size_bytes:
        run.sanitizing.skip("racecheck", NO_SHARED_MEMORY)
    run.sanitizing.go(run.text)
    return True


def start_counters(run: Run, v: Verdict) -> bool:
    """On a GPU, where the exercise's speed is graded: Nsight Compute's run over one launch,
    given the source now, so that it overlaps the checks, the sanitizer and the speed run
    (its counted launch holds the GPU alone, never beside a timed round);
    :func:`lesson_gate` reads it where the speed gate is passed, else it is stopped unread."""
    if run.rt.name == "gpu" and run.speed and run.ex.speed_graded:
        counting = run.ahead.take_counting() if run.ahead is not None else None
        run.counting = counting or counters.Counting(run.ex.id)
        run.counting.go(run.text)
    return True


def sanitizer_verdict(run: Run, v: Verdict) -> bool:
    """The sanitizer's findings, read after the speed run it ran beside: for a kernel
    correct until the speed run, a problem fails it, and what was done since is taken
    back (the speed run, the lesson, the emulator's traffic count): the verdict is the one
    the steps in turn would give, the sanitizer judged before anything is timed."""
    if run.sanitizing is None:
        return True
    tools, run.sanitizing = run.sanitizing, None
    kept, run.kept = run.kept, None
    if kept is None:  # wrong before the speed run: the sanitizer would not have run, and
        tools.stop()  # its findings are no part of the verdict
        return True
    found = tools.results()
    v.timeline |= tools.marks
    problems = [r["summary"] for r in found.values() if r.get("errors")]
    if problems:
        _take_back(v, kept)
        v.correct = False
        v.traffic = None
        v.messages.extend(problems)
    v.sanitizer = found
    return True


def lesson_traffic(run: Run, v: Verdict) -> bool:
    """On a GPU, the emulator's count of the same source's global traffic: feedback beside
    the GPU's own counters (it decides nothing there: the lesson is graded from those).
    A CPU's work (a build and an emulator launch), so it runs on a thread of its own beside
    the schedules and the speed run (whose launches wait on the GPU), and the speed step
    takes it before the lesson (:func:`take_traffic`)."""
    if not (v.correct and run.rt.name == "gpu" and run.speed and run.ex.speed_graded):
        return True
    run.counting_traffic = _beside(run).submit(count_traffic, run.ex, run.text,
                                               run.rng.spawn(1)[0])
    return True


def take_traffic(run: Run, v: Verdict) -> None:
    """The traffic count :func:`lesson_traffic` started, into ``v.traffic``, taken after the
    timed rounds (a kernel the schedules found wrong never gets here: its count is not
    wanted, and :func:`evaluate` waits for it to end)."""
    counting, run.counting_traffic = run.counting_traffic, None
    if counting is None:
        return
    counted = _joined(counting, v, "traffic_wait")
    if isinstance(counted, dict):
        v.traffic = counted


def count_traffic(ex: Exercise, text: str, rng: np.random.Generator) -> dict[str, Any] | str:
    """The emulator's traffic summary of ``text`` at the analysis shape, or why there is none."""
    emu = get_runtime("emu")
    fn = compile_kernel(emu, text, ex.kernel, Verdict(ex.id, emu.name), analysis=True)
    if fn is None:
        return "the emulator could not build it"
    shape = ex.problem.analysis_shape
    try:
        launch(emu, fn, ex.problem, ex.launch, shape, ex.problem.make_inputs(shape, rng))
    except launch_errors(emu) as exc:
        return _one_line(exc)
    return traffic.summary(fn.last_report.analysis, ex.problem, shape)


def lesson_gate(run: Run, v: Verdict) -> None:
    """On a GPU, take the speed points back from a fast kernel whose own counters (Nsight
    Compute, the timed nvcc build at the speed shape) show it skips the lesson; where the
    counters cannot be read, the lesson is not measured and earns nothing."""
    ex = run.ex
    if not v.speed_passed:
        return
    t0 = time.perf_counter()
    try:
        # the counted launch holds the GPU's one profiler, not the whole ncu process
        counting, run.counting = run.counting, None
        if counting is None:
            counting = counters.Counting(ex.id)
            counting.go(run.text)
        try:
            v.counters = counters.figures(ex, counting.result())
        finally:
            v.timeline |= counting.marks
    except (gpulock.GpuBusy, counters.CountersUnavailable) as exc:
        v.counters = {"error": str(exc)}
    v.timeline["counters"] = round(time.perf_counter() - t0, 4)  # within "speed"
    if "error" in v.counters:
        v.speed_passed = False
        v.messages.append(f"speed: {v.speedup:.2f}x is over the gate, but the lesson was not "
                          f"measured: {v.counters['error']}")
        return
    v.messages.append(counters.describe(v.counters, v.traffic, v.bank_degree))
    judge_lesson(ex, v)


def judge_lesson(ex: Exercise, v: Verdict) -> None:
    """The speed points go with the lesson, judged from the counters in ``v.counters``."""
    skipped = counters.skipped_lesson(ex, v.counters or {})
    if v.speed_passed and skipped:
        v.speed_passed = False
        v.messages.append(f"speed: {v.speedup:.2f}x is over the gate, but {skipped}; the "
                          "speed points go with the lesson. " + ex.gate_reason)


def speed(run: Run, v: Verdict) -> bool:
    """The speed gate, measured on a GPU; on the emulator speed and the lesson are not
    measured (its analysis, run in the kernel's own process, is feedback, never points).
    While the sanitizer or the schedules still run, the verdict as it stands is kept
    first: a finding returns to it (:func:`sanitizer_verdict`, :func:`take_schedules`)."""
    ex, rt = run.ex, run.rt
    if not v.correct:
        return True
    if run.sanitizing is not None or run.scheduling is not None:
        run.kept = Verdict.from_dict(v.to_dict())
    v.messages.append(f"correct on {len(ex.shapes)} shapes with fresh random inputs")
    if not ex.speed_graded:
        v.messages.append("this step is graded for correctness only (no speed test)")
    elif rt.name == "gpu" and run.speed:
        try:
            measure_speed(rt, run.fn, ex, v, run.rng)
        except Exception:  # a kernel the schedules find wrong gets their verdict, as before
            if not take_schedules(run, v):
                return True
            raise
        if take_schedules(run, v):
            take_traffic(run, v)
            lesson_gate(run, v)
    elif rt.name == "gpu":
        v.messages.append("speed was not measured (not asked for): correctness only")
    else:
        v.messages.append(
            f"speed and lesson points: {scoring.NOT_MEASURED} (the CPU emulator has no "
            "meaningful time, and its analysis runs in the kernel's own process, so it is "
            "feedback, not points)"
        )
        analysis_feedback(ex, v)
    take_schedules(run, v)  # where the speed run did not take it
    return True


def analysis_feedback(ex: Exercise, v: Verdict) -> None:
    """On the emulator, what its analysis says of the lesson, as feedback: the worst
    conflicted shared access line and whether the global traffic skips the lesson."""
    skipped = traffic.skipped_lesson(v.traffic or {}, ex.reuses_tiles)
    if ex.max_bank_degree is not None:
        if v.bank_degree is None:
            v.messages.append("feedback: the kernel makes no shared-memory access, and this "
                              "exercise is about a padded shared-memory tile")
        else:
            v.messages.append(
                f"feedback: the emulator's {scoring.bank_degree_text(v)} (a padded tile: <= "
                f"{ex.max_bank_degree:g}); on a GPU the lesson is graded by the GPU's own "
                "counters")
    if skipped:
        v.messages.append(f"feedback: on a GPU this kernel would lose its speed points: "
                          f"{skipped}")


def measure_speed(rt: Runtime, fn: Any, ex: Exercise, v: Verdict, rng: np.random.Generator) -> None:
    """The candidate and the gate's baseline (and a lesson-skipping kernel, where the
    exercise names one), timed interleaved on this GPU so that no launch can replay another
    (:func:`tilelab.device.bench.time_checked`): every timed launch gets new inputs, fresh
    poison and its output checked; one wrong launch and the kernel earns nothing at all."""
    kernels = {"candidate": Timed(fn, ex.launch), "baseline": _timed(rt, ex.baseline)}
    if ex.must_beat is not None:
        kernels["lesson-skipping"] = _timed(rt, ex.must_beat)
    counting = {"unwritten": build(rt, UNWRITTEN_SOURCE).get_function(UNWRITTEN)}
    shape = ex.speed_shape
    try:  # each round's timed launches alone on a GPU a class run shares; copies shared
        t = checked_timing(rt, kernels, ex, shape, rng, counting["unwritten"],
                           gpu_work=gpulock.shared, alone=gpulock.exclusive,
                           redo_after_ms=HELD_UP_MS if rt.name == "gpu" else None)
    except (gpulock.GpuBusy, HeldUp) as exc:
        v.messages.append(f"speed was not measured: {exc}; grade it again")
        v.regrade = str(exc)
        return
    except WrongLaunch as exc:
        if exc.label != "candidate":
            raise RuntimeError(f"the grader's own {exc.label} kernel went wrong: {exc}") from None
        v.correct = False
        v.messages.append(wrong_launch_message(ex, exc))
        return
    except kernel_faults(rt) as exc:  # the candidate's: the grader's own run at this shape
        v.correct = False
        v.messages.append(f"the speed run's launch at {fmt_shape(ex.problem, shape)} failed: "
                          f"{_one_line(exc, 600)} A kernel must be right at every size: "
                          "check its bounds tests and the size of its shared arrays.")
        return
    finally:
        with gpulock.shared(), contextlib.suppress(*kernel_faults(rt)):  # the reference
            kernels.clear()  # kernels' modules unload: GPU work (in vain once a launch failed)
            counting.clear()  # and the grader's count of unwritten words
    v.speed_measured = True
    v.speed_rounds_redone = t["candidate"].redone
    v.timeline["speed_lock_wait"] = round(t["candidate"].waited_s, 4)
    v.timeline["speed_alone"] = round(t["candidate"].alone_s, 4)  # the GPU held alone
    v.timeline["speed_holds"] = t["candidate"].holds
    v.candidate_ms = t["candidate"].median_ms
    v.baseline_ms = t["baseline"].median_ms
    v.speedup = v.baseline_ms / v.candidate_ms
    v.speed_passed = v.speedup >= ex.gate
    if not v.speed_passed:
        v.messages.append(
            f"speed: {v.speedup:.2f}x over {ex.baseline.label} at {shape}; the gate is "
            f"{ex.gate:g}x. {ex.gate_reason}"
        )
    if ex.must_beat is not None and v.speed_passed:
        other_ms = t["lesson-skipping"].median_ms
        if v.candidate_ms >= other_ms:
            v.speed_passed = False
            v.messages.append(
                f"speed: {v.candidate_ms:.3f} ms, no faster than {ex.must_beat.label} "
                f"({other_ms:.3f} ms), which skips this lesson; the gate also requires "
                "beating it."
            )


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
    rt = get_runtime("gpu")
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


#: The grader, in order.
STEPS: tuple[Step, ...] = (
    validate, compile_candidate, sanitizer, start_counters, correctness, lesson_traffic,
    schedules, analysis, speed, sanitizer_verdict,
)


def evaluate(
    exercise_id: str,
    source: str | bytes,
    backend_name: str | None = None,
    speed: bool = True,
    sanitize: bool = True,
    gate: float | None = None,
    ahead: Ahead | None = None,
) -> Verdict:
    """Grade one kernel source for one exercise, in this process (``ahead``: the GPU tools
    the grading worker started before it, :mod:`tilelab.grading.ahead`)."""
    ex = exercises.get(exercise_id)
    if gate is not None:
        ex = ex.with_gate(gate, f"gate set by the instructor to {gate:g}x")
    rt = get_runtime(backend_name)
    v = Verdict.for_exercise(ex, rt.name, rt.device_name if rt.name == "gpu" else None)
    run = Run(ex, rt, source, speed=speed, sanitize=sanitize, ahead=ahead)
    try:
        with gpulock.private() if rt.name == "gpu" else contextlib.nullcontext():
            for step in STEPS:
                t0 = time.perf_counter()
                go_on = step(run, v)
                v.step_seconds[step.__name__] = round(time.perf_counter() - t0, 4)
                if not go_on:
                    break
    finally:
        if run.sanitizing is not None:  # a step failed while the sanitizer ran
            run.sanitizing.stop()
        if run.counting is not None:  # not needed (slow, or wrong), or a step failed
            run.counting.stop()
        if run.beside is not None:  # work beside not taken (wrong since) ends first
            run.beside.shutdown(wait=True, cancel_futures=True)
    p = scoring.points(v)
    v.points_correct, v.points_speed = p.correct, p.speed
    return v


def _compiler_text(exc: BaseException) -> str:
    """What the learner reads of a failed build: the emulator's errors on kernel.cu with
    their lines (its message, without g++'s notes on the prelude it compiles with), or
    nvcc's output."""
    if isinstance(exc, errors.CompileError):
        return exc.msg.removeprefix(errors.DID_NOT_COMPILE).strip()[:4000]
    text = getattr(exc, "stderr", None) or getattr(exc, "msg", None) or str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.strip()[:4000]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {exc}"[:limit]
