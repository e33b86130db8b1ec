"""The grader: one kernel source for one exercise becomes one :class:`Verdict`.

:func:`evaluate` runs the steps of :data:`STEPS` in order; each takes the grading
:class:`Run` and the verdict, records what it found, and returns False to stop::

    validate -> compile -> correctness -> analysis (emulator) | sanitizer (GPU)
             -> speed (GPU) | bank-conflict gate (emulator) -> points

It runs in the grading worker's clean process (:mod:`tilelab.grading.worker`), which
never imports a learner's Python: only the kernel source reaches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.catalog import exercises
from tilelab.catalog.exercises import Exercise
from tilelab.device.bench import prepared_launch, time_interleaved
from tilelab.device.runtime import Runtime, get_runtime
from tilelab.grading import scoring, traffic
from tilelab.grading.correctness import (
    ShapeResult,
    check_function,
    compare,
    explain,
    fmt_shape,
    launch,
)
from tilelab.grading.diagnosis import diagnose, launch_failure, telling
from tilelab.grading.sanitizer import run_sanitizers
from tilelab.grading.source_checks import SourceRejected, check_signature, validate_source
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
    rng: np.random.Generator = field(default_factory=np.random.default_rng)


Step = Callable[[Run, Verdict], bool]


def compile_errors(rt: Runtime) -> tuple[type[BaseException], ...]:
    if rt.name == "gpu":
        import pycuda.driver as cuda

        return (cuda.CompileError,)
    from tilelab.emu import errors

    return (errors.CompileError, errors.UnsupportedConstruct)


def launch_errors(rt: Runtime) -> tuple[type[BaseException], ...]:
    if rt.name == "gpu":
        import pycuda.driver as cuda

        return (cuda.Error, TypeError, ValueError)
    from tilelab.emu import errors

    return (errors.EmulatorError, TypeError, ValueError)


def compile_kernel(rt: Runtime, source: str, name: str, v: Verdict, **kw: Any) -> Any | None:
    """The compiled function, or None with the reason in the verdict."""
    try:
        module = rt.SourceModule(source, **kw)
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
    """Refuse a source no compiler should see: size, encoding, includes, signature."""
    try:
        run.text = validate_source(run.source)
        check_signature(run.text, run.ex.kernel, run.ex.signature)
    except SourceRejected as exc:
        v.messages.append(str(exc))
        return False
    return True


def compile_candidate(run: Run, v: Verdict) -> bool:
    run.fn = compile_kernel(run.rt, run.text, run.ex.kernel, v)
    return run.fn is not None


def correctness(run: Run, v: Verdict) -> bool:
    """Every graded shape, fresh random inputs, compared with float64; when some are wrong,
    one diagnosis from the most telling of them (:func:`diagnosed`). A failed launch stops
    here (the next steps still explain a kernel that ran)."""
    ex, rt = run.ex, run.rt
    v.correct = True
    results = []
    for shape in ex.shapes:
        try:
            res = check_function(rt, run.fn, ex.problem, ex.launch, shape, run.rng, quick=True)
        except launch_errors(rt) as exc:
            why = launch_failure(ex.problem, ex.launch, shape, exc, run.text)
            v.messages.append(f"shape {shape}: the launch failed: {_one_line(exc, 1500)}"
                              + (f" Likely cause: {why}" if why else ""))
            v.shapes.append({"shape": list(shape), "ok": False, "message": str(exc)[:1500]})
            v.correct, run.launched = False, False
            return True
        v.shapes.append(res.to_dict())
        results.append(res)
    if any(not r.ok for r in results):
        v.correct = False
        v.messages.append(diagnosed(run, v, results))
    return True


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
    if run.rt.name != "emu" or not (v.correct or "__shared__" in run.text):
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
            "shared-memory race found by the emulator's analysis:\n" + report.summary()
        )
        v.correct = False
    return True


def _analyse(run: Run, v: Verdict) -> Any | None:
    """The analysis report of one launch (kept in the verdict), or None when there is none."""
    ex, rt = run.ex, run.rt
    fn = compile_kernel(rt, run.text, ex.kernel, Verdict(ex.id, rt.name), analysis=True)
    if fn is None:
        return None
    shape = ex.problem.analysis_shape
    try:  # the analysed build's output is checked too: the gate judges a checked build
        checked = check_function(rt, fn, ex.problem, ex.launch, shape, run.rng)
    except launch_errors(rt) as exc:
        if "__shared__" in run.text:
            v.analysis = {"error": (str(exc) or repr(exc)).splitlines()[0][:300]}
        if v.correct:
            v.messages.append(f"analysis run failed: {_one_line(exc, 1500)}")
            v.correct = False
        return None
    report = fn.last_report.analysis
    if "__shared__" in run.text:
        at = fmt_shape(ex.problem, shape)
        v.analysis = {"at": at, "summary": report.summary(), **report.to_dict()}
    if not checked.ok and v.correct:
        v.messages.append(f"the build analysed for races and bank conflicts computed a wrong "
                          f"result: {checked.message}")
        v.correct = False
    return report


def sanitizer(run: Run, v: Verdict) -> bool:
    """On a GPU: compute-sanitizer's racecheck and memcheck over one launch."""
    if not (v.correct and run.rt.name == "gpu" and run.sanitize):
        return True
    v.sanitizer = run_sanitizers(run.ex.id, run.text)
    problems = [r["summary"] for r in v.sanitizer.values() if r.get("errors")]
    if problems:
        v.correct = False
        v.messages.extend(problems)
    return True


def lesson_traffic(run: Run, v: Verdict) -> bool:
    """On a GPU, the global traffic of the same source counted by the emulator's analysis,
    so that a speed gate is passed only with the lesson: a kernel with no tile that walks a
    column can be fast on a GPU with large caches, and its time alone cannot tell."""
    if not (v.correct and run.rt.name == "gpu" and run.speed):
        return True
    counted = count_traffic(run.ex, run.text, run.rng)
    if isinstance(counted, str):
        v.messages.append(f"the emulator could not count this kernel's global traffic "
                          f"({counted}): its speed is judged by time alone")
    else:
        v.traffic = counted
    return True


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


def lesson_gate(ex: Exercise, v: Verdict) -> None:
    """Take the speed points back from a fast kernel whose traffic skips the lesson."""
    skipped = traffic.skipped_lesson(v.traffic or {}, ex.reuses_tiles)
    if v.speed_passed and skipped:
        v.speed_passed = False
        v.messages.append(f"speed: {v.speedup:.2f}x is over the gate, but {skipped}; the "
                          "speed points go with the lesson. " + ex.gate_reason)


def speed(run: Run, v: Verdict) -> bool:
    """The speed gate: measured on a GPU, or the emulated bank-conflict degree, or neither."""
    ex, rt = run.ex, run.rt
    if not v.correct:
        return True
    v.messages.append(f"correct on {len(ex.shapes)} shapes with fresh random inputs")
    if rt.name == "gpu" and run.speed:
        measure_speed(rt, run.fn, ex, v, run.rng)
        lesson_gate(ex, v)
    elif ex.max_bank_degree is not None and rt.name == "emu":
        bank_gate(ex, v)
    elif rt.name == "gpu":
        v.messages.append("speed was not measured (not asked for): correctness only")
    else:
        v.messages.append("speed was not measured: no GPU here (correctness only)")
    return True


def bank_gate(ex: Exercise, v: Verdict) -> None:
    """On the emulator, a padding exercise's speed points: the worst conflicted access line
    of the shared tile (extra conflict-free accesses cannot dilute it) and its global
    traffic; none without any shared-memory access (the lesson is the padded tile)."""
    if v.bank_degree is None:
        v.speed_passed = False
        v.messages.append(
            "no GPU: graded by the emulator's bank-conflict degree, but the kernel makes no "
            "shared-memory access: this exercise grades a padded shared-memory tile, so it "
            "earns no speed points"
        )
        return
    skipped = traffic.skipped_lesson(v.traffic or {}, ex.reuses_tiles)
    v.speed_passed = v.bank_degree <= ex.max_bank_degree and skipped is None
    v.messages.append(
        f"no GPU: graded by the emulator's {scoring.bank_degree_text(v)} (gate <= "
        f"{ex.max_bank_degree:g}), and its global traffic"
        + (f": it fails because {skipped}" if skipped else "") + "; speed was not measured"
    )


def measure_speed(rt: Runtime, fn: Any, ex: Exercise, v: Verdict, rng: np.random.Generator) -> None:
    """The candidate and the gate's baseline (and a lesson-skipping kernel, where the
    exercise names one), timed interleaved on this GPU; then what the timed runs wrote is
    checked: a wrong speed run earns nothing at all."""
    base = rt.SourceModule(ex.baseline.source()).get_function(ex.baseline.name)
    shape = ex.speed_shape
    inputs = ex.problem.make_inputs(shape, rng)
    keep: list = []
    runs = {
        "candidate": prepared_launch(rt, fn, ex.problem, ex.launch, shape, inputs, keep),
        "baseline": prepared_launch(rt, base, ex.problem, ex.baseline.launch, shape, inputs, keep),
    }
    if ex.must_beat is not None:
        other = rt.SourceModule(ex.must_beat.source()).get_function(ex.must_beat.name)
        runs["lesson-skipping"] = prepared_launch(rt, other, ex.problem, ex.must_beat.launch,
                                                  shape, inputs, keep)
    t = time_interleaved(runs)
    got = rt.from_device(keep[0][ex.problem.output], ex.problem.output_shape(shape),
                         np.float32)
    checked = sampled_compare(ex, shape, inputs, got, rng)
    if not checked.ok:
        v.correct = False
        v.messages.append(f"the speed run's output is wrong (checked against float64 on "
                          f"sampled rows): {checked.message}. A kernel must be right at every "
                          "size it runs at; no points.")
        return
    v.speed_measured = True
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


SAMPLED_ROWS = 64


def compile_speed_kernels() -> None:
    """Build, with the GPU runtime, every kernel a speed run compiles besides the
    submission (baselines, kernels it must beat): run once per class run into a base cache
    (see :func:`tilelab.device.runtime.seed_pycuda_cache`, which makes its folder)."""
    rt = get_runtime("gpu")
    for ex in exercises.EXERCISES.values():
        for ref in (ex.baseline, ex.must_beat):
            if ref is not None:
                rt.SourceModule(ref.source())


def sampled_compare(ex: Exercise, shape: tuple, inputs: dict[str, np.ndarray],
                    got: np.ndarray, rng: np.random.Generator) -> Any:
    """Compare ``got`` with the float64 reference on a sample of output rows (all of them
    for a problem whose reference is cheap)."""
    if ex.problem.name != "matmul" or shape[0] <= SAMPLED_ROWS:
        return compare(ex.problem, shape, inputs, got, ex.launch)
    rows = np.sort(rng.choice(shape[0], SAMPLED_ROWS, replace=False))
    first = ex.problem.arg_order[0]  # A: its rows are C's rows
    sub = dict(inputs, **{first: inputs[first][rows]})
    return compare(ex.problem, (SAMPLED_ROWS, *shape[1:]), sub, got[rows], ex.launch)


#: The grader, in order.
STEPS: tuple[Step, ...] = (
    validate, compile_candidate, correctness, analysis, sanitizer, lesson_traffic, speed,
)


def evaluate(
    exercise_id: str,
    source: str | bytes,
    backend_name: str | None = None,
    speed: bool = True,
    sanitize: bool = True,
    gate: float | None = None,
) -> Verdict:
    """Grade one kernel source for one exercise, in this process."""
    ex = exercises.get(exercise_id)
    if gate is not None:
        ex = ex.with_gate(gate, f"gate set by the instructor to {gate:g}x")
    rt = get_runtime(backend_name)
    v = Verdict.for_exercise(ex, rt.name, rt.device_name if rt.name == "gpu" else None)
    run = Run(ex, rt, source, speed=speed, sanitize=sanitize)
    for step in STEPS:
        t0 = time.perf_counter()
        go_on = step(run, v)
        v.step_seconds[step.__name__] = round(time.perf_counter() - t0, 4)
        if not go_on:
            break
    p = scoring.points(v)
    v.points_correct, v.points_speed = p.correct, p.speed
    return v


def _compiler_text(exc: BaseException) -> str:
    text = getattr(exc, "stderr", None) or getattr(exc, "msg", None) or str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.strip()[:4000]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {exc}"[:limit]
