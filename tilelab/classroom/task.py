"""The class run's one unit of work: grade one (student, assignment) in a private course.

:func:`grade` receives the course's grading inputs (:class:`Course`, the same for every
task of a run) and one submission's files (:class:`Submission`), builds a private course
root in a temporary folder (the nbgrader configuration, the source notebooks, a SQLite
gradebook of its own that already holds every assignment's cells, the one submission),
runs the steps there (:func:`tilelab.classroom.steps.grade_one`: clean grade, nbgrader
autograde, feedback, the verdict files) and returns everything needed to record it
(:class:`Result`). It writes nothing outside its temporary folder: the run's one writer
(:mod:`tilelab.classroom.writer`) records the result in the course's gradebook and folders.
It is the only way a submission is graded, in this process or on a cluster's worker; a
submission that cannot be graded (refused, or its worker killed) gets its zero from the
same steps (:func:`zero_result`).
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import temp_attrs
from sqlalchemy.exc import SAWarning

from tilelab import settings
from tilelab.classroom import course as nbcourse
from tilelab.classroom import resume, submissions
from tilelab.classroom.steps import ClassRun, Refusal, grade_one, protocol
from tilelab.device import backend as backends
from tilelab.isolation import bubblewrap, scratch

GRADEBOOK = nbcourse.PRIVATE_GRADEBOOK


@dataclass(frozen=True)
class Course:
    """The course's grading inputs: the same for every task of a run."""

    files: dict[str, bytes]  # nbgrader config and source notebooks, by path in the course
    gradebook: bytes  # a SQLite gradebook holding every assignment's source cells
    backend: str | None  # None: each worker's own (a GPU where it has one)
    award_speed_without_gpu: bool
    cell_timeout: int
    gates: dict[str, float]
    digest: str  # :func:`tilelab.classroom.resume.inputs_digest` of all the above
    sandboxed: bool = True  # each kernel and notebook of a task in a bubblewrap sandbox
    #: seconds one notebook may run, all its cells together
    notebook_timeout: int = int(settings.NOTEBOOK_TIMEOUT.default)


@dataclass(frozen=True)
class Submission:
    """One student's submitted files for one assignment, by path in the submission folder."""

    student: str
    assignment: str
    files: dict[str, bytes]
    digest: str
    unsafe: list[str] = field(default_factory=list)  # links, special files: nothing was read


@dataclass
class Result:
    """Everything the writer records for one graded submission."""

    student: str
    assignment: str
    submission_digest: str
    inputs_digest: str
    summary: dict[str, Any]  # the class run's summary entry for this submission
    failures: list[dict[str, Any]] = field(default_factory=list)
    timestamp: datetime | None = None  # nbgrader's: the submission's timestamp.txt, if any
    notebooks: dict[str, dict[str, Any]] = field(default_factory=dict)  # nb -> flags
    grades: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # nb -> cell
    comments: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    autograded: dict[str, bytes] = field(default_factory=dict)  # the autograded folder
    feedback: dict[str, bytes] = field(default_factory=dict)  # the feedback folder
    backend: str = ""
    gpu: str | None = None
    seconds: float = 0.0
    started: float = 0.0  # when the task began (seconds since the epoch)
    worker: str = ""
    retry: bool = False  # the grader's fault, not the submission's: grade it again next run


def course_files(api: NbGraderAPI) -> dict[str, bytes]:
    """The nbgrader configuration and the source notebooks of a course, by relative path."""
    cd = api.coursedir
    course_root = Path(cd.root).resolve()
    config = nbcourse.config_path(course_root)
    source = Path(cd.root, cd.source_directory).resolve()
    files = {
        f"{source.relative_to(course_root).as_posix()}/{k}": v
        for k, v in resume.read_tree(source).items()
    }
    files[config.resolve().relative_to(course_root).as_posix()] = config.read_bytes()
    return files


#: templates made in this process: (course files' digest, assignments) -> gradebook bytes
_TEMPLATES: dict[tuple[str, tuple[str, ...]], bytes] = {}
_TEMPLATES_KEPT = 8


def template_gradebook(files: dict[str, bytes], assignments: list[str]) -> bytes:
    """A SQLite gradebook that knows every assignment's cells (nbgrader's release records
    them), built in a private copy of the course once per process for the same course files
    and assignments (a rerun, or a test's next class run, reads it from memory: a release
    costs nbgrader about two seconds per assignment)."""
    key = (resume.digest_files(files), tuple(assignments))
    if key not in _TEMPLATES:
        if len(_TEMPLATES) >= _TEMPLATES_KEPT:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))  # the oldest
        _TEMPLATES[key] = _release_gradebook(files, assignments)
    return _TEMPLATES[key]


def _release_gradebook(files: dict[str, bytes], assignments: list[str]) -> bytes:
    with scratch.folder("template") as tmp:
        root = Path(tmp)
        _write(root, files)
        api = open_private_api(root, None)
        with scratch.folder("release") as out:
            for a in assignments:
                with temp_attrs(api.coursedir, release_directory=str(out)):
                    result = api.generate_assignment(a, force=True, create=True)
                nbcourse.check_result(result, f"generate_assignment {a}")
        with Gradebook(api.coursedir.db_url):  # exists even when no assignment has work
            pass
        return Path(api.coursedir.db_url.removeprefix("sqlite:///")).read_bytes()


def open_private_api(root: Path, cell_timeout: int | None, sandboxed: bool = True,
                     notebook_timeout: int | None = None) -> NbGraderAPI:
    """nbgrader's API on a private course root, with its own SQLite gradebook."""
    return nbcourse.open_api(root, cell_timeout, sandboxed, gradebook=root / GRADEBOOK,
                             notebook_timeout=notebook_timeout)


def _write(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def grade(course: Course, sub: Submission, refusal: Refusal | None = None) -> Result:
    """Grade one submission in a private copy of the course; see the module's docstring.
    ``refusal``: not graded at all (nothing of the submission is read or run), every kernel
    0 points with the refusal's text."""
    start, started = time.monotonic(), time.time()
    chosen = backends.resolve(course.backend)  # None: this worker's own
    retry = False
    if refusal is None and sub.unsafe:
        refusal = Refusal("files", submissions.refusal(sub.unsafe))
    if refusal is None and course.sandboxed and (why := bubblewrap.problem()):
        refusal, retry = Refusal("sandbox", f"no sandbox on the grading machine: {why}"), True
    gpu = backends.gpu_probe()[1] if chosen == "gpu" and refusal is None else None
    with scratch.folder("task") as tmp:
        root = Path(tmp) / "course"
        _write(root, course.files)
        api = open_private_api(root, course.cell_timeout, course.sandboxed,
                               course.notebook_timeout)
        cd = api.coursedir
        db = Path(cd.db_url.removeprefix("sqlite:///"))
        db.parent.mkdir(parents=True, exist_ok=True)
        db.write_bytes(course.gradebook)
        submitted = Path(cd.format_path(cd.submitted_directory, sub.student, sub.assignment))
        if refusal is None:
            _write(submitted, sub.files)
        rows: dict[str, Any] = {}  # the gradebook's, read once the scores are in
        run = ClassRun(
            api, chosen, gpu, course.award_speed_without_gpu, course.cell_timeout, course.gates,
            sandboxed=course.sandboxed, notebook_timeout=course.notebook_timeout,
            snapshot=lambda: rows.update(_gradebook_rows(cd, sub.assignment, sub.student)),
        )
        with settings.environ(protocol(run)), warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)  # nbgrader's own autoflush warnings
            try:
                summary = grade_one(run, sub.assignment, sub.student, refusal)
                retry = retry or bool(summary.pop("regrade", None))  # a speed not measured
            except Exception as exc:  # the grader's own failure: record it, go on
                run.failed(sub.assignment, sub.student, "internal", f"{type(exc).__name__}: {exc}")
                summary = {"assignment": sub.assignment, "student": sub.student, "points": {}}
                retry = True
        result = Result(
            student=sub.student,
            assignment=sub.assignment,
            submission_digest=sub.digest,
            inputs_digest=course.digest,
            summary=summary,
            failures=run.failures,
            backend=chosen,
            gpu=gpu,
            started=started,
            worker=f"{socket.gethostname()}:{os.getpid()}",
            retry=retry,
            **(rows or _gradebook_rows(cd, sub.assignment, sub.student)),
        )
        result.autograded = resume.read_tree(
            Path(cd.format_path(cd.autograded_directory, sub.student, sub.assignment))
        )
        result.feedback = resume.read_tree(
            Path(cd.format_path(cd.feedback_directory, sub.student, sub.assignment))
        )
        shutil.rmtree(root, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def zero_result(course: Course, sub: Submission, step: str, why: str,
                retry: bool = False) -> Result:
    """0 points for a submission that could not be graded (its worker died, the grader
    failed), ``why`` as its feedback: the same steps as any grade, refusing it.
    ``retry``: the grader's fault, so a later run grades it again."""
    result = grade(course, sub, Refusal(step, why))
    result.retry = retry
    return result


def _gradebook_rows(cd: CourseDirectory, assignment: str, student: str) -> dict[str, Any]:
    """The submission's rows in the task's private gradebook, as :class:`Result`'s fields
    (read before nbgrader's feedback step runs over the notebook: nothing that step does
    to the gradebook reaches the course's)."""
    out: dict[str, Any] = {"notebooks": {}, "grades": {}, "comments": {}}
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return out
        out["timestamp"] = sub.timestamp
        for nb in sub.notebooks:
            out["notebooks"][nb.name] = {
                "flagged": nb.flagged,
                "late_submission_penalty": nb.late_submission_penalty,
            }
            out["grades"][nb.name] = {
                g.name: {
                    "auto_score": g.auto_score,
                    "manual_score": g.manual_score,
                    "extra_credit": g.extra_credit,
                    "needs_manual_grade": g.needs_manual_grade,
                }
                for g in nb.grades
            }
            out["comments"][nb.name] = {
                c.name: {"auto_comment": c.auto_comment, "manual_comment": c.manual_comment}
                for c in nb.comments
            }
    return out
