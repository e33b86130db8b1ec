"""A corpus of bad, broken and hostile submissions graded in one class run.

Every case must end in a verdict whose feedback names its problem, while the good
students graded before and after them keep their exact points, the grader never crashes
and the gradebook loses no row. The run prints the figures (cases tried, caught with a
clear message, grader crashes, other students affected, gradebook rows lost). The GPU
cases at the end grade hostile kernels on a GPU, then a good one on the same GPU.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, SubmittedAssignment
from test_classroom import (
    copy_course,
    kernel_cell,
    released_stub,
    solution_kernel,
    submission,
    write_submissions,
)

from tilelab import classroom, exercises
from tilelab.grading import scoring
from tilelab.grading.sandbox import grade_source
from tilelab.reference import KERNELS, tiled_without_barrier

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]

NAIVE = KERNELS["naive"].source()
TILED = solution_kernel("tiled")
STUB = (
    "__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N,"
    " int K) { }"
)
MARKER = "tilelab-corpus-leftover"  # in the command line of a process a notebook leaves


def naive_with(old: str, new: str) -> str:
    assert old in NAIVE, old
    return NAIVE.replace(old, new)


# ------------------------------------------------------------------ the corpus


@dataclass(frozen=True)
class Case:
    """One bad submission: its kernel (or whole notebook), what it earns, what it is told."""

    student: str
    what: str
    message: str  # a regular expression its verdicts' messages must match
    kernel: str | None = None  # the kernel cell's CUDA C (exercise naive unless `exercise`)
    python: str = ""  # extra Python after the kernel literal, in the kernel cell
    exercise: str = "naive"
    raw: bytes | None = None  # the whole notebook file, instead of a released notebook
    edit: str = ""  # a change to the notebook's cells (see `notebook_for`)
    points: tuple[float, float] = (0, 0)  # (correctness, speed) of `exercise`


LEAK = (
    "import pathlib\n"
    "root = next(p for p in pathlib.Path.cwd().parents if (p / 'solutions').is_dir())\n"
    "print(open(root / 'solutions/01-naive/naive.ipynb').read())\n"
)
TAMPER = (
    "import pathlib, sqlite3\n"
    "root = next(p for p in pathlib.Path.cwd().parents if (p / 'gradebook.db').exists())\n"
    "con = sqlite3.connect(root / 'gradebook.db')\n"
    "con.execute('UPDATE grade SET manual_score = 0, auto_score = 0')\n"
    "con.execute('DELETE FROM comment')\n"
    "con.commit()\n"
)
OVERWRITE = (  # replaces a later student's submission and an earlier one's feedback
    "import pathlib, shutil\n"
    "a = next(p for p in pathlib.Path.cwd().parents if p.name == 'autograder')\n"
    "(a / 'submitted/zoe/01-naive/naive.ipynb').write_text('{}')\n"
    "shutil.rmtree(a / 'feedback/aaron/01-naive', ignore_errors=True)\n"
)
LEFTOVER = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
    f"'{MARKER}'], start_new_session=True)\n"
)

CASES = [
    # kernels
    Case("k01", "compile error", "does not compile", kernel=naive_with("acc +=", "acc +== ")),
    Case("k02", "wrong kernel name", "no kernel named 'matmul_naive'",
         kernel=naive_with("matmul_naive(", "matmul(")),
    Case("k03", "wrong signature", "wrong signature",
         kernel=naive_with("int M, int N, int K", "int M, int N, float K")),
    Case("k04", "endless loop", "did not finish within|longer than",
         kernel=naive_with("float acc = 0.0f;", "float acc = 0.0f; while (true) { }")),
    Case("k05", "out-of-bounds write into a neighbouring buffer", "[Oo]ut-of-bounds write",
         kernel=naive_with("C[row * N + col] = acc;", "C[row * N + col + M * N] = acc;")),
    Case("k06", "reads uninitialised shared memory", "wrong|NaN|never written",
         kernel=TILED.replace("As[ty][tx] = ", "float unused = "), exercise="tiled"),
    Case("k07", "missing barrier", "wrong|race", kernel=tiled_without_barrier(2),
         exercise="tiled"),
    Case("k08", "barrier inside a branch", "barrier|__syncthreads",
         kernel=TILED.replace("__syncthreads();  // the whole",
                              "if (tx < 16) __syncthreads();  // the whole"),
         exercise="tiled"),
    Case("k09", "more shared memory than a block can have", "shared memory",
         kernel=TILED.replace("__shared__ float Bs[TILE][TILE];",
                              "__shared__ float Bs[TILE][TILE];\n    __shared__ float big[65536];"
                              "\n    big[threadIdx.x] = 0.0f;\n    __syncthreads();")
         .replace("C[row * N + col] = acc;", "C[row * N + col] = acc + big[threadIdx.x];"),
         exercise="tiled"),
    Case("k10", "printf flood (still correct: graded normally)", "correct on",
         kernel=naive_with("C[row * N + col] = acc;",
                           'C[row * N + col] = acc;\n        printf("flood %d %d\\n", row, col);'),
         points=(3, 0)),
    Case("k11", "writes only part of C, relying on zeros", "never written",
         kernel=naive_with("C[row * N + col] = acc;", "if (row % 2 == 0) C[row * N + col] = acc;")),
    # Python in the notebook
    Case("p01", "monkeypatches the grader", "never written",
         kernel=STUB, python="import tilelab.notebook\n"
         "from tilelab.grading.verdict import Verdict\n"
         "tilelab.notebook.grade_source = lambda e, s, **k: Verdict(e, 'emu', "
         "correct=True, speed_passed=True, points_correct=3, points_speed=2)\n"),
    Case("p02", "monkeypatches NumPy", "never written", kernel=STUB,
         python="import numpy as np\nnp.allclose = lambda *a, **k: True\n"
         "np.testing.assert_allclose = lambda *a, **k: None\n"),
    Case("p03", "replaces the result with NumPy's product", "never written", kernel=STUB,
         python="import tilelab.grading.pipeline as p\n_real = p.check_function\n"
         "def fake(rt, fn, problem, launch, shape, rng):\n"
         "    import numpy as np\n    return _real(rt, fn, problem, launch, shape, rng)\n"
         "p.check_function = fake\n"),
    Case("p04", "an object whose __eq__ is always true", "never written", kernel=STUB,
         python="class Yes:\n    def __eq__(self, o): return True\n"
         "    def __bool__(self): return True\n    def __getattr__(self, n): return Yes()\n"
         "import tilelab.notebook\ntilelab.notebook.grade_source = lambda *a, **k: Yes()\n"),
    Case("p05", "sys.exit() (correct kernel)", "correct on", kernel=NAIVE,
         python="import sys\nsys.exit(0)\n", points=(3, 0)),
    Case("p06", "os._exit() (correct kernel)", "could not run the notebook", kernel=NAIVE,
         python="import os\nos._exit(0)\n", points=(3, 0)),
    Case("p07", "time.sleep(10**6) (correct kernel)", "was interrupted",
         kernel=NAIVE, python="import time\ntime.sleep(10**6)\n", points=(3, 0)),
    Case("p08", "ignores SIGINT, then sleeps", "could not run the notebook", kernel=NAIVE,
         python="import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "time.sleep(10**6)\n", points=(3, 0)),
    Case("p09", "leaves a process running", "left 1 process", kernel=NAIVE, python=LEFTOVER,
         points=(3, 0)),
    Case("p10", "reads the solutions from disk", "reference solution", kernel=STUB,
         python=LEAK),
    Case("p11", "writes into the gradebook", "changed the gradebook", kernel=NAIVE,
         python=TAMPER, points=(3, 0)),
    Case("p12", "overwrites another's submission and feedback", "correct on", kernel=NAIVE,
         python=OVERWRITE, points=(3, 0)),
    Case("p13", "deletes its test cells and edits their metadata", "correct on", kernel=NAIVE,
         edit="drop_tests", points=(3, 0)),
    Case("p14", "renames its kernel cell", "no kernel cell", kernel=NAIVE, edit="rename_cell"),
    Case("p15", "not valid JSON", "not a readable notebook", raw=b'{"cells": [ not json'),
    Case("p16", "an empty file", "not a readable notebook", raw=b""),
    Case("p17", "the wrong assignment's notebook", "notebook of assignment 02-tiled",
         edit="wrong_assignment"),
    # source tricks
    Case("s01", "#include of /etc/passwd", "is not allowed",
         kernel='#include "/etc/passwd"\n' + NAIVE),
    Case("s02", "a 10 MB source", "more than", kernel=NAIVE + "// " + "x" * (10 << 20) + "\n"),
    Case("s03", "bytes that are not UTF-8", "not a readable notebook", edit="latin1"),
]
GOOD = ("aaron", "zoe")  # graded first and last: nothing a case does may change their points


def notebook_for(case: Case) -> bytes:
    """The submitted file of one case."""
    if case.raw is not None:
        return case.raw
    if case.edit == "wrong_assignment":
        ex = exercises.get("tiled")
        return json.dumps(submission(ex.assignment, {})).encode()
    ex = exercises.get(case.exercise)
    cell = kernel_cell(released_stub(ex.id), case.kernel or "") + case.python
    nb = submission(ex.assignment, {ex.id: cell})
    if case.edit == "drop_tests":
        nb["cells"] = [
            c for c in nb["cells"]
            if not c["metadata"].get("nbgrader", {}).get("grade_id", "").startswith("test_")
        ]
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{ex.id}":
                c["metadata"]["nbgrader"]["points"] = 100
    if case.edit == "rename_cell":
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{ex.id}":
                c["metadata"]["nbgrader"]["grade_id"] = "my_kernel"
    data = json.dumps(nb).encode()
    if case.edit == "latin1":
        data = data.replace(b"row-major", b"row-major \xe9\xff")
    return data


def build(root: Path) -> None:
    copy_course(root)
    files: dict[tuple[str, str], bytes] = {}
    for student in GOOD:
        files[(student, "01-naive")] = json.dumps(
            submission("01-naive", {"naive": kernel_cell(released_stub("naive"), NAIVE)})
        ).encode()
    for case in CASES:
        files[(case.student, exercises.get(case.exercise).assignment)] = notebook_for(case)
    write_submissions(root, files)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus") / "course"
    build(root)
    mp = pytest.MonkeyPatch()
    mp.setenv("TILELAB_GRADE_TIMEOUT", "60")  # an endless kernel is stopped within a minute
    mp.setenv("TILELAB_EMU_TIMEOUT", "20")
    try:
        summary = classroom.grade_class(
            root, backend="emu", progress=False, cell_timeout=15, gates={"naive": 3.5}
        )
    finally:
        mp.undo()
    return root, summary


def verdicts(root: Path, student: str, assignment: str) -> dict[str, dict]:
    path = root / "autograder" / "feedback" / student / assignment / "tilelab_verdict.json"
    return {v["exercise"]: v for v in json.loads(path.read_text())["verdicts"]}


def gradebook_points(root: Path) -> dict[tuple[str, str], tuple[float, float]]:
    out = {}
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "tilelab") as gb:
        for sub in gb.db.query(SubmittedAssignment).all():
            grades = {g.name: g.score for nb in sub.notebooks for g in nb.grades}
            for e in exercises.ASSIGNMENTS[sub.assignment.name]:
                out[(sub.student.id, e)] = (grades[f"test_{e}_correct"], grades[f"test_{e}_speed"])
    return out


def test_every_case_is_caught_and_nobody_else_is_affected(corpus, capsys):
    root, summary = corpus
    points = gradebook_points(root)
    caught, problems = 0, []
    for case in CASES:
        v = verdicts(root, case.student, exercises.get(case.exercise).assignment)[case.exercise]
        text = "\n".join(v["messages"])
        got = points.get((case.student, case.exercise))
        if re.search(case.message, text) and got == case.points:
            caught += 1
        else:
            problems.append((case.student, case.what, got, text[:600]))
    crashes = [f for f in summary["failures"] if f["step"] in ("internal", "grade", "export")]
    affected = [s for s in GOOD if points.get((s, "naive")) != (3, 0)]
    expected_rows = len(GOOD) + len(CASES)
    rows = len({s for s, _ in points})
    with capsys.disabled():
        print(
            f"\ncorpus: {len(CASES)} cases tried, {caught} caught with a clear message, "
            f"{len(crashes)} grader crashes, {len(affected)} other students affected, "
            f"{expected_rows - rows} gradebook rows lost"
        )
    assert not problems, "\n\n".join(map(str, problems))
    assert crashes == [] and affected == [] and rows == expected_rows


def test_calibrated_gates_reach_every_verdict(corpus):
    root, summary = corpus
    assert summary["gates"]["naive"] == 3.5 and summary["gates"]["tiled"] == 1.25
    assert verdicts(root, "aaron", "01-naive")["naive"]["gate"] == 3.5


def test_feedback_never_shows_a_solution_or_a_system_file(corpus):
    root, _ = corpus
    solution_line = "acc += A[row * K + k] * B[k * N + col];"
    for student in ("p10", "s01"):
        for path in (root / "autograder" / "feedback" / student).rglob("*"):
            if path.is_file():
                text = path.read_text(errors="replace")
                assert "root:x:0:0" not in text
                if student == "p10":
                    assert solution_line not in text, path


def test_no_process_a_notebook_started_is_left(corpus):
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path("/proc", pid, "cmdline").read_bytes()
        except OSError:
            continue
        if MARKER.encode() in cmd:
            left.append(pid)
    assert left == []


def test_the_gradebook_and_the_other_students_files_were_restored(corpus):
    root, summary = corpus
    steps = {(f["student"], f["step"]) for f in summary["failures"] if "student" in f}
    assert ("p11", "gradebook") in steps
    assert ("zoe", "submission") in steps and ("aaron", "feedback") in steps
    assert (root / "autograder" / "feedback" / "aaron" / "01-naive" / "naive.html").is_file()


# ------------------------------------------------------------------ on a GPU

KERNELS_OF = {case.student: case.kernel for case in CASES}
GPU_CASES = {
    "endless loop": ("naive", KERNELS_OF["k04"], "longer than"),
    "out-of-bounds write": ("naive", KERNELS_OF["k05"], "elements wrong|memcheck|out of bounds"),
    "shared-memory over-ask": ("tiled", KERNELS_OF["k09"], "does not compile|shared"),
    "printf flood": ("naive", KERNELS_OF["k10"], "correct on|longer than"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_hostile_kernels_on_a_gpu_leave_it_usable(name, monkeypatch):
    exercise_id, source, message = GPU_CASES[name]
    monkeypatch.setenv("TILELAB_GRADE_TIMEOUT", "90")
    v = grade_source(exercise_id, source, backend_name="gpu", speed=False)
    print(f"{name}: {scoring.report(v)}")
    assert re.search(message, "\n".join(v.messages)), scoring.report(v)
    if name != "printf flood":
        assert not v.correct and v.points_correct == 0
    after = grade_source("naive", NAIVE, backend_name="gpu", speed=False)
    assert after.correct, scoring.report(after)  # the next student's grading is unaffected
