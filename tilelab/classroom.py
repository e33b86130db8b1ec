"""Grade a class with nbgrader: autograde, a clean re-grade of every kernel, feedback, CSV.

Points come only from the grader's clean process. A learner's Python runs inside the
notebook kernel during ``nbgrader autograde`` and could patch the grader there, so each
kernel cell is read straight from the submitted notebook's JSON (by its
``kernel_<exercise>`` grade id; nothing is executed: the ``NAME = r\"\"\"...\"\"\"`` value
is parsed with :func:`ast.literal_eval`), graded by :func:`tilelab.grade.grade_source`,
and its points are written over the hidden tests' scores in the gradebook (as nbgrader
manual scores), so the CSV export and the feedback show only those. This clean grade runs
before autograding, so the hidden tests, which call the same grader, get its verdict back
from a cache instead of grading every kernel twice. The verdicts are
also written next to the feedback as ``tilelab_verdict.txt`` and ``.json``.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import CsvExportPlugin
from nbgrader.utils import temp_attrs
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from tilelab import backend as backends
from tilelab import exercises, isolation, sandbox
from tilelab.grade import CACHE_ENV, cache_verdict, grade_source
from tilelab.notebook import AWARD_ENV, CLASS_GRADING_ENV, speed_points
from tilelab.verdict import Verdict

CONFIG_FILE = "nbgrader_config.py"
NOTEBOOK_READ_LIMIT = 64 * 1024**2  # the most of a submitted notebook ever read
VERDICT_FILE = "tilelab_verdict"
CSV_FILE = "grades.csv"
#: Seconds one notebook cell may run during a class run (the hidden tests only read
#: verdicts already measured, so a cell that runs longer is the learner's own code).
CELL_TIMEOUT = int(os.environ.get("TILELAB_CELL_TIMEOUT", "120"))


class KernelCellError(ValueError):
    """A submitted notebook has no gradable kernel cell; the message says why."""


def notebook_id(assignment: str) -> str:
    """The notebook of an assignment: ``01-naive`` holds ``naive.ipynb``."""
    return assignment.split("-", 1)[1]


def kernel_cell_id(exercise_id: str) -> str:
    return f"kernel_{exercise_id}"


def test_cell_id(exercise_id: str, kind: str) -> str:
    """The hidden test's grade id; ``kind`` is ``correct`` or ``speed``."""
    return f"test_{exercise_id}_{kind}"


# ------------------------------------------------------------------ nbgrader plumbing


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


def open_api(course_root: str | Path, cell_timeout: int | None = None,
             sandboxed: bool = False) -> NbGraderAPI:
    """nbgrader's Python API on this course (with a per-cell time limit, if given). The
    course config is read here, once; ``sandboxed``: every notebook's kernel runs in a
    bubblewrap sandbox (see :mod:`tilelab.kernel_sandbox`)."""
    _alembic_on_path()
    config = load_config(course_root)
    if cell_timeout is not None:
        config.Execute.timeout = cell_timeout
        config.ExecutePreprocessor.timeout = cell_timeout
    if sandboxed:
        from tilelab.kernel_sandbox import sandbox_autograde

        sandbox_autograde(config)
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def _gradebook(coursedir: CourseDirectory) -> Gradebook:
    return Gradebook(coursedir.db_url, coursedir.course_id)


def _check(result: dict[str, Any], what: str) -> None:
    if not result.get("success"):
        detail = (result.get("error") or result.get("log") or "").strip()
        raise RuntimeError(f"nbgrader {what} failed:\n{detail[-4000:]}")


def release(
    course_root: str | Path = ".",
    assignments: Iterable[str] | None = None,
    dest: str | Path | None = None,
) -> list[Path]:
    """``nbgrader generate_assignment --force``: release ``solutions/`` into ``exercises/``
    (or into ``dest``); also records the assignments in the gradebook. Returns the notebooks."""
    api = open_api(course_root)
    cd = api.coursedir
    names = list(assignments or exercises.ASSIGNMENTS)
    out = str(Path(dest).resolve()) if dest is not None else cd.release_directory
    with temp_attrs(cd, release_directory=out):
        for a in names:
            _check(api.generate_assignment(a, force=True, create=True), f"generate_assignment {a}")
        return sorted(
            Path(cd.format_path(cd.release_directory, ".", a)).resolve() / f"{notebook_id(a)}.ipynb"
            for a in names
        )


def _ensure_in_gradebook(api: NbGraderAPI, assignment: str) -> None:
    """Autograde needs the source's cells in the gradebook: record them if missing."""
    with _gradebook(api.coursedir) as gb:
        try:
            known = gb.find_assignment(assignment).notebooks
        except MissingEntry:
            known = []
    if not known:
        with tempfile.TemporaryDirectory(prefix="tilelab-release-") as tmp:
            release(api.coursedir.root, [assignment], dest=tmp)


# ------------------------------------------------------------------ reading submissions


def extract_kernel(notebook_path: str | Path, exercise_id: str) -> str:
    """The kernel source in a submitted notebook's ``kernel_<exercise>`` cell, read from the
    JSON without executing anything; :class:`KernelCellError` when it cannot be read."""
    grade_id = kernel_cell_id(exercise_id)
    path = Path(notebook_path)
    try:
        if path.stat().st_size > NOTEBOOK_READ_LIMIT:  # never read a huge file whole
            raise KernelCellError(
                f"{path.name} is {path.stat().st_size >> 20} MiB, more than the "
                f"{NOTEBOOK_READ_LIMIT >> 20} MiB a notebook may be; clear its outputs and "
                "submit it again.")
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError("its cells are not a list")
    except FileNotFoundError:
        others = sorted(p.name for p in path.parent.glob("*.ipynb"))
        raise KernelCellError(
            f"the notebook {path.name} was not submitted"
            + (f" (the folder holds {', '.join(others)}: the wrong assignment?)" if others else "")
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KernelCellError(f"{path.name} is not a readable notebook ({exc})") from None
    found = [c for c in cells if _grade_id(c) == grade_id]
    if len(found) > 1:
        raise KernelCellError(
            f"{path.name} has {len(found)} cells with grade id {grade_id!r} (a copied kernel "
            "cell?); keep one, delete the others, and submit again.")
    cell = found[0] if found else None
    if cell is None:
        ids = {_grade_id(c) for c in cells}
        other = next(
            (e.assignment for e in exercises.EXERCISES.values() if kernel_cell_id(e.id) in ids),
            None,
        )
        if other is not None:
            raise KernelCellError(
                f"{path.name} is the notebook of assignment {other}, not of the assignment it "
                "was submitted as; submit the right notebook."
            )
        raise KernelCellError(
            f"no kernel cell {grade_id!r} in {path.name}: the cell holding the kernel was "
            "deleted or replaced; copy it back from the released notebook."
        )
    return kernel_from_cell(isolation.nb_text(cell.get("source")), grade_id)


def _grade_id(cell: Any) -> str:
    """A cell's nbgrader grade id; "" for a cell whose metadata is missing or malformed (a
    malformed cell costs that cell only)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return gid if isinstance(gid, str) else ""


def kernel_from_cell(source: str, grade_id: str = "the kernel cell") -> str:
    """The string literal assigned in a kernel cell (``KERNEL = r\"\"\"...\"\"\"``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise KernelCellError(
            f"{grade_id} is not valid Python (line {exc.lineno}: {exc.msg}); it must be "
            'NAME = r"""<your CUDA C>"""'
        ) from None
    found: tuple[str, str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if found and found[0] in names:
                found = None  # the literal was rebound: what ran is not what we can read
            if names and node.value is not None:
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                if isinstance(value, str):
                    found = (names[0], value)
    if found is None:
        raise KernelCellError(
            f"{grade_id} does not assign the kernel as a plain string literal "
            '(NAME = r"""<your CUDA C>"""); the grader reads the literal without running '
            "the cell, so build the source in the string itself."
        )
    return found[1]


# ------------------------------------------------------------------ grading


def _unreadable(ex: exercises.Exercise, backend_name: str, gpu: str | None, why: str) -> Verdict:
    v = Verdict(
        exercise=ex.id,
        backend=backend_name,
        gpu=gpu,
        gate=ex.gate,
        baseline=ex.baseline.label,
        max_bank_degree=ex.max_bank_degree,
        max_points_correct=ex.points_correct,
        max_points_speed=ex.points_speed,
    )
    v.messages.append(f"not graded (0 points): {why}")
    return v


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
            source = extract_kernel(notebook_path, exercise_id)
        except KernelCellError as exc:
            verdicts.append(_unreadable(ex, backend_name, gpu, str(exc)))
            continue
        verdict = grade_source(
            exercise_id, source, backend_name=backend_name, gate=(gates or {}).get(exercise_id),
            sandboxed=sandboxed,
        )
        if cache is not None:
            cache_verdict(cache, source, verdict)
        verdicts.append(verdict)
    return verdicts


def scores(verdict: Verdict, award_without_gpu: bool) -> dict[str, float]:
    """The points of each hidden test of one kernel."""
    return {
        "correct": verdict.points_correct if verdict.correct else 0.0,
        "speed": speed_points(verdict, award_without_gpu),
    }


def record(
    coursedir: CourseDirectory,
    assignment: str,
    student: str,
    verdicts: Sequence[Verdict],
    award_without_gpu: bool,
) -> dict[str, dict[str, float]]:
    """Write the verdicts' points over the hidden tests' scores (nbgrader manual scores),
    and each report as the comment on the kernel cell. Returns the points written."""
    nb = notebook_id(assignment)
    written: dict[str, dict[str, float]] = {}
    with _gradebook(coursedir) as gb:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.add_submission(assignment, student)
        for v in verdicts:
            written[v.exercise] = {}
            for kind, points in scores(v, award_without_gpu).items():
                grade = gb.find_grade(test_cell_id(v.exercise, kind), nb, assignment, student)
                grade.manual_score = min(points, grade.max_score)
                grade.needs_manual_grade = False
                written[v.exercise][kind] = grade.manual_score
            comment = gb.find_comment(kernel_cell_id(v.exercise), nb, assignment, student)
            comment.manual_comment = v.report()
        gb.db.commit()
    return written


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
    body = [v.report() for v in verdicts]
    (folder / f"{VERDICT_FILE}.txt").write_text("\n\n".join(["\n".join(head), *body]) + "\n")
    doc = {
        "student": student,
        "assignment": assignment,
        "graded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "award_speed_without_gpu": award_without_gpu,
        "points": points,
        "verdicts": [v.to_dict() for v in verdicts],
    }
    (folder / f"{VERDICT_FILE}.json").write_text(json.dumps(doc, indent=1) + "\n")


@contextlib.contextmanager
def _environ(values: dict[str, str | None]) -> Iterator[None]:
    """Set (or, with None, remove) environment variables for the notebooks nbgrader runs."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Progress:
    """A one-line progress bar on stderr (silent when disabled)."""

    def __init__(self, total: int, enabled: bool = True, width: int = 30) -> None:
        self.total, self.enabled, self.width, self.done = max(total, 1), enabled, width, 0

    def show(self, label: str) -> None:
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {label[:40]:<40}")
        sys.stderr.flush()

    def step(self, label: str) -> None:
        self.done += 1
        self.show(label)

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def grade_class(
    course_root: str | Path = ".",
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    backend: str | None = None,
    award_speed_without_gpu: bool = False,
    progress: bool = True,
    cell_timeout: int = CELL_TIMEOUT,
    gates: dict[str, float] | None = None,
    sandboxed: bool = True,
) -> dict[str, Any]:
    """Autograde, re-grade every kernel cleanly, generate feedback and export the CSV, for
    every submission under ``autograder/submitted/`` (or the ones named) of a student the
    gradebook knows. One bad submission never stops the run, nor changes another's grade:
    its failure is in the summary (see :mod:`tilelab.isolation`). ``gates``: calibrated
    speed gates by exercise (``tilelab calibrate``), instead of the registry's defaults.

    ``sandboxed`` (the default): every kernel is graded, and every notebook run, in a
    bubblewrap sandbox that sees only its own submission (raises
    :class:`~tilelab.sandbox.SandboxUnavailable`, saying what to install, where none can
    be made). False runs learners' code with the instructor's rights."""
    if sandboxed:
        sandbox.require()
    api = open_api(course_root, cell_timeout, sandboxed=sandboxed)
    cd = api.coursedir
    chosen = backend or backends.active()
    gpu = backends.gpu_probe()[1] if chosen == "gpu" else None
    names = list(assignments or exercises.ASSIGNMENTS)
    unknown = [a for a in names if a not in exercises.ASSIGNMENTS]
    if unknown:
        known = ", ".join(exercises.ASSIGNMENTS)
        raise ValueError(f"unknown assignment(s) {unknown}; the assignments are {known}")
    known = _known_students(cd)
    work, strangers = [], set()
    for a in names:
        for s in sorted(api.get_submitted_students(a)):
            if students and s not in students:
                continue
            if s in known:
                work.append((a, s))
            else:
                strangers.add(s)
    summary: dict[str, Any] = {
        "backend": chosen,
        "gpu": gpu,
        "speed_measured": chosen == "gpu",
        "award_speed_without_gpu": award_speed_without_gpu,
        "gates": {e.id: (gates or {}).get(e.id, e.gate) for e in exercises.EXERCISES.values()},
        "sandboxed": sandboxed,
        "submissions": [],
        "failures": [],
    }
    if strangers:
        summary["unknown_students"] = sorted(strangers)
        summary["failures"].append({
            "step": "students",
            "error": f"not graded: {', '.join(sorted(strangers))} (folders under submitted/ of "
            "students the gradebook does not know; add them with `nbgrader db student add` "
            "or `nbgrader db student import` if they belong to the class)",
        })
    if not sandboxed:
        summary["warning"] = NO_SANDBOX_WARNING
    if chosen != "gpu":
        summary["note"] = (
            "no GPU: speed was not measured; padded kernels were graded by their emulated "
            "bank-conflict degree, other speed points were "
            + ("awarded anyway (as asked)" if award_speed_without_gpu else "not awarded")
        )
    bar = Progress(len(work), progress)
    env = {
        backends.ENV_VAR: chosen,
        AWARD_ENV: "1" if award_speed_without_gpu else None,
        CLASS_GRADING_ENV: "1",
    }
    run = _Run(
        api, chosen, gpu, award_speed_without_gpu, summary["failures"], cell_timeout, gates or {},
        sandboxed,
    )
    with _environ(env):
        for a in sorted({a for a, _ in work}):
            try:
                _ensure_in_gradebook(api, a)
            except Exception as exc:
                summary["failures"].append({"assignment": a, "step": "release", "error": str(exc)})
        for a, s in work:
            bar.show(f"{a} {s}")
            try:
                summary["submissions"].append(run.grade_one(a, s))
            except Exception as exc:  # the grader's own failure: record it, go on
                run.failed(a, s, "internal", f"{type(exc).__name__}: {exc}")
            bar.step(f"{a} {s}")
    bar.close()
    csv = Path(cd.root) / "autograder" / CSV_FILE
    try:
        export_csv(cd, csv)
        summary["csv"] = str(csv)
    except Exception as exc:
        summary["failures"].append({"step": "export", "error": str(exc)})
    return summary


class _Run:
    """One class run: what grading each submission needs, and where failures go."""

    def __init__(
        self,
        api: NbGraderAPI,
        backend: str,
        gpu: str | None,
        award: bool,
        failures: list[dict[str, Any]],
        cell_timeout: int,
        gates: dict[str, float],
        sandboxed: bool = True,
    ) -> None:
        self.api, self.backend, self.gpu, self.award = api, backend, gpu, award
        self.failures, self.cell_timeout, self.gates = failures, cell_timeout, gates
        self.sandboxed = sandboxed
        cd = api.coursedir
        self.secret = isolation.solution_lines(
            sorted(Path(cd.root, cd.source_directory).glob("*/*.ipynb"))
        )
        # Submissions are never copied back nor deleted: a sandboxed notebook sees only a
        # read-only copy of its own submission, so nothing of the course can change under it.

    def failed(self, assignment: str, student: str, step: str, error: str) -> None:
        self.failures.append(
            {"assignment": assignment, "student": student, "step": step, "error": error[-2000:]}
        )

    def grade_one(self, assignment: str, student: str) -> dict[str, Any]:
        """Clean grade, autograde, record, feedback and verdict files for one submission."""
        cd = self.api.coursedir
        notes: list[str] = []

        def problem(step: str, text: str) -> None:
            self.failed(assignment, student, step, text)
            notes.append(text)

        submitted = Path(cd.format_path(cd.submitted_directory, student, assignment))
        nb_name = f"{notebook_id(assignment)}.ipynb"
        own = _read_capped(submitted / nb_name)  # before any of its code runs
        with tempfile.TemporaryDirectory(prefix="tilelab-verdicts-") as cache:
            try:
                verdicts = grade_notebook(
                    submitted / f"{notebook_id(assignment)}.ipynb",
                    assignment,
                    self.backend,
                    self.gpu,
                    cache=Path(cache),
                    gates=self.gates,
                    sandboxed=self.sandboxed,
                )
            except Exception as exc:  # never trust the notebook's own scores: zero, say why
                self.failed(assignment, student, "grade", f"{type(exc).__name__}: {exc}")
                verdicts = [
                    _unreadable(exercises.get(e), self.backend, self.gpu,
                                f"internal grader error: {exc}")
                    for e in exercises.ASSIGNMENTS[assignment]
                ]
            # nbgrader runs the notebook; its hidden tests get the verdicts above back from
            # the cache (no second grading); their scores are then replaced by those points
            db = Path(cd.db_url.removeprefix("sqlite:///"))
            with (
                isolation.GradebookGuard(db, student, Path(cache)) as guard,
                _environ({CACHE_ENV: cache}),
            ):
                with isolation.Reaper() as reaper:
                    result = self.api.autograde(assignment, student, force=True, create=True)
                tampered = guard.verify()
        if reaper.killed:
            problem("processes", f"the notebook left {len(reaper.killed)} process(es) "
                    "running after its cells ended; they were killed")
        if tampered:
            problem("gradebook", tampered)
        elif not result.get("success"):
            self.failed(assignment, student, "autograde",
                        result.get("error") or result.get("log") or "")
            notes.append(_autograde_problem(result))
        autograded = Path(cd.format_path(cd.autograded_directory, student, assignment))
        leaks = isolation.scrub_outputs(autograded / nb_name, self.secret, own)
        if stopped := isolation.interrupted_cells(autograded / nb_name):
            problem("timeout", f"{stopped} cell(s) of the notebook ran longer than the "
                    f"{self.cell_timeout} s a class run allows a cell and was interrupted")
        if leaks:
            problem("solutions", f"{leaks} output(s) of the notebook showed the course's "
                    "reference solution (read from the grading machine's disk); removed from "
                    "the feedback")
        for v in verdicts:
            v.messages.extend(f"grading note: {n}" for n in notes)
        points: dict[str, dict[str, float]] = {}
        try:
            points = record(cd, assignment, student, verdicts, self.award)
        except Exception as exc:
            self.failed(assignment, student, "gradebook", f"{type(exc).__name__}: {exc}")
        result = self.api.generate_feedback(assignment, student, force=True)
        if not result.get("success"):
            self.failed(assignment, student, "generate_feedback",
                        result.get("error") or result.get("log") or "")
        feedback = Path(cd.format_path(cd.feedback_directory, student, assignment))
        write_verdicts(feedback, student, assignment, verdicts, points, self.award)
        return {
            "assignment": assignment,
            "student": student,
            "points": points,
            "score": sum(sum(p.values()) for p in points.values()),
            "max_score": sum(v.max_points_correct + v.max_points_speed for v in verdicts),
            "messages": {v.exercise: v.messages[:1] for v in verdicts if not v.correct},
            "notes": notes,
        }


NO_SANDBOX_WARNING = (
    "GRADED WITHOUT A SANDBOX (--no-sandbox): every submitted notebook and kernel ran with "
    "the instructor's rights and could read the solutions and the gradebook, change other "
    "students' files and forge its own scores. Use only for submissions you trust."
)


def _read_capped(path: Path) -> str:
    """The first ``NOTEBOOK_READ_LIMIT`` bytes of a file, as text ("" if unreadable)."""
    try:
        with open(path, "rb") as f:
            return f.read(NOTEBOOK_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


def _known_students(coursedir: CourseDirectory) -> set[str]:
    """The students of the gradebook (a folder of anyone else is not graded)."""
    try:
        with _gradebook(coursedir) as gb:
            return {s.id for s in gb.students}
    except Exception:  # no gradebook yet: nobody is known
        return set()


def _autograde_problem(result: dict[str, Any]) -> str:
    """A learner's sentence for an nbgrader autograde that failed."""
    log = (result.get("error") or "") + (result.get("log") or "")
    if "CellTimeoutError" in log or "timed out" in log.lower():
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


def export_csv(coursedir: CourseDirectory, dest: Path) -> Path:
    """``nbgrader export``: the whole gradebook as CSV."""
    plugin = CsvExportPlugin()
    plugin.to = str(dest)
    with _gradebook(coursedir) as gb:
        plugin.export(gb)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tilelab.classroom release``: regenerate ``exercises/`` from ``solutions/``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m tilelab.classroom", description=main.__doc__)
    p.add_argument("command", choices=["release"])
    p.add_argument("--course", default=".", help="the course repository (default: here)")
    p.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    a = p.parse_args(argv)
    for path in release(a.course, a.assignment):
        print(f"released {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
