"""nbgrader's API on this course: configuration, release, gradebook writes, CSV export.

The course's layout comes from ``autograder/nbgrader_config.py`` alone (no user or system
configs). Cell and notebook names follow one convention: assignment ``01-naive`` holds
``naive.ipynb``, whose kernel cell is ``kernel_<exercise>`` and whose hidden tests are
``test_<exercise>_correct`` and ``test_<exercise>_speed``.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nbgrader import api as nbgrader_api
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import temp_attrs
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from tilelab import publish
from tilelab.catalog import exercises
from tilelab.classroom import active_content, formgrader, grades_csv
from tilelab.classroom.jupyter_sandbox import sandbox_autograde
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict
from tilelab.isolation import scratch

CONFIG_FILE = "nbgrader_config.py"
#: The gradebook of a task's private course (by path in it)
PRIVATE_GRADEBOOK = "autograder/tilelab-task-gradebook.db"
CSV_FILE = grades_csv.FILE


def notebook_id(assignment: str) -> str:
    """The notebook of an assignment: ``01-naive`` holds ``naive.ipynb``."""
    return assignment.split("-", 1)[1]


def kernel_cell_id(exercise_id: str) -> str:
    return f"kernel_{exercise_id}"


def test_cell_id(exercise_id: str, kind: str) -> str:
    """The hidden test's grade id; ``kind`` is ``correct`` or ``speed``."""
    return f"test_{exercise_id}_{kind}"


def test_kinds(exercise_id: str) -> tuple[str, ...]:
    """The hidden tests an exercise's notebook holds: a step graded for correctness only
    has no speed test."""
    return ("correct", "speed") if exercises.get(exercise_id).speed_graded else ("correct",)


def config_path(course_root: str | Path) -> Path:
    """``autograder/nbgrader_config.py`` of a course (given the repository or autograder/)."""
    root = Path(course_root).resolve()
    for candidate in (root / "autograder" / CONFIG_FILE, root / CONFIG_FILE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no autograder/{CONFIG_FILE} under {root}")


def load_config(course_root: str | Path) -> Config:
    """The course's nbgrader configuration (only this file: no user or system configs)."""
    path = config_path(course_root)
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def _alembic_on_path() -> None:
    """nbgrader creates a gradebook by running ``alembic`` from PATH; a virtual environment
    used without activation has it next to the interpreter only."""
    here = Path(sys.executable).parent
    if shutil.which("alembic") is None and (here / "alembic").exists():
        os.environ["PATH"] = os.pathsep.join([str(here), os.environ.get("PATH", "")])


_NBGRADERS_OWN = nbgrader_api.get_alembic_version


@functools.cache
def _alembic_head() -> str:
    """The revision nbgrader stamps a new gradebook with: the one head of its own
    migrations, read from their folder in this process; where that cannot be read as one
    head, nbgrader's own way (``alembic heads`` in a new process, ``alembic`` on PATH)."""
    try:
        from alembic.script import ScriptDirectory
        from nbgrader import dbutil

        head = ScriptDirectory(dbutil.ALEMBIC_DIR).get_current_head()
    except Exception:  # several heads, an unreadable folder: nbgrader's answer stands
        head = None
    if head is None:
        _alembic_on_path()
        head = _NBGRADERS_OWN()
    return head


def gradebook_head_in_process() -> None:
    """Make a new gradebook without a new process: nbgrader stamps it with its migrations'
    head by running ``alembic heads``, which imports all of nbgrader (about 4 s of CPU for
    each gradebook made); the same head is read here once per process
    (:func:`_alembic_head`)."""
    nbgrader_api.get_alembic_version = _alembic_head


def open_api(course_root: str | Path, cell_timeout: int | None = None,
             sandboxed: bool = False, gradebook: Path | None = None,
             notebook_timeout: int | None = None,
             kernel_manager: type | None = None) -> NbGraderAPI:
    """nbgrader's Python API on this course (with a per-cell time limit, if given: during
    ``tilelab grade`` it replaces the config file's limit, which a manual
    ``nbgrader autograde`` keeps). The course config is read here, once; ``sandboxed``:
    every notebook's kernel runs in a bubblewrap sandbox (:mod:`tilelab.classroom.jupyter_sandbox`),
    which lives at most ``notebook_timeout`` seconds where given (all its cells);
    ``gradebook``: a SQLite file of its own, in place of the configured one, with
    ``course_root`` as the root (a private copy of the course); ``kernel_manager``: what
    starts the sandboxed kernels (:class:`~tilelab.classroom.jupyter_sandbox.
    SandboxedKernelManager` unless named)."""
    gradebook_head_in_process()
    config = load_config(course_root)
    formgrader.turned_on(config)  # the course turns nbgrader's own autograde off
    if gradebook is not None:
        config.CourseDirectory.root = str(course_root)
        config.CourseDirectory.db_url = f"sqlite:///{gradebook}"
    if cell_timeout is not None:
        config.Execute.timeout = cell_timeout
        config.ExecutePreprocessor.timeout = cell_timeout
    if sandboxed:
        sandbox_autograde(config, kernel_manager)
        if notebook_timeout is not None:
            config.SandboxedKernelManager.wall_seconds = float(notebook_timeout)
    active_content.sanitize_pipelines(config)  # no learner script in what is opened
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def known_students(coursedir: CourseDirectory) -> set[str]:
    """The students of the gradebook (a folder of anyone else is not graded)."""
    try:
        with gradebook(coursedir) as gb:
            return {s.id for s in gb.students}
    except Exception:  # no gradebook yet: nobody is known
        return set()


def gradebook(coursedir: CourseDirectory) -> Gradebook:
    gradebook_head_in_process()
    return Gradebook(coursedir.db_url, coursedir.course_id)


def check_result(result: dict[str, Any], what: str) -> None:
    """Raise when an nbgrader API call reports a failure, with its log's end."""
    if not result.get("success"):
        detail = (result.get("error") or result.get("log") or "").strip()
        raise RuntimeError(f"nbgrader {what} failed:\n{detail[-4000:]}")


def release(
    course_root: str | Path = ".",
    assignments: Iterable[str] | None = None,
    dest: str | Path | None = None,
) -> list[Path]:
    """``nbgrader generate_assignment --force``: release ``solutions/`` into ``exercises/``
    (or into ``dest``); also records the assignments in the gradebook. Returns the notebooks.

    First writes the set-up cell for the course's published URL (``_config.yml``, see
    :mod:`tilelab.publish`) into each source notebook, where the course has a config."""
    api = open_api(course_root)
    cd = api.coursedir
    names = list(assignments or exercises.ASSIGNMENTS)
    if (Path(cd.root) / publish.CONFIG_FILE).is_file():
        sources = {a: Path(cd.format_path(cd.source_directory, ".", a)) / f"{notebook_id(a)}.ipynb"
                   for a in names}
        url = publish.repository_url(cd.root)
        publish.write_setup_cells(list(sources.values()), url, publish.repository_ref(cd.root))
        publish.write_about_cells(sources, url)
    out = str(Path(dest).resolve()) if dest is not None else cd.release_directory
    with temp_attrs(cd, release_directory=out):
        for a in names:
            check_result(api.generate_assignment(a, force=True, create=True),
                         f"generate_assignment {a}")
        return sorted(
            Path(cd.format_path(cd.release_directory, ".", a)).resolve() / f"{notebook_id(a)}.ipynb"
            for a in names
        )


def ensure_in_gradebook(api: NbGraderAPI, assignment: str) -> None:
    """Autograde needs the source's cells in the gradebook: record them if missing."""
    with gradebook(api.coursedir) as gb:
        try:
            known = gb.find_assignment(assignment).notebooks
        except MissingEntry:
            known = []
    if not known:
        with scratch.folder("release") as tmp:
            release(api.coursedir.root, [assignment], dest=tmp)


def points_disagreements(coursedir: CourseDirectory, assignment: str) -> list[str]:
    """Hidden tests whose points in the gradebook (from the source notebook, which nbgrader
    totals in grades.csv) differ from the course registry's (which the verdicts and the
    run's summary use), each as a sentence saying what to make agree."""
    nb = notebook_id(assignment)
    found = []
    with gradebook(coursedir) as gb:
        try:
            cells = {c.name: c.max_score for c in gb.find_notebook(nb, assignment).grade_cells}
        except MissingEntry:
            return []
        for exercise_id in exercises.ASSIGNMENTS.get(assignment, ()):
            ex = exercises.get(exercise_id)
            for kind in test_kinds(exercise_id):
                want = ex.points_correct if kind == "correct" else ex.points_speed
                got = cells.get(test_cell_id(exercise_id, kind))
                if got is not None and got != want:
                    found.append(f"{test_cell_id(exercise_id, kind)} is worth {got:g} points "
                                 f"in the source notebook and {want:g} in the course's "
                                 "registry: grades.csv totals the notebook's, the verdicts "
                                 "and this summary the registry's; make them agree")
    return found


def record(
    coursedir: CourseDirectory,
    assignment: str,
    student: str,
    verdicts: Sequence[Verdict],
    award_without_gpu: bool,
) -> dict[str, dict[str, float]]:
    """Write the verdicts' points over the hidden tests' scores, as their nbgrader manual
    scores and their automatic ones alike (a notebook that patched its own tests leaves no
    score of its making beneath: clearing a manual score in formgrader, or an export of
    the automatic ones, gives the clean grade too), and each report as the comment on the
    kernel cell. Returns the points written."""
    nb = notebook_id(assignment)
    written: dict[str, dict[str, float]] = {}
    with gradebook(coursedir) as gb:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.add_submission(assignment, student)
        for v in verdicts:
            written[v.exercise] = {}
            for kind, points in scoring.points(v, award_without_gpu).as_dict().items():
                if kind not in test_kinds(v.exercise):
                    continue
                grade = gb.find_grade(test_cell_id(v.exercise, kind), nb, assignment, student)
                grade.manual_score = grade.auto_score = min(points, grade.max_score)
                if kind == "speed" and unmeasured(v, award_without_gpu):
                    grade.auto_score = None  # nothing measured: no failed test in formgrader
                grade.extra_credit = None  # nbgrader's steps never set one: nor may they
                grade.needs_manual_grade = False
                written[v.exercise][kind] = grade.manual_score
            comment = gb.find_comment(kernel_cell_id(v.exercise), nb, assignment, student)
            comment.manual_comment = scoring.report(v, award_without_gpu)
        gb.db.commit()
    return written


def unmeasured(v: Verdict, award_without_gpu: bool) -> bool:
    """A correct kernel whose speed nobody measured, and no points given for it: its
    speed test has no automatic score (0 points as its manual one), so formgrader does
    not flag the submission as failing a test the learner could not pass here."""
    return v.correct and not scoring.speed_judged(v) and not scoring.awarded(
        v, award_without_gpu)


def export_csv(coursedir: CourseDirectory, dest: Path) -> Path:
    """``grades.csv``: nbgrader's export of the whole gradebook, quoted and inert in a
    spreadsheet, with where each submission's time came from
    (:mod:`tilelab.classroom.grades_csv`)."""
    with gradebook(coursedir) as gb:
        return grades_csv.export(coursedir, gb, dest)


def report_strangers(summary: dict[str, Any], failures: list[dict], strangers: list[str]) -> None:
    """Name, in the summary, the submitted folders of students the gradebook does not know."""
    if strangers:
        summary["unknown_students"] = strangers
        failures.append({
            "step": "students",
            "error": f"not graded: {', '.join(strangers)} (folders under submitted/ of "
            "students the gradebook does not know; add them with `nbgrader db student add` "
            "or `nbgrader db student import` if they belong to the class)",
        })


def to_grade(
    api: NbGraderAPI, assignments: Sequence[str] | None, students: Sequence[str] | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """The (assignment, student) pairs to grade: every submission of a student the
    gradebook knows (or the ones named); and the folders of anyone else, not graded."""
    names = list(assignments or exercises.ASSIGNMENTS)
    unknown = [a for a in names if a not in exercises.ASSIGNMENTS]
    if unknown:
        known = ", ".join(exercises.ASSIGNMENTS)
        raise ValueError(f"unknown assignment(s) {unknown}; the assignments are {known}")
    enrolled = known_students(api.coursedir)
    work, strangers = [], set()
    for a in names:
        for s in sorted(api.get_submitted_students(a)):
            if students and s not in students:
                continue
            if s in enrolled:
                work.append((a, s))
            else:
                strangers.add(s)
    return work, sorted(strangers)
