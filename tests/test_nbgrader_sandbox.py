"""nbgrader's steps over hostile notebooks, in their sandbox, in one class run: a display
id updated with 8 MiB across 96 outputs, 144 KB of unmatched ``\\begin{x}`` in markdown,
60,000 empty cells. Each costs only what it broke (its notebook's outputs, page or run),
says what and how much, and keeps its kernel's points; the honest learner beside them is
graded as ever. The nbgrader steps' sandbox itself: ``test_the_steps_sandbox_*``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import hostile_steps
from support.classroom import (
    copy_course,
    kernel_cell,
    released_stub,
    solution_kernel,
    submission,
    write_submissions,
)

from tilelab import classroom
from tilelab.classroom import nbgrader_steps
from tilelab.isolation import bubblewrap

REPO = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bubblewrap.problem() is not None,
                       reason=f"nbgrader's steps run in a sandbox: {bubblewrap.problem()}"),
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]

CASES = {  # student -> (the edit to the honest notebook, what its learner is told)
    "honest": (None, None),
    "display": ("display", r"came to \d+ MiB, more than the 4 MiB"),
    "latex": ("latex", None),
    "cells": ("cells", r"60,0\d\d cells, more than the 1,000"),
}


def notebook(edit: str | None) -> bytes:
    cell = kernel_cell(released_stub("naive"), solution_kernel("naive"))
    nb = submission("01-naive", {"naive": cell})
    if edit == "display":
        nb["cells"].append(hostile_steps.code_cell(hostile_steps.DISPLAY_BOMB))
    if edit == "latex":
        nb["cells"].append(hostile_steps.unmatched_begins(144))
    if edit == "cells":
        nb["cells"] += hostile_steps.empty_cells()
    return json.dumps(nb).encode()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-steps") / "course"
    copy_course(root)
    write_submissions(root, {(s, "01-naive"): notebook(edit) for s, (edit, _) in CASES.items()})
    summary = classroom.grade_class(root, backend="emu", progress=False, sandboxed=True)
    return root, summary


def entry(summary: dict, student: str) -> dict:
    return next(s for s in summary["submissions"] if s["student"] == student)


@pytest.mark.parametrize("student", sorted(CASES))
def test_each_hostile_notebook_keeps_its_kernels_points_and_says_what_it_broke(graded,
                                                                              student):
    import re

    root, summary = graded
    got = entry(summary, student)
    assert got["points"]["naive"]["correct"] == 3.0, got
    said = CASES[student][1]
    notes = " ".join(got["notes"])
    if said is None:
        assert not got["notes"], got["notes"]
    else:
        assert re.search(said, notes), notes
        verdict = (root / "autograder" / "feedback" / student / "01-naive"
                   / "tilelab_verdict.txt").read_text()
        assert re.search(said, verdict)


def test_the_display_bomb_leaves_small_files(graded):
    root, _ = graded
    autograded = root / "autograder" / "autograded" / "display" / "01-naive" / "naive.ipynb"
    page = root / "autograder" / "feedback" / "display" / "01-naive" / "naive.html"
    assert autograded.stat().st_size < 8 << 20 and page.stat().st_size < 8 << 20
    nb = json.loads(autograded.read_text())
    assert "passed 4 MiB" in json.dumps(nb["cells"][-1]["outputs"])


def test_the_latex_case_renders_its_markdown_as_text_and_the_cells_case_is_not_run(graded):
    root, summary = graded
    page = root / "autograder" / "feedback" / "latex" / "01-naive" / "naive.html"
    assert "shown as text" in page.read_text()
    assert not (root / "autograder" / "feedback" / "cells" / "01-naive" / "naive.html").exists()
    assert (root / "autograder" / "feedback" / "honest" / "01-naive" / "naive.html").exists()
    assert {f["student"] for f in summary["failures"]} <= {"display", "cells"}


def test_a_notebook_over_the_caps_is_refused_before_nbgrader_reads_it():
    cells = [{"cell_type": "markdown", "source": "m" * 1024}] * 300
    assert "markdown" in nbgrader_steps.refused(cells)
    assert nbgrader_steps.refused(cells[:200]) is None
    assert "cells" in nbgrader_steps.refused([{"cell_type": "code", "source": ""}] * 1001)


def test_the_steps_sandbox_hides_the_solutions_and_the_network(tmp_path):
    """What the child of nbgrader's steps sees, run as the class run starts it, with its
    steps replaced by a probe: the private course writable, the source notebooks empty,
    no network, no other folder of the grader's."""
    from tilelab.classroom import notebook_sandbox

    root = tmp_path / "course"
    copy_course(root)
    secret = root / "solutions" / "01-naive" / "naive.ipynb"
    assert secret.stat().st_size > 0
    box = notebook_sandbox.NotebookSandbox(root, "01-naive", "ann", "naive.ipynb", 10, 60)
    probe = (
        "import json, os, socket, sys\n"
        "out = {'solution': os.path.getsize('/sandbox/solutions/01-naive/naive.ipynb'),\n"
        "       'course': sorted(os.listdir('/sandbox')),\n"
        f"       'repo': os.path.exists({str(REPO / 'solutions')!r}),\n"
        f"       'tmp': os.path.exists({str(tmp_path)!r})}}\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), 2); out['net'] = True\n"
        "except OSError:\n    out['net'] = False\n"
        "os.write(int(sys.argv[1]), (json.dumps({'kernels': out}) + '\\n').encode())\n"
    )
    original = notebook_sandbox.STEPS_MODULE
    notebook_sandbox.STEPS_MODULE = ["-c", probe]
    try:
        with box:
            seen = box._wait("kernels", 60, "probe")
    finally:
        notebook_sandbox.STEPS_MODULE = original
    assert seen == {"solution": 0, "course": ["autograder", "exercises", "solutions"],
                    "repo": False, "tmp": False, "net": False}, (seen, box.problem)
