"""What the exercise notebooks call: say where kernels run, check a kernel, grade it.

Everything here is light (no nbgrader), so it works in Colab with only the package and
PyCUDA installed. :func:`check` never raises on a wrong kernel: it prints what is wrong.
Nothing runs in this process, neither the learner's kernel nor the reference: the
grader's child measures it and sends back a verdict, the emulator's analysis and both
traces of the picture included; this module only prints it (and draws the picture).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tilelab import picture, settings
from tilelab.catalog import exercises
from tilelab.device import backend
from tilelab.device.backend import Backend
from tilelab.grading import scoring
from tilelab.grading.sandbox import grade_source
from tilelab.grading.verdict import Verdict

AWARD_ENV = settings.AWARD_SPEED_WITHOUT_GPU.name
CLASS_GRADING_ENV = settings.CLASS_GRADING.name


def backend_line() -> str:
    """One line naming where kernels run: the GPU's name, or the CPU emulator."""
    try:
        chosen = backend.resolve()
    except backend.BackendError as exc:
        return f"Backend: none usable ({exc})"
    if chosen is Backend.GPU:
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
    grading (in a class run: that the class grader graded the kernels, whatever ran this
    notebook)."""
    if settings.CLASS_GRADING.get():
        print("Class grading: the course's grader graded your kernels in its own process, "
              "on the grading GPU where the course has one; the hidden tests below show its "
              "verdicts.")
        return
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


def check(exercise_id: str, source: str, show: bool = False) -> None:
    """Grade ``source`` like the hidden tests do and print a verdict a learner can act on.

    ``show``: also draw what one block of the kernel read and wrote beside the reference
    (:mod:`tilelab.picture`); drawn without asking when it explains a failure."""
    ex = exercises.get(exercise_id)
    try:  # the report's first line names the backend; each line is printed once
        if settings.CLASS_GRADING.get():
            print("(the visible check is skipped during class grading: the hidden tests grade it)")
            return
        verdict = grade_source(ex.id, source, backend_name=backend.resolve(),
                               trace_reference=True)
        print(scoring.report(verdict, settings.AWARD_SPEED_WITHOUT_GPU.get()))
    except Exception as exc:  # the check must explain, never raise
        print(backend_line())
        print(f"The check could not run: {type(exc).__name__}: {exc}")
        return
    if verdict.speed_measured and verdict.gpu and verdict.gpu.strip() != exercises.GRADING_GPU:
        print(f"(advisory: {speed_advice(verdict.gpu)})")
    text = scoring.analysis_text(verdict) if verdict.compiled else ""
    if verdict.backend == Backend.EMU and text:
        print()
        print(text)
    if "printf" in source:
        print(PRINTF_NOTE)
    show_picture(ex, verdict, show)


PRINTF_NOTE = ("(printf output is not shown here: the check runs your kernel in the grader's "
               "own process; to see it, launch the kernel yourself in a cell, as in the "
               "book's appendix *Running without a GPU*)")


def show_picture(ex: exercises.Exercise, verdict: Verdict, asked: bool) -> None:
    """Draw the kernel's trace beside the reference's, both in the verdict (nothing is run
    here), when asked, or when it explains a failure: the kernel touched other elements
    than the reference, or a bank gate failed. Never raises."""
    if not verdict.touch:
        if asked:
            print("(no picture: it is drawn from the CPU emulator's run of a kernel that "
                  "compiles; on a GPU, set TILELAB_BACKEND=emu to draw it)")
        return
    ref = verdict.reference_touch
    if ref is None:
        if asked:
            print("(no picture: the grader sent no trace of the reference kernel with this "
                  "verdict)")
        return
    try:
        bank_failed = verdict.bank_degree is not None and verdict.speed_passed is False
        if not (asked or bank_failed or (not verdict.correct
                                         and picture.differs(verdict.touch, ref))):
            return
        png = picture.draw(ex, verdict.touch, ref)
    except Exception as exc:  # the picture helps; it must never hide the verdict
        print(f"(no picture: {type(exc).__name__}: {exc})")
        return
    print("\nWhat one block of your kernel read and wrote, beside the reference's:")
    display_png(png, f"tilelab_{ex.id}.png")


def display_png(png: bytes, name: str) -> None:
    """Show a PNG in a notebook, or write it to ``name`` and say where."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display

        if get_ipython() is not None:
            display(Image(data=png))
            return
    except ImportError:
        pass
    Path(name).write_bytes(png)
    print(f"(picture written to {name})")


def grade(exercise_id: str, source: str) -> Verdict:
    """The hidden correctness test: grade ``source`` in the grader's clean process, print
    the report, return the verdict (for :func:`assert_speed`)."""
    verdict = grade_source(exercises.get(exercise_id).id, source, backend_name=backend.resolve())
    print(wrapped(scoring.report(verdict, settings.AWARD_SPEED_WITHOUT_GPU.get())))
    return verdict


#: the width the hidden tests' reports are wrapped at: nbgrader's feedback page shows a
#: cell's output as it is, so a longer line scrolls the diagnosis out of sight
WIDTH = 100


def wrapped(text: str, width: int = WIDTH) -> str:
    """Each line of ``text`` wrapped at ``width``, its continuation indented under it."""
    out = []
    for line in text.splitlines():
        lead = line[: len(line) - len(line.lstrip())]
        out.append(textwrap.fill(line, width, subsequent_indent=lead + "    ",
                                 break_long_words=False, break_on_hyphens=False)
                   if len(line) > width else line)
    return "\n".join(out)


def assert_speed(verdict: Verdict) -> None:
    """The hidden speed test: print the measurement, fail unless the gate is met. A correct
    kernel whose speed nobody measured (no GPU) does not fail: it earns no speed points,
    which is not the learner's failure (the class run writes the points either way)."""
    award = settings.AWARD_SPEED_WITHOUT_GPU.get()
    ok, why = scoring.speed_status(verdict, award)
    if not ok and verdict.correct and not scoring.speed_judged(verdict):
        where = "no GPU" if verdict.backend != "gpu" else scoring.unmeasured(verdict)
        print(f"speed ({verdict.exercise}): not measured ({where}): 0 points, not a failure "
              "of yours")
        return
    print(f"speed ({verdict.exercise}): {'PASS' if ok else 'FAIL'}: {why}")
    assert ok, why
