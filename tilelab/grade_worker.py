"""The grader's clean process: compile one kernel source, check it, time it, judge it.

Run as ``python -m tilelab.grade_worker --exercise ID --source FILE --out FILE``; it
writes a JSON :class:`~tilelab.verdict.Verdict`. It never imports a learner's Python:
only the kernel source reaches it, so nothing a notebook does can change its verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

import numpy as np

from tilelab import exercises
from tilelab.check import check_function
from tilelab.exercises import Exercise
from tilelab.runtime import Runtime, get_runtime
from tilelab.source_checks import SourceRejected, check_signature, validate_source
from tilelab.verdict import Verdict

ANALYSIS_SHAPE = {"matmul": (64, 64, 64), "transpose": (64, 64)}
# compute-sanitizer runs one launch at a shape with partial tiles, to expose missing guards
SANITIZE_SHAPE = {"matmul": (50, 70, 40), "transpose": (50, 70)}


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


def check_correctness(
    rt: Runtime, fn: Any, ex: Exercise, v: Verdict, rng: np.random.Generator
) -> bool:
    for shape in ex.shapes:
        try:
            res = check_function(rt, fn, ex.problem, ex.launch, shape, rng)
        except launch_errors(rt) as exc:
            v.messages.append(f"shape {shape}: the launch failed: {_one_line(exc, 1500)}")
            v.shapes.append({"shape": list(shape), "ok": False, "message": str(exc)[:1500]})
            return False
        v.shapes.append(res.to_dict())
        if not res.ok:
            v.messages.append(res.message)
            return False
    return True


def emu_analysis(
    rt: Runtime, source: str, ex: Exercise, v: Verdict, rng: np.random.Generator,
    output_ok: bool = True,
) -> bool:
    """Race and bank-conflict analysis on the emulator; False when it finds a race or when
    the analysed build computes a wrong result (its output is checked like any other, so
    the build whose conflicts are judged is a build whose output was checked)."""
    fn = compile_kernel(rt, source, ex.kernel, Verdict(ex.id, rt.name), analysis=True)
    if fn is None:
        return True
    shape = ANALYSIS_SHAPE[ex.problem.name]
    try:
        res = check_function(rt, fn, ex.problem, ex.launch, shape, rng)
    except launch_errors(rt) as exc:
        if output_ok:
            v.messages.append(f"analysis run failed: {_one_line(exc, 1500)}")
        return False
    report = fn.last_report.analysis
    v.races = len(report.races)
    v.bank_degree = report.worst_degree  # None: no shared-memory access at all
    if report.has_races:
        likely = "" if output_ok else " (the likely cause of the wrong result)"
        v.messages.append(
            f"shared-memory race found by the emulator's analysis{likely}:\n"
            + report.summary()
        )
        return False
    if not res.ok:
        if output_ok:
            v.messages.append(f"the build analysed for races and bank conflicts computed a "
                              f"wrong result at {shape}: {res.message}")
        return False
    return True


def bank_gate(ex: Exercise, v: Verdict) -> None:
    """On the emulator, a padding exercise's speed points: the worst conflicted access line
    of the shared tile (extra conflict-free accesses cannot dilute it); none without any
    shared-memory access (the lesson is the padded tile)."""
    if v.bank_degree is None:
        v.speed_passed = False
        v.messages.append(
            "no GPU: graded by the emulator's bank-conflict degree, but the kernel makes no "
            "shared-memory access: this exercise grades a padded shared-memory tile, so it "
            "earns no speed points"
        )
        return
    v.speed_passed = v.bank_degree <= ex.max_bank_degree
    v.messages.append(
        f"no GPU: graded by the emulator's bank-conflict degree, {v.bank_degree:.2f} on the "
        f"worst shared-memory access line (gate <= {ex.max_bank_degree:g}); speed was not "
        "measured"
    )


def measure_speed(rt: Runtime, fn: Any, ex: Exercise, v: Verdict, rng: np.random.Generator) -> None:
    """Time the kernel against the baseline (and a lesson-skipping kernel, where the
    exercise names one), then check what the timed runs wrote: a wrong speed run earns
    nothing at all."""
    from tilelab.bench import prepared_launch, time_interleaved

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


def sampled_compare(ex: Exercise, shape: tuple, inputs: dict[str, np.ndarray],
                    got: np.ndarray, rng: np.random.Generator) -> Any:
    """Compare ``got`` with the float64 reference on a sample of output rows (all of them
    for a problem whose reference is cheap)."""
    from tilelab.check import compare

    if ex.problem.name != "matmul" or shape[0] <= SAMPLED_ROWS:
        return compare(ex.problem, shape, inputs, got, ex.launch)
    rows = np.sort(rng.choice(shape[0], SAMPLED_ROWS, replace=False))
    first = ex.problem.arg_order[0]  # A: its rows are C's rows
    sub = dict(inputs, **{first: inputs[first][rows]})
    return compare(ex.problem, (SAMPLED_ROWS, *shape[1:]), sub, got[rows], ex.launch)


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
    v = Verdict(
        exercise=ex.id,
        backend=rt.name,
        gpu=rt.device_name if rt.name == "gpu" else None,
        gate=ex.gate,
        baseline=ex.baseline.label,
        max_bank_degree=ex.max_bank_degree,
        max_points_correct=ex.points_correct,
        max_points_speed=ex.points_speed,
    )
    try:
        text = validate_source(source)
        check_signature(text, ex.kernel, ex.signature)
    except SourceRejected as exc:
        v.messages.append(str(exc))
        return v
    rng = np.random.default_rng()
    fn = compile_kernel(rt, text, ex.kernel, v)
    if fn is None:
        return v
    correct = check_correctness(rt, fn, ex, v, rng)
    launch_failed = any(": the launch failed:" in m for m in v.messages)
    if rt.name == "emu" and not launch_failed:  # a race found on a wrong result is named
        correct = emu_analysis(rt, text, ex, v, rng, output_ok=correct) and correct
    if correct and rt.name == "gpu" and sanitize:
        from tilelab.sanitizer import run_sanitizers

        v.sanitizer = run_sanitizers(ex.id, text)
        problems = [r["summary"] for r in v.sanitizer.values() if r.get("errors")]
        if problems:
            correct = False
            v.messages.extend(problems)
    v.correct = correct
    if correct:
        v.messages.append(f"correct on {len(ex.shapes)} shapes with fresh random inputs")
        if rt.name == "gpu" and speed:
            measure_speed(rt, fn, ex, v, rng)
        elif ex.max_bank_degree is not None and rt.name == "emu":
            bank_gate(ex, v)
        elif rt.name == "gpu":
            v.messages.append("speed was not measured (not asked for): correctness only")
        else:
            v.messages.append("speed was not measured: no GPU here (correctness only)")
    v.points_correct = ex.points_correct if v.correct else 0.0
    v.points_speed = ex.points_speed if (v.correct and v.speed_passed) else 0.0
    return v


def _compiler_text(exc: BaseException) -> str:
    text = getattr(exc, "stderr", None) or getattr(exc, "msg", None) or str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.strip()[:4000]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {exc}"[:limit]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilelab.grade_worker")
    p.add_argument("--exercise", required=True)
    p.add_argument("--source", required=True, help="file with the kernel source")
    p.add_argument("--out", required=True,
                   help="where to write the JSON verdict: a file, or fd:N for a pipe the "
                   "parent made (the sandbox's result channel)")
    p.add_argument("--backend", choices=("gpu", "emu"))
    p.add_argument("--no-speed", action="store_true")
    p.add_argument("--no-sanitize", action="store_true")
    p.add_argument("--gate", type=float)
    a = p.parse_args(argv)
    if a.out.startswith("fd:"):  # keep the channel from every process this one starts
        os.set_inheritable(int(a.out[3:]), False)
    with open(a.source, "rb") as f:
        source = f.read()
    try:
        verdict = evaluate(
            a.exercise,
            source,
            a.backend,
            speed=not a.no_speed,
            sanitize=not a.no_sanitize,
            gate=a.gate,
        )
    except Exception as exc:  # the grader's own failure: say so, never crash silently
        verdict = Verdict(
            exercise=a.exercise, backend=a.backend or "?", error=f"{type(exc).__name__}: {exc}"
        )
        verdict.messages.append(f"internal grader error: {_one_line(exc)}")
        traceback.print_exc()
    data = json.dumps(verdict.to_dict()).encode()
    if a.out.startswith("fd:"):
        fd = int(a.out[3:])
        while data:
            data = data[os.write(fd, data):]
        os.close(fd)
    else:
        with open(a.out, "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
