"""The steps only the CPU emulator runs: its checks with their analysis launch, the race
and bank-conflict analysis, and its feedback on speed.

On the emulator, speed and lessons are "not measured: needs a GPU": its analysis runs in
the kernel's own process, so it is feedback, and a race it finds costs correctness, never
earns a point (a forged report could only hide one).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tilelab.catalog.exercises import Exercise
from tilelab.device.backend import Backend
from tilelab.device.runtime import get_runtime
from tilelab.emu.errors import OutOfBoundsAccess
from tilelab.grading import race_shapes, scoring, traffic
from tilelab.grading.correctness import check_function, fmt_shape, lanes
from tilelab.grading.judge import Kind
from tilelab.grading.kernel_lines import Kernel
from tilelab.grading.steps import (
    Run,
    analysis_launch,
    checking,
    compile_kernel,
    find_wrong,
    one_line,
    say_correct,
    take_shapes,
)
from tilelab.grading.value_path import accumulator_fault
from tilelab.grading.verdict import Verdict

#: what the emulator's race analysis is said to find
RACE = "race found by the emulator's analysis (accesses to one word that nothing orders)"
#: how many of an exercise's smallest graded shapes of two blocks or more a kernel is also
#: analysed at, under the emulator's varied block and thread orders, where its analysis
#: shape cannot show a race between blocks (every exercise, on a GPU)
SCHEDULE_SHAPES = 3


def check_outputs(run: Run) -> None:
    """Every graded shape on the emulator, several launches at once where the kernel
    allows (:func:`~tilelab.grading.correctness.lanes`), the analysis launch queued after
    them (built meanwhile), since nearly every check needs it; where some shapes are wrong,
    one diagnosis, told by the analysis for a kernel with shared memory, and the analysis's
    trace of what it touched (the picture)."""
    width = lanes(run.rt, run.fn)
    if width == 1:
        _check(run, None)
        return
    with ThreadPoolExecutor(width, thread_name_prefix="tilelab-launch") as pool:
        _check(run, pool)


def _check(run: Run, pool: ThreadPoolExecutor | None) -> None:
    checked = checking(run, pool)
    if pool is not None:
        run.analysing = pool.submit(analysis_launch, run.rt, run.ex, run.text,
                                    run.ex.problem.analysis_shape, run.rng.spawn(1)[0])
    results = take_shapes(run, checked)
    if results is None:  # a launch failed: nothing later analyses this kernel
        if run.analysing is not None:
            run.analysing.cancel()
            run.analysing = None
        if run.shared_memory:
            run.find(Kind.NOTE, analysis={"error": "the kernel's launch failed (see above)"})
        return
    if all(r.ok for r in results):
        return
    if run.shared_memory:  # the races tell the diagnosis
        run.report = take_analysis(run, explaining=True)
        find_wrong(run, results, list(run.report.races) if run.report is not None else None)
    else:  # the picture of what it touched, or an access out of bounds it stopped at
        take_analysis(run, explaining=True)
        find_wrong(run, results)


def take_analysis(run: Run, explaining: bool) -> Any | None:
    """The analysis report of one launch at the analysis shape, its data and its trace
    recorded (taken from the launch made beside the checks, or launched here); None where
    there is none. For a kernel right so far (not ``explaining`` a wrong one), no report
    is a finding: no race can be ruled out (the analysed build is checked too: the gate
    judges a checked build)."""
    ex, shared = run.ex, run.shared_memory
    try:
        fn, checked = run.analysing.result() if run.analysing is not None else \
            analysis_launch(run.rt, ex, run.text, ex.problem.analysis_shape, run.rng)
    except run.rt.launch_errors as exc:
        if explaining and isinstance(exc, OutOfBoundsAccess) and exc.thread:
            run.fault = exc
        if shared:
            run.find(Kind.NOTE, analysis={"error": (str(exc) or repr(exc)).splitlines()[0][:300]})
        if not explaining:
            run.find(Kind.WRONG, f"analysis run failed: {one_line(exc, 1500)}")
        return None
    if fn is None:  # the candidate built, its analysed build did not: no race is ruled out
        if shared:
            run.find(Kind.NOTE, analysis={
                "error": f"the analysed build could not be made: {checked}"[:300]})
        if not explaining:
            run.find(Kind.WRONG, "the build analysed for races and bank conflicts could not "
                     f"be made, so no race can be ruled out: {checked}")
        return None
    report = fn.last_report.analysis
    at = fmt_shape(ex.problem, ex.problem.analysis_shape)
    run.find(Kind.NOTE, touch=report.touch or None, **(
        {"analysis": {"at": at, "summary": report.summary(
            race_shapes.fix_text(report.races, run.text)), **report.to_dict()}} if shared
        else {}))
    if not checked.ok and not explaining:
        run.find(Kind.WRONG, "the build analysed for races and bank conflicts computed a "
                 f"wrong result: {build_dependent(run.text, checked.message)}")
        return None
    return report


def build_dependent(text: str, message: str) -> str:
    """``message`` (a wrong result of the analysed build only), its likely cause the
    source's accumulator where one is never given a value: a result that depends on the
    build is what a value read before it was set gives."""
    why = accumulator_fault(Kernel(text))
    if why is None or why.cause != "never initialised" or "Likely cause:" not in message:
        return message
    return message.split("Likely cause:")[0] + f"Likely cause: {why}"


def analyse(run: Run) -> None:
    """Races and bank conflicts of one launch at the analysis shape, and its global
    traffic: a race costs a kernel right so far its correctness."""
    report = take_analysis(run, explaining=False)
    if report is None:
        return
    problem, shape = run.ex.problem, run.ex.problem.analysis_shape
    run.find(Kind.NOTE, races=len(report.races),
             bank_degree=report.worst_degree,  # None: no shared-memory access at all
             traffic=traffic.summary(report, problem, shape))
    for remark in traffic.remarks(report, problem, shape, run.ex.reuses_tiles):
        run.find(Kind.NOTE, remark)
    if report.has_races:
        fix = race_shapes.fix_text(report.races, run.text)
        run.find(Kind.WRONG, f"{RACE}:\n{report.summary(fix)}")
    elif blocks(run.ex, problem.analysis_shape) < 2:  # where blocks can race, too
        found = emulated_finding(run.ex, run.text, run.rng.spawn(1)[0])
        if found is not None:
            race, why = found
            run.find(Kind.WRONG, why if race else "the build analysed for races at the "
                     f"smallest graded shapes of two blocks or more went wrong there: {why}")


def give_feedback(run: Run) -> None:
    """Speed and the lesson are not measured on the emulator; what its analysis says of
    the lesson is feedback."""
    say_correct(run)
    if not run.ex.speed_graded:
        return
    run.find(Kind.NOTE, f"speed and lesson points: {scoring.NOT_MEASURED} (the CPU emulator "
             "has no meaningful time, and its analysis runs in the kernel's own process, so "
             "it is feedback, not points)")
    for remark in lesson_feedback(run.ex, run.so_far()):
        run.find(Kind.NOTE, remark)


def lesson_feedback(ex: Exercise, v: Verdict) -> list[str]:
    """What the emulator's analysis in ``v`` says of the lesson: the worst conflicted
    shared access line, and whether the global traffic skips the lesson."""
    said = []
    if ex.max_bank_degree is not None:
        if v.bank_degree is None:
            said.append("feedback: the kernel makes no shared-memory access, and this "
                        "exercise is about a padded shared-memory tile")
        else:
            said.append(f"feedback: the emulator's {scoring.bank_degree_text(v)} (a padded "
                        f"tile: <= {ex.max_bank_degree:g}); on a GPU the lesson is graded "
                        "by the GPU's own counters")
    skipped = traffic.skipped_lesson(v.traffic or {}, ex.reuses_tiles)
    if skipped:
        said.append(f"feedback: on a GPU this kernel would lose its speed points: {skipped}")
    return said


def blocks(ex: Exercise, shape: Sequence[int]) -> int:
    """How many blocks the exercise's launch has at ``shape``."""
    return int(np.prod(ex.launch.grid(ex.problem.sizes(tuple(shape)))))


def two_block_shapes(ex: Exercise, count: int = SCHEDULE_SHAPES) -> list[Sequence[int]]:
    """The exercise's ``count`` smallest graded shapes whose grid has two blocks or more
    (a race between blocks needs two)."""
    return [s for s in sorted(ex.shapes, key=lambda s: float(np.prod(s)))
            if blocks(ex, s) >= 2][:count]


def emulated_finding(ex: Exercise, text: str, rng: np.random.Generator
                     ) -> tuple[bool, str] | None:
    """Whether ``text`` is wrong on the emulator at the smallest graded shapes of two
    blocks or more (:func:`two_block_shapes`), where its analysed build runs the blocks
    and threads in varied orders and finds races in shared and global memory, within and
    between blocks: (True, why) for a race, (False, why) for a wrong result, a failed
    launch or no build; None where it is right there and no race is found. The analysis
    runs in the kernel's own process: a forged report can only hide a finding, and no
    finding earns a point."""
    emu = get_runtime(Backend.EMU)
    built = compile_kernel(emu, text, ex.kernel, analysis=True)
    if built.fn is None:
        return False, "the emulator could not build it."
    for shape in two_block_shapes(ex):
        try:
            r = check_function(emu, built.fn, ex.problem, ex.launch, shape, rng)
        except emu.launch_errors as exc:
            return False, f"its launch failed there: {one_line(exc, 600)}."
        if not r.ok:
            return False, r.message
        report = built.fn.last_report.analysis
        if report.has_races:
            fix = race_shapes.fix_text(report.races, text)
            return True, f"{RACE} at {fmt_shape(ex.problem, shape)}:\n{report.summary(fix)}"
    return None


def reference_trace(ex: Exercise) -> dict[str, Any]:
    """The trace of the course's own reference kernel at the problem's analysis shape (the
    pattern a learner's picture is drawn beside: a trusted source, launched on the
    emulator in the grading worker, never in a learner's notebook)."""
    rt = get_runtime(Backend.EMU)
    fn = rt.SourceModule(ex.reference.source(), analysis=True).get_function(ex.kernel)
    shape = ex.problem.analysis_shape
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(0))
    bufs = {name: rt.to_device(arr) for name, arr in inputs.items()}
    out = np.zeros(ex.problem.output_shape(shape), np.float32)
    bufs[ex.problem.output] = rt.to_device(out)
    fn(*ex.problem.arguments(bufs, shape), block=ex.launch.block,
       grid=ex.launch.grid(ex.problem.sizes(shape)))
    return fn.last_report.analysis.touch
