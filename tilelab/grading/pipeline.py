"""The grader: one kernel source for one exercise becomes one :class:`Verdict`.

:func:`evaluate` picks one list of steps for the backend, once: :data:`EMU_STEPS` on the
CPU emulator, :data:`GPU_STEPS` on a GPU. Each step records what it finds
(:mod:`tilelab.grading.judge`), and :func:`~tilelab.grading.judge.judge` alone turns the
findings into the verdict, in the order the steps would run one after another
(:data:`EMU_STEPS` itself; :data:`GPU_ORDER` on a GPU, where the emulator's work and the
GPU's tools run beside the timed run and are read after it). The first finding that
costs correctness ends the grade there: a step after it is not run, and what it measured
would be dropped anyway::

    emulator: validate -> compile -> check (with the analysis launch beside) -> analyse
              (races, banks, traffic) -> feedback
    GPU:      validate -> compile -> the tools started (sanitizer, Nsight Compute) -> check
              -> the emulator beside (its analysis and orders at small shapes, its traffic)
              -> the emulator's finding -> the sanitizer's -> the timed run -> the traffic
              -> the lesson from the GPU's own counters

One correctness rule holds on both backends: a wrong output at any shape, a failed launch
(an access out of bounds or misaligned, a divergent barrier), or a race the emulator's
analysis finds (shared or global memory, within or between blocks) is a finding that
costs correctness. Points rest only on evidence the submission cannot shape: outputs the
grader compares, the GPU's timers on launches that each do the whole work, and the GPU's
counters on the timed build. The emulator's analysis runs in the kernel's own process:
it can take points away, never give them. All of this runs in the grading worker's clean
process (:mod:`tilelab.grading.worker`), which never imports a learner's Python.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

from tilelab.catalog import exercises
from tilelab.device.backend import Backend
from tilelab.device.runtime import get_runtime
from tilelab.grading import emu_steps, gpu_steps, scoring
from tilelab.grading.ahead import Ahead
from tilelab.grading.judge import decided_before, judge
from tilelab.grading.steps import Run, Step, compile_candidate, validate
from tilelab.grading.verdict import Verdict
from tilelab.isolation import gpulock

#: The grader on the CPU emulator, in order.
EMU_STEPS: tuple[Step, ...] = (
    validate, compile_candidate, emu_steps.check_outputs, emu_steps.analyse,
    emu_steps.give_feedback,
)
#: The grader on a GPU, in the order the steps run: what runs beside is started early and
#: taken late.
GPU_STEPS: tuple[Step, ...] = (
    validate, compile_candidate, gpu_steps.start_tools, gpu_steps.check_outputs,
    gpu_steps.start_beside, gpu_steps.time_speed, gpu_steps.take_schedules,
    gpu_steps.take_traffic, gpu_steps.grade_lesson, gpu_steps.take_sanitizer,
)
#: The same steps in turn, as the judge orders their findings: the emulator's finding and
#: the sanitizer's before anything is timed.
GPU_ORDER: tuple[Step, ...] = (
    validate, compile_candidate, gpu_steps.start_tools, gpu_steps.check_outputs,
    gpu_steps.start_beside, gpu_steps.take_schedules, gpu_steps.take_sanitizer,
    gpu_steps.time_speed, gpu_steps.take_traffic, gpu_steps.grade_lesson,
)


def names(steps: Sequence[Step]) -> tuple[str, ...]:
    return tuple(step.__name__ for step in steps)


def evaluate(
    exercise_id: str,
    source: str | bytes,
    backend: Backend,
    speed: bool = True,
    sanitize: bool = True,
    gate: float | None = None,
    ahead: Ahead | None = None,
    trace_reference: bool = False,
) -> Verdict:
    """Grade one kernel source for one exercise, in this process (``ahead``: the GPU tools
    the grading worker started before it, :mod:`tilelab.grading.ahead`;
    ``trace_reference``: where the verdict carries the kernel's trace, the reference's
    beside it, for the picture a notebook draws)."""
    ex = exercises.get(exercise_id)
    if gate is not None:
        ex = ex.with_gate(gate, f"gate set by the instructor to {gate:g}x")
    rt = get_runtime(backend)
    on_gpu = rt.name is Backend.GPU  # the one place the backend picks the steps
    steps, order = (GPU_STEPS, GPU_ORDER) if on_gpu else (EMU_STEPS, EMU_STEPS)
    run = Run(ex, rt, source, names(order), speed=speed, sanitize=sanitize, ahead=ahead)
    with gpulock.private() if on_gpu else contextlib.nullcontext():
        v = grade(run, steps, rt.device_name if on_gpu else None)
    if trace_reference and v.touch:
        v.reference_touch = emu_steps.reference_trace(ex)
    return v


def grade(run: Run, steps: Sequence[Step], gpu: str | None = None) -> Verdict:
    """Run ``steps`` in order, each unless a step before it in turn found the kernel
    wrong; then the judge's verdict of their findings, and its points."""
    seconds: dict[str, float] = {}
    try:
        for step in steps:
            if decided_before(run.findings, run.order, step.__name__):
                continue
            run.step = step.__name__
            t0 = time.perf_counter()
            step(run)
            seconds[run.step] = round(time.perf_counter() - t0, 4)
    finally:
        if run.sanitizing is not None:  # not read (wrong before), or a step failed
            run.sanitizing.stop()
        if run.counting is not None:  # not needed (slow, or wrong), or a step failed
            run.counting.stop()
        if run.beside is not None:  # work beside not taken (wrong since) ends first
            run.beside.shutdown(wait=True, cancel_futures=True)
    v = Verdict.for_exercise(run.ex, run.backend.value, gpu)
    v.step_seconds, v.timeline = seconds, run.timeline
    judge(v, run.findings, run.order)
    p = scoring.points(v)
    v.points_correct, v.points_speed = p.correct, p.speed
    return v
