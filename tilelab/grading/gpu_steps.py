"""The steps only a GPU grade runs: its tools started ahead, its checks, the emulator's
analysis beside the timed run, the timed run, the lesson from the GPU's own counters, and
the sanitizer's findings.

The GPU's tools (compute-sanitizer, Nsight Compute) and the emulator's work (its race
analysis and varied orders, its count of the traffic) run beside the checks and the
timed rounds, and are read after them (``take_*``): the judge puts their findings back in
turn (:data:`tilelab.grading.pipeline.GPU_ORDER`), so a race the emulator finds, or a
problem the sanitizer finds, costs correctness as if it had been found before anything
was timed.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from tilelab.catalog.exercises import Exercise
from tilelab.device.backend import Backend
from tilelab.device.runtime import get_runtime
from tilelab.grading import counters, traffic
from tilelab.grading.correctness import launch
from tilelab.grading.emu_steps import emulated_finding
from tilelab.grading.judge import Kind
from tilelab.grading.sanitizer import Sanitizers
from tilelab.grading.steps import (
    Run,
    checking,
    compile_kernel,
    find_wrong,
    one_line,
    say_correct,
    take_shapes,
)
from tilelab.grading.timed import measure_speed
from tilelab.isolation import gpulock

#: why racecheck is not run over a kernel whose build has no shared memory
NO_SHARED_MEMORY = ("the kernel has no shared memory (its build declares none, and the "
                    "grader launches it with none), and racecheck looks for races in shared "
                    "memory only; memcheck checks its other accesses")


def start_tools(run: Run) -> None:
    """Once the kernel compiles: compute-sanitizer's racecheck and memcheck over one launch
    each, and where speed is graded Nsight Compute's run over one launch, given the source
    now (started ahead by the worker, or here) and run beside the next steps;
    :func:`take_sanitizer` and :func:`grade_lesson` read them. racecheck runs only where the
    build has shared memory (it finds hazards in shared memory alone, and its start is the
    heaviest of the tools', on a check's longest path). Nsight Compute's counted launch
    holds the GPU alone, never beside a timed round."""
    ahead = run.ahead
    if run.sanitize:
        run.sanitizing = (ahead.take_sanitizers() if ahead else None) or Sanitizers(run.ex.id)
        if not run.shared_memory:
            run.sanitizing.skip("racecheck", NO_SHARED_MEMORY)
        run.sanitizing.go(run.text)
    if run.speed and run.ex.speed_graded:
        run.counting = (ahead.take_counting() if ahead else None) or counters.Counting(run.ex.id)
        run.counting.go(run.text)


def check_outputs(run: Run) -> None:
    """Every graded shape on this GPU; where some are wrong, one diagnosis of the most
    telling (a second launch of a wrong shape tells a race from a steady mistake)."""
    results = take_shapes(run, checking(run))
    if results is not None:
        find_wrong(run, results)


def start_beside(run: Run) -> None:
    """For a kernel right on this GPU: the same source on the emulator, analysed for races
    and run in its varied orders (:func:`emulator_finding`), and, where speed is graded,
    its count of the global traffic (feedback beside the GPU's counters): a CPU's work, on
    threads beside the timed run, whose launches wait on the GPU."""
    if run.speed and run.ex.speed_graded:
        run.counting_traffic = _beside(run).submit(count_traffic, run.ex, run.text,
                                                   run.rng.spawn(1)[0])
    run.scheduling = _beside(run).submit(emulator_finding, run.ex, run.text,
                                         run.rng.spawn(1)[0])


def time_speed(run: Run) -> None:
    """The speed gate, timed on this GPU (:func:`tilelab.grading.timed.measure_speed`). A
    kernel the emulator finds wrong meanwhile gets that verdict, whatever the timed run
    raised."""
    say_correct(run)
    if not run.ex.speed_graded:
        return
    if not run.speed:
        run.find(Kind.NOTE, "speed was not measured (not asked for): correctness only")
        return
    try:
        measure_speed(run.rt, run.fn, run.ex, run.rng, run.findings, run.step, run.timeline)
    except Exception:
        if take_schedules(run):
            return
        raise


def take_schedules(run: Run) -> bool:
    """What :func:`emulator_finding` found: a kernel wrong in the emulator's orders, or
    racing in its analysis, is wrong (True where it is)."""
    pending, run.scheduling = run.scheduling, None
    if pending is None:
        return False
    why = _joined(pending, run, "schedules_wait")
    if why is not None:
        run.find(Kind.WRONG, why, step="take_schedules")
    return why is not None


def take_traffic(run: Run) -> None:
    """The emulator's count of the traffic (:func:`count_traffic`), taken after the timed
    rounds: feedback beside the GPU's own counters (it decides nothing here)."""
    pending, run.counting_traffic = run.counting_traffic, None
    if pending is None:
        return
    counted = _joined(pending, run, "traffic_wait")
    if isinstance(counted, dict):
        run.find(Kind.NOTE, traffic=counted)


def grade_lesson(run: Run) -> None:
    """For a kernel over the speed gate: the lesson from its own counters (Nsight Compute,
    the timed nvcc build at the speed shape); a kernel that skips it loses the speed
    points, and where the counters cannot be read the lesson is not measured and earns
    nothing."""
    v = run.so_far()
    if not v.speed_passed:
        return
    figures = _counted(run)
    if "error" in figures:
        run.find(Kind.SLOW, f"speed: {v.speedup:.2f}x is over the gate, but the lesson was "
                 f"not measured: {figures['error']}", counters=figures)
        return
    run.find(Kind.NOTE, counters.describe(figures, v.traffic, v.bank_degree), counters=figures)
    skipped = counters.skipped_lesson(run.ex, figures)
    if skipped:
        run.find(Kind.SLOW, f"speed: {v.speedup:.2f}x is over the gate, but {skipped}; the "
                 "speed points go with the lesson. " + run.ex.gate_reason)


def _counted(run: Run) -> dict[str, Any]:
    """The lesson's figures from Nsight Compute's run, or ``error`` where it could not be
    read (the counted launch holds the GPU's one profiler, not the whole ncu process)."""
    t0 = time.perf_counter()
    try:
        counting, run.counting = run.counting, None
        if counting is None:
            counting = counters.Counting(run.ex.id)
            counting.go(run.text)
        try:
            figures = counters.figures(run.ex, counting.result())
        finally:
            run.timeline |= counting.marks
    except (gpulock.GpuBusy, counters.CountersUnavailable) as exc:
        figures = {"error": str(exc)}
    run.timeline["counters"] = round(time.perf_counter() - t0, 4)
    return figures


def take_sanitizer(run: Run) -> None:
    """The sanitizer's findings, read last: a problem costs correctness, judged as if
    before anything was timed."""
    tools, run.sanitizing = run.sanitizing, None
    if tools is None:
        return
    found = tools.results()
    run.timeline |= tools.marks
    run.find(Kind.NOTE, sanitizer=found)
    for problem in (r["summary"] for r in found.values() if r.get("errors")):
        run.find(Kind.WRONG, problem)


def _joined(pending: Future, run: Run, mark: str) -> Any:
    """The result of work run beside, its wait for it in ``run.timeline[mark]``."""
    t0 = time.perf_counter()
    result = pending.result()
    run.timeline[mark] = round(time.perf_counter() - t0, 4)
    return result


def _beside(run: Run) -> ThreadPoolExecutor:
    """The threads a run's CPU work beside the GPU's runs on (made at the first use)."""
    if run.beside is None:
        run.beside = ThreadPoolExecutor(2, thread_name_prefix="tilelab-beside")
    return run.beside


def emulator_finding(ex: Exercise, text: str, rng: np.random.Generator) -> str | None:
    """Why ``text``, right on a GPU, is wrong on the emulator (:func:`tilelab.grading.
    emu_steps.emulated_finding`: its analysis and varied orders at the smallest graded
    shapes of two blocks or more); None where it is right there and no race is found."""
    found = emulated_finding(ex, text, rng)
    if found is None:
        return None
    race, why = found
    if race:
        return (f"right on this GPU, but not on the emulator: {why}\nA GPU run that happens "
                "to hide a race is not evidence of a correct kernel: the blocks and threads "
                "of a launch may run in any order.")
    return ("right on this GPU, but not on the emulator, which runs the blocks and threads "
            f"of a launch in varied orders: {why} A kernel must be right in every order a "
            "GPU may run it (no block may read or overwrite another's output).")


def count_traffic(ex: Exercise, text: str, rng: np.random.Generator) -> dict[str, Any] | str:
    """The emulator's traffic summary of ``text`` at the analysis shape, or why there is none."""
    emu = get_runtime(Backend.EMU)
    built = compile_kernel(emu, text, ex.kernel, analysis=True)
    if built.fn is None:
        return "the emulator could not build it"
    shape = ex.problem.analysis_shape
    try:
        launch(emu, built.fn, ex.problem, ex.launch, shape, ex.problem.make_inputs(shape, rng))
    except emu.launch_errors as exc:
        return one_line(exc)
    return traffic.summary(built.fn.last_report.analysis, ex.problem, shape)
