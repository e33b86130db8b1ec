"""The steps of grading one submission in a class run, in the order :func:`grade_one`
runs them::

    clean grade + autograde (guarded), at once -> scrub -> record -> feedback

Points come only from the clean grade (the grader's own process, which reads the kernel
cell without running the notebook); nbgrader's autograde runs the notebook for its
feedback, beside it, and its hidden tests get the clean verdicts back from a cache, waiting
for them where the clean grade still runs (:func:`grade_beside`, on a GPU in sandboxes;
one after the other on the emulator, and without sandboxes). Both run in
bubblewrap sandboxes (unless the instructor asked for none): a notebook sees a read-only
copy of its own submission and nothing else of the course, so no submission is ever
copied back, deleted or rewritten by the grader.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from nbgrader.apps.api import NbGraderAPI

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.classroom import course, guards, jupyter_sandbox, submissions
from tilelab.grading import scoring
from tilelab.grading.cache import cache_verdict, mark_done
from tilelab.grading.sandbox import grade_source
from tilelab.grading.verdict import Verdict
from tilelab.isolation import scratch

VERDICT_FILE = "tilelab_verdict"


@dataclass
class ClassRun:
    """What grading every submission of one class run shares, and where failures go."""

    api: NbGraderAPI
    backend: str
    gpu: str | None
    award: bool
    cell_timeout: int
    gates: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    secret: list[tuple[str, ...]] = field(default_factory=list)  # the solution blocks
    sandboxed: bool = True
    #: seconds a sandboxed notebook may run, all its cells together
    notebook_timeout: int = int(settings.NOTEBOOK_TIMEOUT.default)

    def __post_init__(self) -> None:
        cd = self.api.coursedir
        self.secret = submissions.solution_blocks(
            sorted(Path(cd.root, cd.source_directory).glob("*/*.ipynb"))
        )

    def failed(self, assignment: str, student: str, step: str, error: str) -> None:
        self.failures.append(
            {"assignment": assignment, "student": student, "step": step, "error": error[-2000:]}
        )

    def folder(self, kind: str, student: str, assignment: str) -> Path:
        """``submitted``, ``autograded`` or ``feedback`` folder of one submission."""
        cd = self.api.coursedir
        return Path(cd.format_path(getattr(cd, f"{kind}_directory"), student, assignment))


def protocol(run: ClassRun) -> dict[str, str | None]:
    """What the notebooks nbgrader runs are told: the backend, the award, a class run."""
    return {
        **settings.BACKEND.set_to(run.backend),
        **settings.AWARD_SPEED_WITHOUT_GPU.set_to("1" if run.award else None),
        **settings.CLASS_GRADING.set_to("1"),
    }


@dataclass
class Submission:
    """One (student, assignment) as it goes through the steps."""

    assignment: str
    student: str
    verdicts: list[Verdict] = field(default_factory=list)
    points: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    own_text: str = ""  # the submitted notebook's text, read before its code ran

    @property
    def notebook(self) -> str:
        return f"{course.notebook_id(self.assignment)}.ipynb"

    def problem(self, run: ClassRun, step: str, text: str) -> None:
        """A failure the learner is told about (in each verdict) and the summary lists."""
        run.failed(self.assignment, self.student, step, text)
        self.notes.append(text)


def grade_notebook(
    notebook_path: str | Path,
    assignment: str,
    backend_name: str,
    gpu: str | None = None,
    cache: Path | None = None,
    gates: dict[str, float] | None = None,
    sandboxed: bool | None = None,
) -> list[Verdict]:
    """A clean-process verdict for every kernel of one submitted notebook (each also kept
    in ``cache``, for the notebook's hidden tests, where one is given)."""
    verdicts = []
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        ex = exercises.get(exercise_id)
        try:
            source = submissions.extract_kernel(notebook_path, exercise_id)
        except submissions.KernelCellError as exc:
            verdicts.append(Verdict.for_exercise(ex, backend_name, gpu,
                                                 f"not graded (0 points): {exc}"))
            continue
        if submissions.empty_kernel(source, ex.kernel):  # the released stub, untouched
            verdict = Verdict.for_exercise(
                ex, backend_name, gpu, f"not attempted (0 points): the body of {ex.kernel} "
                "is empty, as released, so every element of its output is never written; "
                "write the kernel and submit again")
        else:
            verdict = grade_source(
                exercise_id, source, backend_name=backend_name,
                gate=(gates or {}).get(exercise_id), sandboxed=sandboxed,
            )
        if cache is not None:
            cache_verdict(cache, source, verdict)
        verdicts.append(verdict)
    return verdicts


# ------------------------------------------------------------------ the steps


def clean_grade(run: ClassRun, sub: Submission, cache: Path) -> None:
    """Every kernel graded in the grader's own process; a failure scores zero and says why."""
    path = run.folder("submitted", sub.student, sub.assignment) / sub.notebook
    try:
        sub.verdicts = grade_notebook(path, sub.assignment, run.backend, run.gpu,
                                      cache=cache, gates=run.gates, sandboxed=run.sandboxed)
    except Exception as exc:  # never trust the notebook's own scores: zero, say why
        run.failed(sub.assignment, sub.student, "grade", f"{type(exc).__name__}: {exc}")
        sub.verdicts = [
            Verdict.for_exercise(exercises.get(e), run.backend, run.gpu,
                                 f"not graded (0 points): internal grader error: {exc}")
            for e in exercises.ASSIGNMENTS[sub.assignment]
        ]


class Refusal(NamedTuple):
    """Why a submission is not graded at all: the failure's step and the learner's text."""

    step: str
    text: str


def refuse(run: ClassRun, sub: Submission, refusal: Refusal) -> None:
    """A submission not graded (its folder holds links, special files or files too large,
    its worker died, the grader failed): nothing of it is read, copied or run; every kernel
    scores zero and the learner is told why."""
    run.failed(sub.assignment, sub.student, refusal.step, refusal.text)
    sub.verdicts = [Verdict.for_exercise(exercises.get(e), run.backend, run.gpu,
                                         f"not graded (0 points): {refusal.text}")
                    for e in exercises.ASSIGNMENTS[sub.assignment]]


def off_the_gpu(run: ClassRun) -> dict[str, str | None]:
    """Where several tasks share this GPU (its lock named, :mod:`tilelab.isolation.gpulock`),
    the notebook runs on the emulator, its hidden tests reading the clean verdicts: never
    beside another task's timed launches. Sandboxed, it gets no GPU node at all
    (:class:`~tilelab.classroom.jupyter_sandbox.SandboxedKernelManager`); unsandboxed (the
    instructor's choice, for trusted notebooks), CUDA is shown no device."""
    if not settings.GPU_LOCK.get():
        return {}
    return {**settings.BACKEND.set_to("emu"),
            **({} if run.sandboxed else {"CUDA_VISIBLE_DEVICES": ""})}


def autograde(run: ClassRun, sub: Submission, cache: Path,
              beside: threading.Event | None = None) -> None:
    """nbgrader runs the notebook (hidden tests read the cache), guarded: processes left
    behind are killed, a gradebook changed beyond this student's rows is restored.
    ``beside``: set once the clean grade, running meanwhile (:func:`grade_beside`), has
    ended: the sandboxed kernel is told where the verdicts come and how long to wait for
    them, and the guard ends only after the clean grade (whose processes it would kill)."""
    db = Path(run.api.coursedir.db_url.removeprefix("sqlite:///"))
    told: contextlib.AbstractContextManager = contextlib.nullcontext()
    if beside is None:  # the verdicts are all there: no wait, whatever this process has
        told = settings.environ({**settings.VERDICT_CACHE.set_to(cache),
                                 **settings.VERDICT_WAIT.set_to(None), **off_the_gpu(run)})
    else:  # nothing set in this process's environment, which the clean grade reads
        kernels = run.api.config.SandboxedKernelManager
        kernels.no_gpu = True
        kernels.environment = {**settings.VERDICT_CACHE.set_to(cache),
                               **settings.VERDICT_WAIT.set_to(verdict_wait(run.cell_timeout))}
    began = time.monotonic()
    with guards.GradebookGuard(db, sub.student) as guard, told, guards.Reaper() as reaper:
        try:
            result = run.api.autograde(sub.assignment, sub.student, force=True, create=True)
        finally:
            ran = time.monotonic() - began
            if beside is not None:
                beside.wait()
    if reaper.killed:
        sub.problem(run, "processes", f"the notebook left {len(reaper.killed)} process(es) "
                    "running after its cells ended; they were killed")
    if guard.tampered:
        sub.problem(run, "gradebook", guard.tampered)
    elif not result.get("success") and run.sandboxed and ran >= run.notebook_timeout:
        sub.problem(run, "timeout", f"the notebook ran longer than the {run.notebook_timeout} "
                    "s a class run allows one notebook, all its cells together, and was "
                    "stopped")
    elif not result.get("success"):
        run.failed(sub.assignment, sub.student, "autograde",
                   result.get("error") or result.get("log") or "")
        sub.notes.append(autograde_problem(
            result, run.folder("submitted", sub.student, sub.assignment)))


def verdict_wait(cell_timeout: float) -> float:
    """Seconds a hidden test waits for the clean grade's verdict: all but the last two of a
    cell's, so that the wait never becomes the cell's timeout (never under half of it)."""
    return max(cell_timeout - 2.0, cell_timeout / 2)


def grade_beside(run: ClassRun, sub: Submission, cache: Path) -> None:
    """The clean grade and nbgrader's run of the notebook at once (sandboxed runs): the
    notebook, in its sandbox without a GPU, starts its kernel and runs its cells on a
    thread of its own while the clean worker grades on this one; its hidden tests wait for
    the verdicts in ``cache`` (:func:`tilelab.grading.cache.cached_verdict`), marked
    complete when the clean grade ends, whatever its end. A stop (a signal, which reaches
    this thread: nbgrader would take it for the notebook's failure) ends the notebook's
    kernel, and is raised once both have ended."""
    ended = threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="tilelab-notebook")
    try:
        notebook = pool.submit(autograde, run, sub, cache, ended)
        try:
            clean_grade(run, sub, cache)
        finally:
            mark_done(cache)
            ended.set()
        notebook.result()  # the notebook's step failed: the grader's own failure
    except BaseException as exc:
        if not isinstance(exc, Exception):  # stopping: not one more cell
            jupyter_sandbox.stop_kernels()
        raise
    finally:
        pool.shutdown(wait=True)


def scrub(run: ClassRun, sub: Submission) -> None:
    """Cells a time limit stopped are noted; outputs that show a run of solution lines the
    submission does not hold are counted for the instructor (the feedback keeps them)."""
    executed = run.folder("autograded", sub.student, sub.assignment) / sub.notebook
    shown = submissions.solution_shown(executed, run.secret, sub.own_text)
    if stopped := submissions.interrupted_cells(executed):
        sub.problem(run, "timeout", f"{stopped} cell(s) of the notebook ran longer than the "
                    f"{run.cell_timeout} s a class run allows a cell and was interrupted")
    if shown:
        run.failed(sub.assignment, sub.student, "solutions", f"{shown} output(s) of the "
                   f"notebook show {submissions.SOLUTION_RUN} or more consecutive lines of a "
                   "reference solution that the submitted notebook does not contain; the "
                   "feedback was left as it is")


def record(run: ClassRun, sub: Submission) -> None:
    """The clean verdicts' points and reports, with the run's notes, into the gradebook."""
    for v in sub.verdicts:
        v.messages.extend(f"grading note: {n}" for n in sub.notes)
    try:
        sub.points = course.record(run.api.coursedir, sub.assignment, sub.student,
                                   sub.verdicts, run.award)
    except Exception as exc:
        run.failed(sub.assignment, sub.student, "gradebook", f"{type(exc).__name__}: {exc}")


def feedback(run: ClassRun, sub: Submission, refused: bool = False) -> None:
    """nbgrader's feedback (none for a refused submission: no notebook ran), and the
    verdict files beside it."""
    if not refused:
        result = run.api.generate_feedback(sub.assignment, sub.student, force=True)
        if not result.get("success"):
            run.failed(sub.assignment, sub.student, "generate_feedback",
                       result.get("error") or result.get("log") or "")
    folder = run.folder("feedback", sub.student, sub.assignment)
    write_verdicts(folder, sub.student, sub.assignment, sub.verdicts, sub.points, run.award)


def grade_one(run: ClassRun, assignment: str, student: str,
              refusal: Refusal | None = None) -> dict[str, Any]:
    """Every step for one submission; its line of the class summary. ``refusal``: not
    graded, and why (see :func:`refuse`)."""
    sub = Submission(assignment, student)
    folder = run.folder("submitted", student, assignment)
    if refusal is None and (odd := submissions.refused_entries(
            folder, run.api.coursedir.max_file_size * 1000)):
        refusal = Refusal("files", submissions.refusal(odd))  # never read, copied or followed
    if refusal is not None:
        refuse(run, sub, refusal)
    else:
        sub.own_text = submissions.read_capped(folder / sub.notebook)  # before its code runs
        for deleted in submissions.deleted_tests(folder / sub.notebook, assignment):
            sub.problem(run, "cells", deleted)
        with scratch.folder("verdicts") as tmp:
            if run.sandboxed and run.backend == "gpu":
                grade_beside(run, sub, Path(tmp))
            else:  # on the emulator a clean-clone suite once saw an honest kernel's launches
                # overrun their time budget with the notebook beside (cause not found);
                # without a sandbox the notebook shares this process's environment: one at
                # a time
                clean_grade(run, sub, Path(tmp))
                mark_done(Path(tmp))
                autograde(run, sub, Path(tmp))
    scrub(run, sub)
    record(run, sub)
    feedback(run, sub, refused=refusal is not None)
    return summary_line(sub)


def summary_line(sub: Submission) -> dict[str, Any]:
    """A graded submission's line of the class summary; ``regrade``: why the grader could
    not finish measuring a kernel (its fault, not the submission's: the class run grades
    it again next run)."""
    return {
        "assignment": sub.assignment,
        "student": sub.student,
        "points": sub.points,
        "score": sum(sum(p.values()) for p in sub.points.values()),
        "max_score": sum(v.max_points_correct + v.max_points_speed for v in sub.verdicts),
        "messages": {v.exercise: v.messages[:1] for v in sub.verdicts if not v.correct},
        "notes": sub.notes,
        "regrade": [v.regrade for v in sub.verdicts if v.regrade],
    }


# ------------------------------------------------------------------ texts and files


def autograde_problem(result: dict[str, Any], submitted: Path) -> str:
    """A learner's sentence for an nbgrader autograde that failed (``submitted``: the
    submission's folder, whose timestamp.txt nbgrader reads first)."""
    log = (result.get("error") or "") + (result.get("log") or "")
    if stamp := submissions.unreadable_timestamp(submitted):
        why = stamp
    elif "CellTimeoutError" in log or "timed out" in log.lower():
        why = "a cell ran past the time limit and could not be interrupted"
    elif "DeadKernelError" in log or "Kernel died" in log:
        why = "the notebook's Python process died (os._exit? a crash?)"
    elif "NotJSONError" in log or "not valid" in log.lower() or "JSON" in log:
        why = "the notebook is not a valid notebook file"
    else:
        lines = [ln for ln in log.strip().splitlines() if ln.strip()]
        why = lines[-1][:300] if lines else "nbgrader reported a failure"
    return (
        f"nbgrader could not run the notebook ({why}); the kernels were graded from the "
        "submitted file alone"
    )


def write_verdicts(
    folder: Path,
    student: str,
    assignment: str,
    verdicts: Sequence[Verdict],
    points: dict[str, dict[str, float]],
    award_without_gpu: bool,
) -> None:
    """``tilelab_verdict.txt`` (the reports) and ``.json`` (everything) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    v0 = verdicts[0] if verdicts else None
    where = f"GPU {v0.gpu}" if v0 and v0.gpu else "the CPU emulator (no GPU)"
    head = [
        f"tilelab verdicts: student {student}, assignment {assignment}, graded on {where}",
        "Speed points without a GPU: "
        + ("awarded (the instructor's choice)" if award_without_gpu else "not awarded"),
    ]
    body = [scoring.report(v, award_without_gpu) for v in verdicts]
    (folder / f"{VERDICT_FILE}.txt").write_text("\n\n".join(["\n".join(head), *body]) + "\n")
    doc = {
        "student": student,
        "assignment": assignment,
        "graded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "award_speed_without_gpu": award_without_gpu,
        "points": points,
        "verdicts": [v.to_dict() for v in verdicts],
    }
    (folder / f"{VERDICT_FILE}.json").write_text(json.dumps(doc, indent=1) + "\n")
