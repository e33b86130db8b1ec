"""No learner is taken for a cheat by a heuristic.

An output counts as showing the reference solution only when it holds a run of consecutive
solution lines the learner's own notebook does not hold; a line such as the usual guard,
which every learner writes and the grader's hints quote, never counts, and the feedback is
never cut. The notebook's sandbox does not see the solutions at all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tilelab.catalog import exercises
from tilelab.classroom import course, submissions
from tilelab.classroom.jupyter_sandbox import REFERENCE_KERNELS
from tilelab.isolation import bubblewrap as sandbox

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted((REPO / "solutions").glob("*/*.ipynb"))
BLOCKS = submissions.solution_blocks(SOURCES)
SECRET = submissions.secret_windows(BLOCKS)  # what the sandbox of nbgrader's steps is given


def solution_kernel(exercise_id: str) -> str:
    ex = exercises.get(exercise_id)
    nb = REPO / "solutions" / ex.assignment / f"{course.notebook_id(ex.assignment)}.ipynb"
    return submissions.extract_kernel(nb, exercise_id)


def executed(path: Path, kernel: str, outputs: list[str]) -> Path:
    """A notebook whose kernel cell holds ``kernel`` and whose outputs are ``outputs``."""
    cell = nbformat.v4.new_code_cell(f'KERNEL = r"""{kernel}"""\ncheck(KERNEL)')
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in outputs]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    return path


def own(kernel: str) -> str:
    return nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(f'KERNEL = r"""{kernel}"""')]))


SPINE = ("naive", "tiled", "transpose_shared", "transpose_padded", "matmul_at_padded",
         "regblock")


def long_enough(kernel: str) -> bool:
    """Whether a solution has a run of lines no learner's few-line kernel shares by chance."""
    lines = [x for x in (" ".join(ln.split("//")[0].split()) for ln in kernel.splitlines()) if x]
    return len(lines) >= submissions.SOLUTION_RUN + 4


def test_every_spine_exercise_has_a_solution_block_long_enough_to_be_told():
    assert len(BLOCKS) >= len(SPINE)
    assert all(long_enough(solution_kernel(e)) for e in SPINE)


def test_a_guard_line_and_the_graders_hint_are_never_evidence(tmp_path):
    hint = ("shape (1, 1, 1): the launch failed: OutOfBoundsAccess: Out-of-bounds read in "
            "kernel 'matmul_naive' at kernel.cu line 8. Check the bounds test that should "
            "guard this access (e.g. `if (row < M && col < N)`) and the index arithmetic.\n"
            "    if (row < M && col < N)\n        C[row * N + col] = acc;\n")
    buggy = solution_kernel("naive").replace("row < M && col < N", "row <= M && col <= N")
    path = executed(tmp_path / "n.ipynb", buggy, [hint])
    before = path.read_bytes()
    assert submissions.solution_shown(path, SECRET, own(buggy)) == 0
    assert path.read_bytes() == before


@pytest.mark.parametrize("exercise_id", sorted(exercises.EXERCISES))
def test_a_whole_solution_printed_but_not_submitted_is_counted_and_kept(tmp_path, exercise_id):
    solution = solution_kernel(exercise_id)
    stub = solution[: solution.index("{") + 1] + "\n    // YOUR CODE HERE\n}\n"
    path = executed(tmp_path / "n.ipynb", stub, ["header\n" + solution])
    before = path.read_bytes()
    # a solution of a few lines cannot be told from what a learner writes: never counted
    assert submissions.solution_shown(path, SECRET, own(stub)) == (
        1 if long_enough(solution) else 0)
    assert exercise_id not in SPINE or long_enough(solution)
    assert path.read_bytes() == before  # the feedback is never cut
    # the learner who wrote that kernel may print it
    assert submissions.solution_shown(path, SECRET, own(solution)) == 0


def test_a_few_solution_lines_in_an_output_are_not_evidence(tmp_path):
    block = next(b for b in BLOCKS if any("As[ty][k] * Bs[k][tx]" in x for x in b))
    few = "\n".join(block[: submissions.SOLUTION_RUN - 1])
    path = executed(tmp_path / "n.ipynb", "", [few])
    assert submissions.solution_shown(path, SECRET, own("")) == 0


@pytest.mark.slow
@pytest.mark.skipif(sandbox.problem() is not None, reason="bubblewrap cannot run here")
def test_the_notebook_sandbox_sees_no_solution_and_no_reference_kernel(tmp_path):
    """What a submitted notebook's kernel sees (the class run's binds): no source notebook
    of this course and no reference kernel file, anywhere it can read."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\n"
        "hits = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root in ('/proc', '/sys', '/dev'):\n"
        "        dirs[:] = []\n"
        "    for f in files:\n"
        "        p = os.path.join(root, f)\n"
        "        if f in KERNELS:\n"
        "            hits.append(p)\n"
        "        elif f.endswith('.ipynb') and os.path.getsize(p) < 1 << 22:\n"
        "            with open(p, errors='replace') as fh:\n"
        "                if MARK in fh.read():\n"
        "                    hits.append(p)\n"
        "print(hits)\n".replace("KERNELS", repr(sorted(p.name for p in
                                                        (REPO / "tilelab/kernels").glob("*.cu"))))
        .replace("MARK", repr("kernel_" + next(iter(exercises.EXERCISES)))))
    cmd = sandbox.command([sys.executable, "probe.py"], tmp_path, env={}, work_read_only=True,
                          hidden=[REFERENCE_KERNELS])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.strip() == "[]", out
