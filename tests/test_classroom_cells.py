"""Reading a kernel out of a submitted notebook: JSON and a literal, never execution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelab import classroom
from tilelab.classroom import submissions
from tilelab.grading import scoring

REPO = Path(__file__).resolve().parents[1]
SUBMITTED = REPO / "exercises" / "01-naive" / "naive.ipynb"


def with_kernel_cell(tmp_path: Path, cell_source: str | None) -> Path:
    """The released naive notebook with its kernel cell's source replaced (None: deleted)."""
    nb = json.loads(SUBMITTED.read_text(encoding="utf-8"))
    cells = []
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "kernel_naive":
            if cell_source is None:
                continue
            c["source"] = cell_source
        cells.append(c)
    nb["cells"] = cells
    path = tmp_path / "naive.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_the_released_kernel_cell_is_read():
    src = classroom.extract_kernel(SUBMITTED, "naive")
    assert "__global__ void matmul_naive(" in src and "YOUR CODE HERE" in src


@pytest.mark.parametrize(
    "cell",
    [
        'KERNEL = r"""__global__ void k() {}"""',
        '# my kernel\nKERNEL: str = "__global__ void k() {}"\nprint(len(KERNEL))',
        'KERNEL = ("__global__ void k()"\n          " {}")',
    ],
)
def test_a_string_literal_is_read_without_running_anything(tmp_path, cell):
    assert classroom.extract_kernel(with_kernel_cell(tmp_path, cell), "naive") == (
        "__global__ void k() {}"
    )


@pytest.mark.parametrize(
    "cell, says",
    [
        (None, "no kernel cell 'kernel_naive'"),
        ('KERNEL = open("k.cu").read()', "plain string literal"),
        ('KERNEL = "a" + "b"', "plain string literal"),
        ('KERNEL = r"""ok"""\nKERNEL = KERNEL.upper()', "plain string literal"),
        ('KERNEL = r"""unterminated', "not valid Python"),
        ("%%writefile k.cu\n__global__ void k() {}", "not valid Python"),
    ],
)
def test_an_unreadable_kernel_cell_is_explained(tmp_path, cell, says):
    with pytest.raises(classroom.KernelCellError, match=says):
        classroom.extract_kernel(with_kernel_cell(tmp_path, cell), "naive")


K = "__global__ void k() {}"


@pytest.mark.parametrize("cell", [
    f'KERNEL = r"""{K}"""\nNOTE = "tried 32x8 blocks first, slower"',  # a string after it
    f'KERNEL = "a stub"\nKERNEL = r"""{K}"""',  # set again: the last one counts
    f'A = KERNEL = r"""{K}"""',
    f'KERNEL = r"""{K}"""\ndef f():\n    KERNEL = 1\n    return KERNEL',  # f's own name
])
def test_the_kernel_is_the_literal_the_cell_sets_the_released_name_to(tmp_path, cell):
    """What the notebook's own check and hidden tests pass to the grader (KERNEL, here),
    whatever other strings the cell holds."""
    assert classroom.extract_kernel(with_kernel_cell(tmp_path, cell), "naive") == K


@pytest.mark.parametrize("cell, says", [
    (f'HELPERS = r"""__device__ float two() {{ return 2; }}"""\nKERNEL = HELPERS + r"""{K}"""',
     "sets KERNEL last at its line 2, and not to a plain string literal"),
    (f'MY_KERNEL = r"""{K}"""', "does not assign KERNEL, the name the released notebook "
                                "gives the kernel .* it assigns MY_KERNEL"),
    (f'KERNEL = r"""{K}"""\nKERNEL += "// more"', "sets KERNEL last at its line 2"),
    (f'KERNEL = r"""{K}"""\nfor KERNEL in ["x"]:\n    pass', "sets KERNEL last at its line 2"),
    (f'KERNEL = r"""{K}"""\nprint(KERNEL := "x")', "sets KERNEL last at its line 2"),
    (f'KERNEL = r"""{K}"""\ndef f():\n    global KERNEL\n    KERNEL = "x"',
     "sets KERNEL last at its line 2"),
    (f'KERNEL, X = r"""{K}""", "x"', "sets KERNEL last at its line 1"),
])
def test_a_kernel_name_set_to_anything_but_a_literal_is_refused_with_what_to_write(
        tmp_path, cell, says):
    """Never another string of the cell graded in its place: the learner is told which
    line, and to write the kernel as the released notebook's name = a literal."""
    with pytest.raises(classroom.KernelCellError, match=says):
        classroom.extract_kernel(with_kernel_cell(tmp_path, cell), "naive")


def test_a_missing_or_broken_notebook_is_explained(tmp_path):
    with pytest.raises(classroom.KernelCellError, match="was not submitted"):
        classroom.extract_kernel(tmp_path / "naive.ipynb", "naive")
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json", encoding="utf-8")
    with pytest.raises(classroom.KernelCellError, match="not a readable notebook"):
        classroom.extract_kernel(broken, "naive")
    deep = tmp_path / "deep.ipynb"  # JSON nested past Python's recursion limit: the
    deep.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")  # file's fault
    with pytest.raises(classroom.KernelCellError, match="nested too deeply to read"):
        classroom.extract_kernel(deep, "naive")


def test_an_unreadable_kernel_scores_zero_with_the_reason(tmp_path):
    path = with_kernel_cell(tmp_path, None)
    v = next(v for v in classroom.grade_notebook(path, "01-naive", "emu") if v.exercise == "naive")
    assert v.points == 0 and not v.compiled
    assert "no kernel cell" in v.messages[0]
    assert scoring.points(v, award=True).as_dict() == {"correct": 0.0, "speed": 0.0}


def test_course_layout_comes_from_the_config_file():
    cd = classroom.open_api(REPO).coursedir
    assert Path(cd.root) == REPO
    assert (cd.source_directory, cd.release_directory) == ("solutions", "exercises")
    assert cd.submitted_directory == "autograder/submitted"
    assert cd.db_url == f"sqlite:///{REPO / 'autograder' / 'gradebook.db'}"
    assert classroom.config_path(REPO / "autograder") == classroom.config_path(REPO)


def test_unknown_assignments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown assignment"):
        classroom.grade_class(REPO, assignments=["04-nope"], backend="emu", progress=False)


def test_a_duplicated_kernel_cell_is_named_not_graded_as_the_stub(tmp_path):
    nb = json.loads(SUBMITTED.read_text(encoding="utf-8"))
    kernel = next(c for c in nb["cells"]
                  if c["metadata"].get("nbgrader", {}).get("grade_id") == "kernel_naive")
    nb["cells"].append(dict(kernel, source='KERNEL = r"""__global__ void k() {}"""'))
    path = tmp_path / "naive.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(classroom.KernelCellError, match="2 cells with grade id 'kernel_naive'"):
        classroom.extract_kernel(path, "naive")


@pytest.mark.parametrize("bad", [[], "x", {"nbgrader": "x"}, {"nbgrader": {"grade_id": 7}}])
def test_malformed_metadata_costs_only_its_own_cell(tmp_path, bad):
    nb = json.loads(SUBMITTED.read_text(encoding="utf-8"))
    nb["cells"].insert(0, {"cell_type": "code", "metadata": bad, "source": "x = 1",
                           "outputs": [], "execution_count": None})
    path = tmp_path / "naive.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert "__global__ void matmul_naive(" in classroom.extract_kernel(path, "naive")


def test_a_huge_notebook_is_refused_without_being_read(tmp_path):
    path = tmp_path / "naive.ipynb"
    with open(path, "wb") as f:
        f.truncate(submissions.NOTEBOOK_READ_LIMIT + 1)  # sparse
    with pytest.raises(classroom.KernelCellError, match="MiB a notebook may be"):
        classroom.extract_kernel(path, "naive")


def test_a_timestamp_nbgrader_cannot_read_is_named_as_the_cause(tmp_path):
    """nbgrader fails the whole notebook over a timestamp.txt that holds no time, and says
    only "see the above traceback": the learner is told which file, and what to do."""
    from tilelab.classroom.steps import autograde_problem
    from tilelab.classroom.submissions import unreadable_timestamp

    failed = {"success": False, "log": "[ERROR] Please see the the above traceback"}
    assert unreadable_timestamp(tmp_path) is None  # none: nbgrader uses the run's time
    (tmp_path / "timestamp.txt").write_text("2026-01-31 17:00:00.000000 UTC")
    assert unreadable_timestamp(tmp_path) is None
    assert "timestamp.txt" not in autograde_problem(failed, tmp_path)
    (tmp_path / "timestamp.txt").write_bytes(b"not a date\x00\xff")
    said = autograde_problem(failed, tmp_path)
    assert "its timestamp.txt does not hold a time nbgrader can read" in said
    assert said.endswith("graded from the submitted file alone")
