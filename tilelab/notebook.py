"""What the exercise notebooks call: say where kernels run, check a kernel, grade it.

Everything here is light (no nbgrader), so it works in Colab with only the package and
PyCUDA installed. :func:`check` never raises on a wrong kernel: it prints what is wrong.
Nothing of the learner's kernel runs in this process: the grader's child measures it and
sends back a verdict, the emulator's analysis included; this module only prints it.
"""

from __future__ import annotations

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.device import backend
from tilelab.grading import scoring
from tilelab.grading.sandbox import grade_source
from tilelab.grading.verdict import Verdict

AWARD_ENV = settings.AWARD_SPEED_WITHOUT_GPU.name
CLASS_GRADING_ENV = settings.CLASS_GRADING.name


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
    try:  # the report's first line names the backend; each line is printed once
        if settings.CLASS_GRADING.get():
            print("(the visible check is skipped during class grading: the hidden tests grade it)")
            return
        verdict = grade_source(ex.id, source)
        print(scoring.report(verdict, settings.AWARD_SPEED_WITHOUT_GPU.get()))
    except Exception as exc:  # the check must explain, never raise
        print(backend_line())
        print(f"The check could not run: {type(exc).__name__}: {exc}")
        return
    if verdict.speed_measured and verdict.gpu and verdict.gpu.strip() != exercises.GRADING_GPU:
        print(f"(advisory: {speed_advice(verdict.gpu)})")
    if verdict.backend == "emu" and verdict.compiled and (text := scoring.analysis_text(verdict)):
        print()
        print(text)


def grade(exercise_id: str, source: str) -> Verdict:
    """The hidden correctness test: grade ``source`` in the grader's clean process, print
    the report, return the verdict (for :func:`assert_speed`)."""
    verdict = grade_source(exercises.get(exercise_id).id, source)
    print(scoring.report(verdict, settings.AWARD_SPEED_WITHOUT_GPU.get()))
    return verdict


def assert_speed(verdict: Verdict) -> None:
    """The hidden speed test: print the measurement, fail unless the gate is met."""
    ok, why = scoring.speed_status(verdict, settings.AWARD_SPEED_WITHOUT_GPU.get())
    print(f"speed ({verdict.exercise}): {'PASS' if ok else 'FAIL'}: {why}")
    assert ok, why
