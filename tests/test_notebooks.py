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

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbgrader.validator import Validator

from tilelab import classroom, publish
from tilelab.catalog import exercises
from tilelab.classroom import submissions
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
        assert correct["metadata"]["nbgrader"]["points"] == ex.points_correct
        assert f'notebook.grade("{ex.id}", ' in source(correct)  # the clean grader, by id
        tested = [correct]
        if ex.speed_graded:
            speed = cells[f"test_{ex.id}_speed"]
            assert speed["metadata"]["nbgrader"]["points"] == ex.points_speed
            assert "assert_speed(" in source(speed)
            tested.append(speed)
        else:  # a correctness-only step has no speed test to lose points on
            assert f"test_{ex.id}_speed" not in cells
        for cell in tested:
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


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_grading_text_is_the_registry_s(folder, assignment):
    """The notebook's chapter link and "Grading:" text are what the release writes from
    the registry and _config.yml: a gate or points changed in one place fails here."""
    found = publish.notebook_about_cell(notebook_path(folder, assignment))
    assert found == publish.about_cell(assignment, publish.repository_url(REPO)), (
        f"{folder}/{assignment}: the grading text disagrees with the registry; run  "
        "tilelab release  and commit the notebooks"
    )
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        ex = exercises.get(exercise_id)
        line = publish.grading_line(ex)
        assert line in found
        if ex.speed_graded:
            assert f"at least {ex.gate:g}x faster than {ex.baseline.label}" in line
        if ex.max_bank_degree is not None:  # what the bank gate measures, in words
            assert "bank-conflict degree" in line and "as feedback" in line


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_step_s_graded_line_is_the_registry_s(folder, assignment):
    """Each step of the notebook says once, in its own text, how it is graded, in the words
    the release writes from the registry (a promise of points the grader does not give
    fails here)."""
    found = publish.notebook_step_lines(notebook_path(folder, assignment))
    ids = exercises.ASSIGNMENTS[assignment]
    assert set(found) == set(ids), f"{folder}/{assignment}: steps {sorted(found)} of {ids}"
    for exercise_id, lines in found.items():
        assert lines == [publish.step_line(exercises.get(exercise_id))], (
            f"{folder}/{assignment}: step {exercise_id}'s Graded line disagrees with the "
            "registry; run  tilelab release  and commit the notebooks")


def test_a_step_line_follows_a_changed_gate(monkeypatch):
    ex = exercises.get("transpose_padded")
    assert "without a GPU, no speed points" in publish.step_line(ex)
    monkeypatch.setitem(exercises.EXERCISES, "transpose_padded", ex.with_gate(7.5, "test"))
    assert "at least 7.5x faster" in publish.step_line(exercises.get("transpose_padded"))


def test_the_grading_text_follows_a_changed_gate(monkeypatch):
    ex = exercises.get("naive")
    monkeypatch.setitem(exercises.EXERCISES, "naive", ex.with_gate(9.5, "test"))
    assert "at least 9.5x faster" in publish.about_cell("01-naive", "")


@pytest.mark.parametrize("url", ["", "https://github.com/A-Course/tilelab"])
def test_notebooks_link_the_published_book_or_say_it_is_not_published(url):
    text = publish.about_cell("02-tiled", url)
    if url:
        assert "](https://a-course.github.io/tilelab/book/03-tiling.html)" in text
    else:  # the chapter beside the notebook: in the built book, and in the repository
        assert "not published yet" in text
        link = re.search(r"\]\((\.\./\.\./book/[^)]+\.md)\)", text)
        assert link and (REPO / "exercises" / "02-tiled" / link.group(1)).resolve().is_file()
    for chapter, (page, _title) in publish.CHAPTERS.items():
        assert (REPO / f"{page}.md").is_file(), chapter


def colab_cell(assignment: str) -> str:
    return source(cells_by_id(load(notebook_path("exercises", assignment)))["colab_setup"])


def run_setup_cell(code: str, monkeypatch, tmp_path, in_colab: bool) -> list[str]:
    """Run a set-up cell as IPython would (shell commands expanded), in ``tmp_path``;
    return the shell commands it ran."""
    calls: list[str] = []
    ns: dict = {}
    shell = types.SimpleNamespace(system=lambda cmd: calls.append(cmd.format(**ns)))
    ns["get_ipython"] = lambda: shell
    if in_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.chdir(tmp_path)
    exec(TransformerManager().transform_cell(code), ns)
    return calls


@pytest.mark.parametrize("in_colab", [False, True])
def test_colab_setup_installs_only_in_colab(monkeypatch, tmp_path, capsys, in_colab):
    calls = run_setup_cell(colab_cell("01-naive"), monkeypatch, tmp_path, in_colab)
    url = publish.repository_url(REPO)
    if in_colab and url:
        assert calls == [f'pip install -q pycuda "tilelab @ git+{url}@main"']
    elif in_colab:  # not published yet: no install from a repository that does not exist
        assert calls == []
        assert "not been published" in capsys.readouterr().out
    else:
        assert calls == []


def test_colab_setup_installs_an_uploaded_wheel(monkeypatch, tmp_path):
    (tmp_path / "tilelab-0.1.0-py3-none-any.whl").write_bytes(b"")
    calls = run_setup_cell(colab_cell("01-naive"), monkeypatch, tmp_path, in_colab=True)
    assert calls == ['pip install -q pycuda "tilelab-0.1.0-py3-none-any.whl"']


@pytest.mark.parametrize("url", ["", "https://github.com/a-course/its-fork"])
def test_colab_setup_for_a_published_course(monkeypatch, tmp_path, capsys, url):
    calls = run_setup_cell(publish.setup_cell(url, "term-2027"), monkeypatch, tmp_path,
                           in_colab=True)
    if url:  # the package of the branch or tag _config.yml names, not whatever is newest
        assert calls == [f'pip install -q pycuda "tilelab @ git+{url}@term-2027"']
    else:
        assert calls == [] and "upload it" in capsys.readouterr().out


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_setup_cell_names_the_url_in_config(folder, assignment):
    """Every notebook installs from where _config.yml says the course is published."""
    found = publish.notebook_setup_cell(notebook_path(folder, assignment))
    assert found == publish.setup_cell(publish.repository_url(REPO)), (
        f"{folder}/{assignment}: the set-up cell disagrees with _config.yml's repository url; "
        "run  tilelab release  and commit the notebooks"
    )


@pytest.mark.parametrize("url", ["https://gitlab.com/a/b", "github.com/a/b", "https://github.com/a"])
def test_a_url_colab_cannot_open_is_refused(tmp_path, url):
    (tmp_path / "_config.yml").write_text(f"repository:\n  url: {url}\n")
    with pytest.raises(publish.PublishError, match="not a GitHub repository"):
        publish.repository_url(tmp_path)


@pytest.mark.slow
def test_release_writes_the_configured_url_into_every_notebook(tmp_path):
    root = tmp_path / "course"
    (root / "autograder").mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    shutil.copytree(REPO / "solutions", root / "solutions")
    cfg = (REPO / "_config.yml").read_text(encoding="utf-8")
    fork = "https://github.com/a-course/its-fork"
    (root / "_config.yml").write_text(cfg.replace('url: ""', f'url: "{fork}"', 1))
    assert publish.repository_url(root) == fork
    for nb in classroom.release(root):
        assert publish.notebook_setup_cell(nb) == publish.setup_cell(fork)
        assert publish.notebook_setup_cell(root / "solutions" / nb.parent.name / nb.name) == (
            publish.setup_cell(fork))


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
def test_without_a_gpu_correct_kernels_speed_tests_do_not_fail(monkeypatch):
    """The emulator's bank-conflict analysis is feedback: padded or not, no speed points
    (tests/test_notebooks_helpers.py), and a correct kernel's speed test, not measured,
    says so without failing: no traceback in the learner's feedback, no failed test in
    formgrader."""
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    monkeypatch.delenv("TILELAB_AWARD_SPEED_WITHOUT_GPU", raising=False)
    timed = [e for e in exercises.EXERCISES.values()
             if e.assignment == "03-padded" and e.speed_graded]
    assert timed
    result = Validator().validate(str(notebook_path("solutions", "03-padded")))
    assert result == {}, json.dumps(result)[:3000]


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_each_kernel_cell_sets_the_name_its_check_and_hidden_tests_pass(folder):
    """The class run reads the kernel from the name the catalog gives (``variable``): the
    one each kernel cell sets and each check and hidden test passes to the grader."""
    for assignment, ids in exercises.ASSIGNMENTS.items():
        cells = nbformat.read(notebook_path(folder, assignment), as_version=4).cells
        for exercise_id in ids:
            name = exercises.get(exercise_id).variable
            kernel = next(c.source for c in cells if c.metadata.get("nbgrader", {}).get(
                "grade_id") == f"kernel_{exercise_id}")
            assert kernel.startswith(f'{name} = r"""'), (exercise_id, kernel[:40])
            calls = [c.source for c in cells if f'("{exercise_id}", ' in c.source]
            assert calls and all(f'("{exercise_id}", {name}' in c for c in calls), exercise_id


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_a_class_run_knows_an_untouched_stub_from_a_kernel(exercise_id):
    """A submitted notebook keeps the stubs of the steps a learner skipped: the class run
    scores them 0 without grading them (no emulator run per skipped step)."""
    ex = exercises.get(exercise_id)
    stub = classroom.extract_kernel(notebook_path("exercises", ex.assignment), exercise_id)
    solution = classroom.extract_kernel(notebook_path("solutions", ex.assignment), exercise_id)
    assert submissions.empty_kernel(stub, ex.kernel)
    assert not submissions.empty_kernel(solution, ex.kernel)
    one_line = stub.replace("// YOUR CODE HERE", "C[0] = 1.0f;  // YOUR CODE HERE", 1)
    assert not submissions.empty_kernel(one_line, ex.kernel)
    helper = "__device__ float two() { return 2.0f; }\n" + stub
    assert not submissions.empty_kernel(helper, ex.kernel)


def test_no_released_notebook_prints_a_run_of_a_solution():
    """Specs and hints may name a key line (the last hint does), never a run of the
    solution: the leak check's run of consecutive solution lines in the released text would
    be shown to every learner, and found in every learner's feedback."""
    run = submissions.SOLUTION_RUN
    blocks = submissions.solution_blocks([notebook_path("solutions", a) for a in ASSIGNMENTS])
    runs = {b[i:i + run] for b in blocks for i in range(len(b) - run + 1)}

    def shown(folder: str, a: str) -> list[tuple[str, ...]]:
        text = "\n".join(source(c) for c in load(notebook_path(folder, a))["cells"])
        lines = [n for n in (" ".join(x.split("//", 1)[0].split()) for x in text.splitlines())
                 if n]
        return [w for i in range(len(lines) - run + 1) if (w := tuple(lines[i:i + run])) in runs]

    assert all(shown("solutions", a) for a in ASSIGNMENTS)  # the check sees a solution
    for a in ASSIGNMENTS:
        assert shown("exercises", a) == [], f"{a} prints a run of solution lines"
