"""Grade a class with nbgrader: one driver over one unit of work, the executor handed in.

:func:`grade_class` lists the submissions, leaves out those already graded from the same
files and grading inputs (unless asked to regrade them), hands the rest to an executor as
tasks (:func:`tilelab.classroom.task.grade`: each in a private course, writing nothing
shared) and records each result as it arrives (:class:`tilelab.classroom.writer.Writer`,
the one writer of the gradebook and the feedback), then exports nbgrader's CSV and the
per-kernel CSV (:mod:`tilelab.classroom.kernel_csv`). Where tasks run is the executor's
business: this process (:mod:`tilelab.classroom.inline`, the default) or a Dask cluster
(:func:`tilelab.cluster.run.on_dask`, which the command line hands in).

Points come only from the grader's clean process. A learner's Python runs inside the
notebook kernel during ``nbgrader autograde`` and could patch the grader there, so each
kernel cell is read straight from the submitted notebook (by its ``kernel_<exercise>``
grade id; nothing is executed), graded by :func:`tilelab.grading.sandbox.grade_source`,
and its points are written over the hidden tests' scores in the gradebook (as nbgrader
manual scores), so the CSV export and the feedback show only those (see
:mod:`tilelab.classroom.steps`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from nbgrader.coursedir import CourseDirectory

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.classroom import course, kernel_csv, resume, standing, submissions, summary, task
from tilelab.classroom import trail as regrades
from tilelab.classroom.inline import inline
from tilelab.classroom.progress import Progress
from tilelab.classroom.steps import VERDICT_FILE
from tilelab.classroom.writer import Writer
from tilelab.device import backend as backends
from tilelab.isolation import bubblewrap, limits

NO_SANDBOX_WARNING = (
    "GRADED WITHOUT A SANDBOX (--no-sandbox): every submitted notebook and kernel ran with "
    "the instructor's rights and could read the solutions and the gradebook, change other "
    "students' files and forge its own scores. Use only for submissions you trust."
)


class Executor(Protocol):
    """Where a class run's tasks run: a callable yielding each task's result as it ends,
    and saying in ``about`` how many workers it had and how long they took to start."""

    remote: bool  # tasks run on other machines: their own backend and sandbox check
    where: str  # said in the summary: "this process", "local Dask cluster, 2 workers" ...

    def __call__(self, course: task.Course, todo: list[task.Submission],
                 about: dict[str, Any]) -> Iterator[task.Result]: ...


def read_submission(cd: CourseDirectory, student: str, assignment: str) -> task.Submission:
    """A submission's files; none where its folder holds links, special files or files too
    large (checked by apparent size before anything is read: the task then refuses it,
    naming them)."""
    folder = Path(cd.format_path(cd.submitted_directory, student, assignment))
    try:
        unsafe = submissions.refused_entries(folder, cd.max_file_size * 1000)
        if not unsafe:
            files = resume.read_tree(folder)
            return task.Submission(student, assignment, files, resume.digest_files(files))
    except (OSError, ValueError) as exc:  # one submission's folder never stops the run
        unsafe = [f"files that could not be read ({type(exc).__name__}: {exc})"]
    text = "\n".join(unsafe).encode("utf-8", "backslashreplace")
    return task.Submission(student, assignment, {}, resume.digest_files({"\0unsafe": text}),
                           unsafe)


def grade_class(
    course_root: str | Path = ".",
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    backend: str | None = None,
    award_speed_without_gpu: bool = False,
    progress: bool = True,
    cell_timeout: int | None = None,
    gates: dict[str, float] | None = None,
    force: bool = False,
    sandboxed: bool = True,
    run_tasks: Executor = inline,
    reason: str | None = None,
) -> dict[str, Any]:
    """Autograde, re-grade every kernel cleanly, generate feedback and export the CSVs, for
    every submission under ``autograder/submitted/`` (or the named students' only; an
    unknown name is refused like an unknown assignment); a submission graded before from
    the same files and grading inputs is left as it is unless ``force``. Each grade that
    changes is appended to the regrade trail (:mod:`tilelab.classroom.trail`), with
    ``reason`` where given. One bad submission never stops the run, nor changes
    another's grade: its failure is in the summary (see :mod:`tilelab.classroom.guards`).
    ``gates``: calibrated speed gates by exercise (``tilelab calibrate``), instead of the
    registry's defaults. ``cell_timeout``: seconds a notebook cell may run (default
    ``TILELAB_CELL_TIMEOUT``, 120). ``backend`` None: this machine's (each worker's own
    on a remote cluster).

    Only students of the gradebook are graded (``nbgrader db student add``); a folder of
    anyone else is reported in ``unknown_students``. ``sandboxed`` (the default): every
    kernel is graded, and every notebook run, in a bubblewrap sandbox that sees only its
    own submission (where tasks run here, raises
    :class:`~tilelab.isolation.bubblewrap.SandboxUnavailable`, saying what to install, where
    none can be made; a remote task without one is refused and graded again next run);
    False runs learners' code with the instructor's rights. Returns the summary
    (:mod:`tilelab.classroom.summary`)."""
    if sandboxed and not run_tasks.remote:
        bubblewrap.require()  # before any submission runs
        limits.warn_missing_caps()
    timeout = settings.CELL_TIMEOUT.get() if cell_timeout is None else cell_timeout
    notebook_timeout = settings.NOTEBOOK_TIMEOUT.get()
    api = course.open_api(course_root, timeout)  # the config, read once
    cd = api.coursedir
    enrolled = course.known_students(cd)
    if unknown := sorted(set(students or ()) - enrolled):
        raise ValueError(
            f"unknown student(s) {unknown}: not students of the gradebook (it has "
            f"{len(enrolled)}); add them with `nbgrader db student add` or "
            "`nbgrader db student import`, or check the spelling")
    work, strangers = course.to_grade(api, assignments, students)
    chosen = None if backend is None and run_tasks.remote else backends.resolve(backend)
    all_gates = {e.id: (gates or {}).get(e.id, e.gate) for e in exercises.EXERCISES.values()}
    out = summary.start(chosen, award_speed_without_gpu, all_gates, run_tasks.where)
    course.report_strangers(out, out["failures"], strangers)
    names = sorted({a for a, _ in work})
    out["missing"] = missing(api, assignments, students, enrolled)
    for a in names:
        try:
            course.ensure_in_gradebook(api, a)
        except Exception as exc:
            out["failures"].append({"assignment": a, "step": "release", "error": str(exc)})
        out["failures"].extend({"assignment": a, "step": "points", "error": why}
                               for why in course.points_disagreements(cd, a))
    files = task.course_files(api)
    run_settings = {
        "backend": chosen,
        "award_speed_without_gpu": award_speed_without_gpu,
        "cell_timeout": timeout,
        "notebook_timeout": notebook_timeout,
        "gates": all_gates,
        "sandboxed": sandboxed,
    }
    digest = resume.inputs_digest(files, run_settings)
    begun = time.monotonic()
    why: dict[tuple[str, str], tuple[Any, str]] = {}
    with Writer(cd) as writer:
        todo = []
        for a, s in work:
            sub = read_submission(cd, s, a)
            doc = resume.recorded(writer.folder("feedback", s, a) / f"{VERDICT_FILE}.json")
            before = writer.scores(s, a)
            fresh = resume.up_to_date(doc, sub.digest, digest, before)
            if fresh and not force:
                out["up_to_date"] += 1
            else:
                todo.append(sub)
                why[(s, a)] = (before, reason or regrades.cause(doc, sub.digest, digest,
                                                                 before, force))
        bar = Progress(len(todo), progress, skipped=out["up_to_date"])
        try:
            if todo:
                inputs = task.Course(
                    files=files,
                    gradebook=task.template_gradebook(files, names),
                    backend=chosen,
                    award_speed_without_gpu=award_speed_without_gpu,
                    cell_timeout=timeout,
                    notebook_timeout=notebook_timeout,
                    gates=gates or {},
                    digest=digest,
                    sandboxed=sandboxed,
                )
                for result in run_tasks(inputs, todo, out):
                    _record(writer, result, out)
                    before, cause = why.get((result.student, result.assignment), (None, ""))
                    regrades.note(cd, result, before, writer.scores(result.student,
                                                                    result.assignment), cause)
                    bar.step(f"{result.assignment} {result.student}", result.seconds)
        finally:
            bar.close()
    summary.finish(out, time.monotonic() - begun)
    autograder = Path(cd.root) / "autograder"
    for key, export in (("csv", course.export_csv), ("kernels_csv", kernel_csv.write)):
        dest = autograder / (course.CSV_FILE if key == "csv" else kernel_csv.FILE)
        try:
            out[key] = str(export(cd, dest))
        except Exception as exc:
            out["failures"].append({"step": "export", "error": f"{dest.name}: {exc}"})
    scope = list(assignments or sorted({m["assignment"] for m in out["missing"]} | set(names)))
    summary.standing(out, standing.read(cd), scope)
    return out


def missing(api: Any, assignments: Sequence[str] | None, students: Sequence[str] | None,
            enrolled: set[str]) -> list[dict[str, str]]:
    """(student, assignment) with no folder under submitted/: for the students named (or
    every student of the gradebook) and the assignments named (or those anyone
    submitted)."""
    names = list(assignments or exercises.ASSIGNMENTS)
    folders = {a: set(api.get_submitted_students(a)) for a in names}
    scope = names if assignments else [a for a in names if folders[a]]
    who = sorted(students or enrolled)
    return [{"student": s, "assignment": a} for a in scope for s in who if s not in folders[a]]


def _record(writer: Writer, result: task.Result, out: dict[str, Any]) -> None:
    """One result into the gradebook and folders, then into the summary."""
    try:
        writer.record(result)
    except Exception as exc:
        out["failures"].append({
            "assignment": result.assignment, "student": result.student, "step": "record",
            "error": f"{type(exc).__name__}: {exc}",
        })
    summary.add(out, result)
