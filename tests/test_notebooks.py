"""The exercise notebooks: released by nbgrader, in step with the registry, solutions pass.

- ``exercises/`` is exactly nbgrader's release of ``solutions/`` (regenerated here);
- each notebook has, per kernel, a kernel cell with the registry's signature and launch,
  a visible check, and hidden correctness and speed tests worth the registry's points;
- the solutions pass every hidden test on the emulator (``nbgrader validate``);
- the released stubs compile to kernels that write nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbgrader.validator import Validator

from tilelab import classroom, exercises
from tilelab.grading.sandbox import grade_source

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = list(exercises.ASSIGNMENTS)


def notebook_path(folder: str, assignment: str) -> Path:
    return REPO / folder / assignment / f"{classroom.notebook_id(assignment)}.ipynb"


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def cells_by_id(nb: dict) -> dict[str, dict]:
    return {
        c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"] if "nbgrader" in c["metadata"]
    }


def source(cell: dict) -> str:
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def comparable(nb: dict) -> list[tuple]:
    """What a release must reproduce: cell types, sources and nbgrader metadata."""
    return [
        (c["cell_type"], source(c), json.dumps(c["metadata"].get("nbgrader"), sort_keys=True))
        for c in nb["cells"]
    ]


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A fresh nbgrader release of solutions/, made in a copy of the course."""
    root = tmp_path_factory.mktemp("release") / "course"
    (root / "autograder").mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    shutil.copytree(REPO / "solutions", root / "solutions")
    classroom.release(root)
    return root / "exercises"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercises_are_the_release_of_solutions(released, assignment):
    fresh = load(released / assignment / f"{classroom.notebook_id(assignment)}.ipynb")
    committed = load(notebook_path("exercises", assignment))
    assert comparable(committed) == comparable(fresh), (
        "exercises/ is out of date: run  tilelab release  and commit it"
    )
    assert committed["metadata"]["kernelspec"] == fresh["metadata"]["kernelspec"]


def test_exercises_hold_only_released_folders():
    found = {p.name for p in (REPO / "exercises").iterdir() if p.is_dir()}
    assert found == set(ASSIGNMENTS)
    assert {p.name for p in (REPO / "solutions").iterdir() if p.is_dir()} == set(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_kernel_has_its_cells_with_the_registry_points(assignment):
    nb = load(notebook_path("solutions", assignment))
    cells = cells_by_id(nb)
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        ex = exercises.get(exercise_id)
        kernel = source(cells[f"kernel_{ex.id}"])
        assert ex.signature in kernel
        assert ex.launch.describe() in kernel
        assert cells[f"kernel_{ex.id}"]["metadata"]["nbgrader"]["solution"]
        assert f'notebook.check("{ex.id}", ' in source(cells[f"check_{ex.id}"])
        correct = cells[f"test_{ex.id}_correct"]
        speed = cells[f"test_{ex.id}_speed"]
        assert correct["metadata"]["nbgrader"]["points"] == ex.points_correct
        assert speed["metadata"]["nbgrader"]["points"] == ex.points_speed
        assert f'notebook.grade("{ex.id}", ' in source(correct)  # the clean grader, by id
        assert "assert_speed(" in source(speed)
        for cell in (correct, speed):
            assert cell["metadata"]["nbgrader"]["grade"]
            assert "BEGIN HIDDEN TESTS" in source(cell)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_notebooks_hide_solutions_and_tests(assignment):
    nb = load(notebook_path("exercises", assignment))
    text = "\n".join(source(c) for c in nb["cells"])
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert "grade_source" not in text
    for c in nb["cells"]:
        assert c.get("outputs", []) == [] and c.get("execution_count") is None


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_prose_links_to_an_existing_book_chapter(assignment):
    nb = load(notebook_path("solutions", assignment))
    links = re.findall(r"\]\((\.\./\.\./book/[^)#]+)", source(nb["cells"][0]))
    assert links, "the first cell must link to the book chapter"
    for link in links:
        assert (REPO / "solutions" / assignment / link).resolve().is_file(), link


def colab_cell(assignment: str) -> str:
    return source(cells_by_id(load(notebook_path("exercises", assignment)))["colab_setup"])


@pytest.mark.parametrize("in_colab", [False, True])
def test_colab_setup_installs_only_in_colab(monkeypatch, in_colab):
    code = TransformerManager().transform_cell(colab_cell("01-naive"))
    calls: list[str] = []
    shell = types.SimpleNamespace(system=calls.append)
    if in_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(code, {"get_ipython": lambda: shell})
    if in_colab:
        assert len(calls) == 1 and "pip install" in calls[0] and "pycuda" in calls[0]
        assert "git+https://github.com/tilelab-course/tilelab" in calls[0]
    else:
        assert calls == []


def test_every_notebook_has_the_same_colab_setup():
    assert len({colab_cell(a) for a in ASSIGNMENTS}) == 1


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_released_stub_compiles_and_writes_nothing(exercise_id):
    ex = exercises.get(exercise_id)
    stub = classroom.extract_kernel(notebook_path("exercises", ex.assignment), exercise_id)
    assert "YOUR CODE HERE" in stub and ex.signature in stub
    v = grade_source(exercise_id, stub, backend_name="emu")
    assert v.compiled and not v.correct and v.points == 0
    assert "never written" in "\n".join(v.messages)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_pass_every_hidden_test_on_the_emulator(monkeypatch, assignment):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    monkeypatch.setenv("TILELAB_AWARD_SPEED_WITHOUT_GPU", "1")
    result = Validator().validate(str(notebook_path("solutions", assignment)))
    assert result == {}, json.dumps(result)[:3000]


@pytest.mark.slow
def test_without_a_gpu_only_padded_kernels_pass_the_speed_tests(monkeypatch):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    monkeypatch.delenv("TILELAB_AWARD_SPEED_WITHOUT_GPU", raising=False)
    result = Validator().validate(str(notebook_path("solutions", "03-padded")))
    failed = result.get("failed", [])
    assert len(failed) == 1 and "transpose_shared" in failed[0]["source"]
    assert "speed not measured: no GPU" in failed[0]["error"]
