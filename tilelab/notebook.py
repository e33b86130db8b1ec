"""What the exercise notebooks call: say where kernels run, check a kernel, judge its speed.

Everything here is light (no nbgrader), so it works in Colab with only the package and
PyCUDA installed. :func:`check` never raises on a wrong kernel: it prints what is wrong.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tilelab import backend, exercises
from tilelab.verdict import Verdict

AWARD_ENV = "TILELAB_AWARD_SPEED_WITHOUT_GPU"
CLASS_GRADING_ENV = "TILELAB_CLASS_GRADING"  # set by tilelab.classroom while nbgrader runs
ANALYSIS_TIMEOUT = 60.0


def award_speed_without_gpu() -> bool:
    """Whether the instructor asked for speed points where speed cannot be measured."""
    return os.environ.get(AWARD_ENV, "").strip().lower() in ("1", "true", "yes")


def backend_line() -> str:
    """One line naming where kernels run: the GPU's name, or the CPU emulator."""
    try:
        chosen = backend.active()
    except backend.BackendError as exc:
        return f"Backend: none usable ({exc})"
    if chosen == "gpu":
        return f"Backend: GPU {backend.gpu_probe()[1]} (PyCUDA)"
    return f"Backend: CPU emulator (no GPU: {backend.gpu_probe()[1]})"


def speed_advice(gpu_name: str | None) -> str:
    """What a speed verdict means on this GPU (None: no GPU) given where gates were set."""
    where = f"the speed gates were calibrated on the grading GPU, an {exercises.GRADING_GPU}"
    if gpu_name is None:
        return f"Grading measures speed on a GPU: {where}."
    if gpu_name.strip() == exercises.GRADING_GPU:
        return f"This GPU is the grading GPU's model: {where}; its speed verdict is the graded one."
    return (
        f"This GPU ({gpu_name}) is not the grading GPU: {where}. Here the speed verdict is "
        "advisory; your grade's speed test runs on the grading GPU."
    )


def setup() -> None:
    """Print which backend the checks will use, which GPU it is, and what that means for
    grading."""
    line = backend_line()
    print(line)
    if line.startswith("Backend: GPU"):
        print("Checks measure correctness and speed on this GPU.")
        print(speed_advice(backend.gpu_probe()[1]))
    else:
        print(
            "Checks run your kernels on the CPU emulator: correctness, races, bank "
            "conflicts and global-memory traffic are checked, speed is not measured (use a "
            "GPU runtime for that)."
        )
        print(speed_advice(None))


def check(exercise_id: str, source: str) -> None:
    """Grade ``source`` like the hidden tests do and print a verdict a learner can act on."""
    ex = exercises.get(exercise_id)
    print(backend_line())
    if os.environ.get(CLASS_GRADING_ENV):
        print("(the visible check is skipped during class grading: the hidden tests grade it)")
        return
    try:
        from tilelab.grade import grade_source

        verdict = grade_source(ex.id, source)
    except Exception as exc:  # the check must explain, never raise
        print(f"The check could not run: {type(exc).__name__}: {exc}")
        return
    print(verdict.report())
    if verdict.speed_measured and verdict.gpu and verdict.gpu.strip() != exercises.GRADING_GPU:
        print(f"(advisory: {speed_advice(verdict.gpu)})")
    if verdict.backend == "emu" and verdict.compiled:
        summary = analysis_summary(ex.id, source)
        if summary:
            print()
            print(summary)


def analysis_summary(exercise_id: str, source: str) -> str:
    """The emulator's race, bank-conflict and global-traffic tables for one launch at a
    small shape."""
    from tilelab import emu
    from tilelab.grade_worker import ANALYSIS_SHAPE

    ex = exercises.get(exercise_id)
    problem = ex.problem
    shape = ANALYSIS_SHAPE[problem.name]
    sizes = problem.sizes(shape)
    inputs = problem.make_inputs(shape, np.random.default_rng())
    bufs: dict[str, Any] = {k: emu.to_device(v) for k, v in inputs.items()}
    bufs[problem.output] = emu.mem_alloc(4 * int(np.prod(problem.output_shape(shape))))
    args = [bufs[a] if a in bufs else np.int32(sizes[a]) for a in problem.arg_order]
    try:
        report = emu.analyze(
            source,
            ex.kernel,
            *args,
            block=ex.launch.block,
            grid=ex.launch.grid(sizes),
            timeout=ANALYSIS_TIMEOUT,
        )
    except Exception as exc:  # a broken kernel: the verdict above already says why
        return f"(no shared-memory analysis: {str(exc).splitlines()[0][:300]})"
    dims = ", ".join(f"{d}={s}" for d, s in sizes.items())
    return f"At {dims}: {report.summary()}"


def speed_points(verdict: Verdict, award_without_gpu: bool) -> float:
    """Speed points for a verdict: its own, or the full points where speed was not
    measured and the instructor asked for them."""
    if not verdict.correct:
        return 0.0
    if verdict.speed_passed is not None:
        return verdict.max_points_speed if verdict.speed_passed else 0.0
    return verdict.max_points_speed if award_without_gpu else 0.0


def speed_status(verdict: Verdict, award_without_gpu: bool) -> tuple[bool, str]:
    """Whether the speed test passes, and a sentence saying why."""
    if not verdict.correct:
        return False, "no speed points: the kernel is not correct yet (see the test above)"
    if verdict.speed_measured and verdict.speedup is not None:
        return bool(verdict.speed_passed), (
            f"{verdict.speedup:.2f}x over {verdict.baseline} on {verdict.gpu} "
            f"(gate {verdict.gate:g}x; yours {verdict.candidate_ms:.3f} ms, "
            f"baseline {verdict.baseline_ms:.3f} ms)"
        )
    if verdict.speed_passed is not None:
        return bool(verdict.speed_passed), (
            f"speed not measured (no GPU); graded by the emulator's bank-conflict degree: "
            f"{verdict.bank_degree:.2f} (gate <= {verdict.max_bank_degree:g})"
        )
    if award_without_gpu:
        return True, f"speed not measured: no GPU; awarded because {AWARD_ENV}=1"
    return False, "speed not measured: no GPU"


def assert_speed(verdict: Verdict) -> None:
    """The hidden speed test: print the measurement, fail unless the gate is met."""
    ok, why = speed_status(verdict, award_speed_without_gpu())
    print(f"speed ({verdict.exercise}): {'PASS' if ok else 'FAIL'}: {why}")
    assert ok, why
