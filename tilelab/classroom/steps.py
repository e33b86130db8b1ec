"""The steps of grading one submission in a class run, in the order :func:`grade_one`
runs them::

    read (sandboxed) -> clean grade + autograde (sandboxed, guarded), at once -> scrub
    -> record -> feedback (sandboxed)

Points come only from the clean grade, which grades each kernel cell's source in a sandbox
of its own without running the notebook; nbgrader's autograde runs the notebook for its
feedback, beside it, and its hidden tests get the clean verdicts back from a cache, waiting
for them where the clean grade still runs (:func:`grade_beside`, on a GPU in sandboxes;
one after the other on the emulator, and without sandboxes). Everything that reads the
submitted notebook (its kernel cells, nbgrader's autograde, the scrub of what it wrote,
nbgrader's feedback page) runs in one sandbox per submission with its own caps
(:mod:`tilelab.classroom.notebook_sandbox`), its kernel in another: no learner byte is
read in the grader's own process. A notebook sees a read-only copy of its own submission
and nothing else of the course, so no submission is ever copied back, deleted or
rewritten by the grader.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from nbgrader.apps.api import NbGraderAPI

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.classroom import course, guards, jupyter_sandbox, notebook_sandbox, submissions
from tilelab.classroom.notebook_sandbox import NotebookSandbox
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
    #: called once the gradebook holds the submission's scores (:func:`record`), before
    #: nbgrader's feedback step runs: the task reads the rows it returns then
    snapshot: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        cd = self.api.coursedir
        self.secret = submissions.solution_blocks(
            sorted(Path(cd.root, cd.source_directory).glob("*/*.ipynb"))
        )
        self.secret_digests = submissions.secret_windows(self.secret)

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
    #: each exercise's kernel source, or why it could not be read (``source``/``error``),
    #: as the sandbox of nbgrader's steps read them from the submitted notebook
    kernels: dict[str, dict[str, str]] = field(default_factory=dict)
    autograded: dict[str, Any] | None = None  # what nbgrader's autograde step reported

    @property
    def notebook(self) -> str:
        return f"{course.notebook_id(self.assignment)}.ipynb"

    def problem(self, run: ClassRun, step: str, text: str) -> None:
        """A failure the learner is told about (in each verdict) and the summary lists."""
        run.failed(self.assignment, self.student, step, text)
        self.notes.append(text)


def grade_sources(
    kernels: dict[str, dict[str, str]],
    assignment: str,
    backend_name: str,
    gpu: str | None = None,
    cache: Path | None = None,
    gates: dict[str, float] | None = None,
    sandboxed: bool | None = None,
) -> list[Verdict]:
    """A clean-process verdict for every kernel of one submission (``kernels``: each
    exercise's ``source``, or the ``error`` that says why its cell could not be read),
    each also kept in ``cache``, for the notebook's hidden tests, where one is given."""
    verdicts = []
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        ex = exercises.get(exercise_id)
        got = kernels.get(exercise_id) or {"error": "its kernel cell was not read"}
        if "source" not in got:
            verdicts.append(Verdict.for_exercise(ex, backend_name, gpu,
                                                 f"not graded (0 points): {got['error']}"))
            continue
        source = got["source"]
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


def read_kernels(notebook_path: str | Path, assignment: str) -> dict[str, dict[str, str]]:
    """Each exercise's kernel source in a notebook read here (``source``, or ``error``):
    for a notebook that is not a learner's, or one a test already trusts; a class run
    reads learners' in their sandbox (:mod:`tilelab.classroom.nbgrader_steps`)."""
    out: dict[str, dict[str, str]] = {}
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        try:
            out[exercise_id] = {"source": submissions.extract_kernel(notebook_path, exercise_id)}
        except submissions.KernelCellError as exc:
            out[exercise_id] = {"error": str(exc)}
    return out


def grade_notebook(notebook_path: str | Path, assignment: str, backend_name: str,
                   gpu: str | None = None, cache: Path | None = None,
                   gates: dict[str, float] | None = None,
                   sandboxed: bool | None = None) -> list[Verdict]:
    """:func:`grade_sources` of a notebook's kernel cells (:func:`read_kernels`)."""
    return grade_sources(read_kernels(notebook_path, assignment), assignment, backend_name,
                         gpu, cache, gates, sandboxed)


# ------------------------------------------------------------------ the steps


def clean_grade(run: ClassRun, sub: Submission, cache: Path) -> None:
    """Every kernel graded from the source its sandbox read (:attr:`Submission.kernels`),
    each in a clean sandbox of its own; a failure scores zero and says why."""
    try:
        sub.verdicts = grade_sources(sub.kernels, sub.assignment, run.backend, run.gpu,
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


def autograde(run: ClassRun, sub: Submission, cache: Path, box: NotebookSandbox,
              beside: threading.Event | None = None) -> None:
    """nbgrader runs the notebook in ``box`` (hidden tests read the cache), guarded: a
    gradebook changed beyond this student's rows is restored. ``beside``: set once the
    clean grade, running meanwhile (:func:`grade_beside`), has ended: the notebook's kernel
    gets no GPU and is told how long to wait for the verdicts, and the step ends only
    after the clean grade."""
    db = Path(run.api.coursedir.db_url.removeprefix("sqlite:///"))
    environment: dict[str, str | None] = {**settings.VERDICT_CACHE.set_to(cache)}
    if beside is None:  # the verdicts are all there: no wait
        environment |= {**settings.VERDICT_WAIT.set_to(None), **off_the_gpu(run)}
    else:
        environment |= settings.VERDICT_WAIT.set_to(verdict_wait(run.cell_timeout))
    began = time.monotonic()
    with guards.GradebookGuard(db, sub.student) as guard:
        try:
            result = box.autograde(environment, no_gpu=beside is not None)
        finally:
            ran = time.monotonic() - began
            if beside is not None:
                beside.wait()
    sub.autograded = result
    if guard.tampered:
        sub.problem(run, "gradebook", guard.tampered)
    elif result is None:
        sub.problem(run, "autograde", f"{box.problem}; the kernels were graded from the "
                    "submitted file alone")
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


def grade_beside(run: ClassRun, sub: Submission, cache: Path, box: NotebookSandbox) -> None:
    """The clean grade and nbgrader's run of the notebook at once (sandboxed runs): the
    notebook, in its sandbox without a GPU, runs its cells (this step on a thread of its
    own) while the clean worker grades on this one; its hidden tests wait for the verdicts
    in ``cache`` (:func:`tilelab.grading.cache.cached_verdict`), marked complete when the
    clean grade ends, whatever its end. A stop (a signal, which reaches this thread:
    nbgrader would take it for the notebook's failure) ends the notebook's sandboxes, and
    is raised once both have ended."""
    ended = threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="tilelab-notebook")
    try:
        notebook = pool.submit(autograde, run, sub, cache, box, ended)
        try:
            clean_grade(run, sub, cache)
        finally:
            mark_done(cache)
            ended.set()
        notebook.result()  # the notebook's step failed: the grader's own failure
    except BaseException as exc:
        if not isinstance(exc, Exception):  # stopping: not one more cell
            notebook_sandbox.stop_all()
            jupyter_sandbox.stop_kernels()
        raise
    finally:
        pool.shutdown(wait=True)


OUTPUT_LIMIT_MIB = jupyter_sandbox.OUTPUT_LIMIT >> 20


def scrub(run: ClassRun, sub: Submission) -> None:
    """What the autograde step found in the notebook it ran: cells a time limit stopped
    and outputs past the output cap are noted; outputs that show a run of solution lines
    the submission does not hold are counted for the instructor (the feedback keeps them)."""
    facts = sub.autograded or {}
    if stopped := facts.get("interrupted"):
        sub.problem(run, "timeout", f"{stopped} cell(s) of the notebook ran longer than the "
                    f"{run.cell_timeout} s a class run allows a cell and was interrupted")
    if facts.get("output_dropped"):
        asked = facts.get("output_bytes", 0) / 2**20
        sub.problem(run, "outputs", f"the notebook's outputs, display updates and widget "
                    f"messages came to {asked:,.0f} MiB, more than the {OUTPUT_LIMIT_MIB} MiB a "
                    "class run keeps of one notebook; the rest was dropped from its autograded "
                    "copy and its feedback (the kernels were graded from the submitted file)")
    if shown := facts.get("shown"):
        run.failed(sub.assignment, sub.student, "solutions", f"{shown} output(s) of the "
                   f"notebook show {submissions.SOLUTION_RUN} or more consecutive lines of a "
                   "reference solution that the submitted notebook does not contain; the "
                   "feedback was left as it is")


def record(run: ClassRun, sub: Submission) -> None:
    """The clean verdicts' points and reports, with the run's notes, into the gradebook;
    then the task's snapshot of its rows (before any later step over the notebook)."""
    for v in sub.verdicts:
        v.messages.extend(f"grading note: {n}" for n in sub.notes)
    try:
        sub.points = course.record(run.api.coursedir, sub.assignment, sub.student,
                                   sub.verdicts, run.award)
    except Exception as exc:
        run.failed(sub.assignment, sub.student, "gradebook", f"{type(exc).__name__}: {exc}")
    if run.snapshot is not None:
        run.snapshot()


def feedback(run: ClassRun, sub: Submission, box: NotebookSandbox | None) -> None:
    """nbgrader's feedback page, made in ``box`` (none where nbgrader did not run the
    notebook), and the verdict files beside it."""
    if box is not None:
        result = box.feedback()
        if result is None or not result.get("success"):
            why = box.problem if result is None else result.get("error") or ""
            run.failed(sub.assignment, sub.student, "generate_feedback", why or "")
            if result is None:  # a cap: the learner reads why there is no page
                for v in sub.verdicts:
                    v.messages.append(f"grading note: {why}; there is no feedback page")
    folder = run.folder("feedback", sub.student, sub.assignment)
    write_verdicts(folder, sub.student, sub.assignment, sub.verdicts, sub.points, run.award)


def read_notebook(run: ClassRun, sub: Submission, box: NotebookSandbox) -> bool:
    """The submission's kernel cells, read in its sandbox; whether nbgrader may run the
    notebook (False, with a note, past its caps or where it could not be read)."""
    read = box.start(run.secret_digests)
    if read is None:
        if "bwrap:" in box.stderr.decode("utf-8", "replace"):  # no sandbox: the grader's
            raise RuntimeError(f"the sandbox of nbgrader's steps did not start: {box.problem}")
        sub.kernels = {e: {"error": box.problem or "the notebook could not be read"}
                       for e in exercises.ASSIGNMENTS[sub.assignment]}
        run.failed(sub.assignment, sub.student, "read", box.problem or "")
        return False
    sub.kernels = read["kernels"]
    for deleted in read.get("deleted", ()):
        sub.problem(run, "cells", deleted)
    if read.get("refused"):
        sub.problem(run, "notebook", f"{read['refused']}: nbgrader did not run it and it "
                    "has no feedback page (the kernels were graded from the submitted file); "
                    "remove the extra cells or text and submit again")
        return False
    return True


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
        record(run, sub)
        feedback(run, sub, None)
        return summary_line(sub)
    root = Path(run.api.coursedir.root)
    with scratch.folder("verdicts") as tmp, guards.Reaper() as reaper, NotebookSandbox(
            root, assignment, student, sub.notebook, run.cell_timeout, run.notebook_timeout,
            run.sandboxed) as box:
        runs = read_notebook(run, sub, box)
        if runs and run.sandboxed and run.backend == "gpu":
            grade_beside(run, sub, Path(tmp), box)
        else:  # on the emulator a clean-clone suite once saw an honest kernel's launches
            # overrun their time budget with the notebook beside (cause not found);
            # without a sandbox the notebook shares this machine's cores unguarded: one at
            # a time
            clean_grade(run, sub, Path(tmp))
            mark_done(Path(tmp))
            if runs:
                autograde(run, sub, Path(tmp), box)
        scrub(run, sub)
        record(run, sub)
        feedback(run, sub, box if runs and sub.autograded is not None else None)
    if reaper.killed:
        sub.problem(run, "processes", f"the notebook left {len(reaper.killed)} process(es) "
                    "running after its cells ended; they were killed")
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
