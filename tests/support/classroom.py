"""The sample class the class-run tests grade, and the helpers that build a course of it.

A temporary course (the committed nbgrader config, solutions and exercises) gets a class
of sample submissions built from the released notebooks by substituting kernel cells with
``tests/fixtures/submissions/*.cu`` (:func:`build_course`); :data:`EMU` and :data:`GPU`
are the points each student's kernels earn on each backend. ``tests/test_classroom.py``
grades it; the Dask, PostgreSQL, corpus and scratch tests, and the fixtures that run as
programs, build their own from the same helpers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nbgrader.api import Gradebook

from tilelab import classroom
from tilelab.catalog import exercises
from tilelab.classroom import course
from tilelab.isolation import bubblewrap

# The pipeline is tested in a sandbox where one can be made (make sandbox), else without
# (nothing here is hostile: tests/test_corpus.py, which is, needs the sandbox).
SANDBOXED = bubblewrap.problem() is None

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "submissions"
SOLUTION = "solution"  # the kernel of the solutions/ notebook

# student -> exercise -> fixture (a .cu file's stem, or the solution); exercises of an
# assignment the student submits but leaves out keep the released stub.
CLASS: dict[str, dict[str, str]] = {
    "alice": {e: SOLUTION for e in exercises.EXERCISES},  # correct
    "bob": {"naive": "naive-wrong_result"},
    "carol": {"tiled": "tiled-missing_barrier"},
    "dave": {"tiled": "tiled-no_boundary_guard"},
    "erin": {
        "transpose_shared": SOLUTION,
        "transpose_padded": "transpose_padded-out_of_bounds_write",
        "matmul_at_padded": SOLUTION,
    },
    "frank": {"naive": "naive-compile_error"},
    "grace": {  # correct but slow: uncoalesced, untiled, unpadded
        "naive": "naive-uncoalesced",
        "tiled": "tiled-untiled",
        "transpose_shared": SOLUTION,
        "transpose_padded": "transpose_padded-unpadded",
        "matmul_at_padded": "matmul_at_padded-unpadded",
    },
}
# Python in the kernel cell: not a literal (henry); a learner patching the grader (mallory)
CELLS = {
    "henry": ("naive", 'KERNEL = open("naive.cu").read()\n'),
    "mallory": (
        "naive",
        'KERNEL = r"""__global__ void matmul_naive(const float* A, const float* B, float* C,'
        ' int M, int N, int K) { }"""\n'
        "import tilelab.notebook\n"
        "from tilelab.grading.verdict import Verdict\n"
        "tilelab.notebook.grade_source = lambda e, s, **k: Verdict(e, 'emu', correct=True,"
        " speed_passed=True, points_correct=3, points_speed=2)\n",
    ),
}

# (correctness, speed) points per student and exercise, on the emulator without a GPU
EMU = {
    "alice": {  # the emulator's analysis is feedback, not points: no speed points without a GPU
        e.id: (e.points_correct, 0) for e in exercises.EXERCISES.values()
    },
    "bob": {"naive": (0, 0)},
    "carol": {"tiled": (0, 0)},
    "dave": {"tiled": (0, 0)},
    "erin": {"transpose_shared": (3, 0), "transpose_padded": (0, 0), "matmul_at_padded": (3, 0)},
    "frank": {"naive": (0, 0)},
    "grace": {
        "naive": (3, 0),
        "tiled": (3, 0),
        "transpose_shared": (3, 0),
        "transpose_padded": (3, 0),
        "matmul_at_padded": (3, 0),
    },
    "henry": {"naive": (0, 0)},
    "mallory": {"naive": (0, 0)},
}
# on a GPU the speed gates apply: slow kernels keep correctness, lose speed
GPU = {
    **EMU,
    "alice": {e.id: (e.points_correct, e.points_speed) for e in exercises.EXERCISES.values()},
    "erin": {"transpose_shared": (3, 2), "transpose_padded": (0, 0), "matmul_at_padded": (3, 2)},
    "grace": {**EMU["grace"], "transpose_shared": (3, 2)},
}
MESSAGES = {
    ("bob", "naive"): "elements wrong",
    ("carol", "tiled"): "wrong",
    ("dave", "tiled"): "Out-of-bounds read",
    ("erin", "transpose_padded"): "Out-of-bounds write",
    ("frank", "naive"): "does not compile",
    ("grace", "transpose_padded"): "bank",
    ("henry", "naive"): "plain string literal",
    ("mallory", "naive"): "never written",
}


def kernel_cell(source: str, kernel: str) -> str:
    """The kernel cell with ``kernel`` as its string (same variable name)."""
    var = source.split("=", 1)[0].strip()
    assert '"""' not in kernel
    return f'{var} = r"""\n{kernel}"""\n'


def solution_kernel(exercise_id: str) -> str:
    ex = exercises.get(exercise_id)
    path = REPO / "solutions" / ex.assignment / f"{classroom.notebook_id(ex.assignment)}.ipynb"
    return classroom.extract_kernel(path, exercise_id)


def submission(assignment: str, cells: dict[str, str]) -> dict:
    """The released notebook with these kernel cells' sources replaced (by exercise id)."""
    path = REPO / "exercises" / assignment / f"{classroom.notebook_id(assignment)}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
        exercise_id = grade_id.removeprefix("kernel_")
        if grade_id.startswith("kernel_") and exercise_id in cells:
            cell["source"] = cells[exercise_id]
    return nb


def copy_course(root: Path) -> None:
    """The course's nbgrader config, solutions and exercises, under ``root``."""
    (root / "autograder").mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    for folder in ("solutions", "exercises"):
        shutil.copytree(REPO / folder, root / folder)


def released_stub(exercise_id: str) -> str:
    """The kernel cell of the released notebook, as learners get it."""
    ex = exercises.get(exercise_id)
    return next(
        "".join(c["source"])
        for c in submission(ex.assignment, {})["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{exercise_id}"
    )


def write_submissions(root: Path, files: dict[tuple[str, str], bytes]) -> None:
    """Each (student, assignment)'s notebook file under autograder/submitted/; each
    student is added to the gradebook (a class run grades only the students it knows)."""
    for (student, assignment), data in files.items():
        folder = root / "autograder" / "submitted" / student / assignment
        folder.mkdir(parents=True)
        (folder / f"{classroom.notebook_id(assignment)}.ipynb").write_bytes(data)
    enrol(root, sorted({student for student, _ in files}))


def enrol(root: Path, students: list[str]) -> None:
    """Add ``students`` to the course's gradebook (nbgrader db student add)."""
    course.gradebook_head_in_process()
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    with Gradebook(db, "tilelab") as gb:
        for s in students:
            gb.update_or_create_student(s)


def build_course(root: Path) -> None:
    """A copy of the course with the class's submissions under autograder/submitted/."""
    copy_course(root)
    plan: dict[tuple[str, str], dict[str, str]] = {}
    for student, kernels in CLASS.items():
        for exercise_id, fixture in kernels.items():
            ex = exercises.get(exercise_id)
            src = (
                solution_kernel(exercise_id)
                if fixture == SOLUTION
                else (FIXTURES / f"{fixture}.cu").read_text(encoding="utf-8")
            )
            cell = kernel_cell(released_stub(exercise_id), src)
            plan.setdefault((student, ex.assignment), {})[exercise_id] = cell
    for student, (exercise_id, cell) in CELLS.items():
        plan[(student, exercises.get(exercise_id).assignment)] = {exercise_id: cell}
    write_submissions(
        root, {key: json.dumps(submission(key[1], cells)).encode() for key, cells in plan.items()}
    )


def points_in_gradebook(root: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> exercise -> (correctness, speed) scores of the hidden tests."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    with Gradebook(db, "tilelab") as gb:
        for student, assignment in ((s, a) for s in set(EMU) for a in exercises.ASSIGNMENTS):
            try:
                sub = gb.find_submission(assignment, student)
            except Exception:
                continue
            grades = {g.name: g.score for nb in sub.notebooks for g in nb.grades}
            for e in exercises.ASSIGNMENTS[assignment]:
                out.setdefault(student, {})[e] = (
                    grades[f"test_{e}_correct"],
                    grades.get(f"test_{e}_speed", 0.0),  # none for a correctness-only step
                )
    return out


def expected_points(table: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """Every exercise of every submitted assignment (stubs score 0)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for student, per in table.items():
        for a in {exercises.get(e).assignment for e in per}:
            for e in exercises.ASSIGNMENTS[a]:
                out.setdefault(student, {})[e] = per.get(e, (0, 0))
    return out


def slow_notebook(cells: int = 6, seconds: float = 2.5) -> bytes:
    """The released 01-naive notebook with the reference kernel, then ``cells`` cells that
    each sleep ``seconds``: every cell under the cell limit, the whole notebook not."""
    nb = submission("01-naive", {"naive": kernel_cell(released_stub("naive"),
                                                      solution_kernel("naive"))})
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "execution_count": None,
                     "outputs": [], "source": f"import time\ntime.sleep({seconds})\n"}] * cells
    return json.dumps(nb).encode()


def small_class(root: Path, students: list[str], assignment: str = "01-naive") -> None:
    """``build_course`` keeping only some students' submissions of one assignment."""
    build_course(root)
    submitted = root / "autograder" / "submitted"
    for folder in submitted.glob("*/*"):
        if folder.parent.name not in students or folder.name != assignment:
            shutil.rmtree(folder)
    for folder in submitted.iterdir():
        if not any(folder.iterdir()):
            folder.rmdir()
