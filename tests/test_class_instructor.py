"""What a class run tells its instructor, end to end on a small class graded once (in this
process, sandboxed where bubblewrap works): what it did not grade and why, the closing
table, honest counts on a rerun, ``--student`` and ``--force``, the regrade trail, and the
command line's refusals without a traceback.

The class: ann's kernels are the reference's; ben's naive is wrong; cid deleted a hidden
test cell; dee's notebook is cut short (not JSON); eve is enrolled and submitted nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_classroom import (
    FIXTURES,
    SANDBOXED,
    copy_course,
    enrol,
    kernel_cell,
    released_stub,
    solution_kernel,
    submission,
)

from tilelab import classroom, cli
from tilelab.classroom import trail
from tilelab.classroom.summary import table

pytestmark = [pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
              pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
A = "01-naive"


def cells(**kernels: str) -> dict[str, str]:
    return {e: kernel_cell(released_stub(e), src) for e, src in kernels.items()}


def correct() -> dict[str, str]:
    return cells(add2d=solution_kernel("add2d"), naive=solution_kernel("naive"))


def notebook(kernel_cells: dict[str, str], drop: str = "") -> bytes:
    nb = submission(A, kernel_cells)
    nb["cells"] = [c for c in nb["cells"]
                   if c["metadata"].get("nbgrader", {}).get("grade_id") != drop]
    return json.dumps(nb).encode()


def place(root: Path, student: str, data: bytes) -> Path:
    folder = root / "autograder" / "submitted" / student / A
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "naive.ipynb").write_bytes(data)
    return folder


def grade(root: Path, **kw) -> dict:
    return classroom.grade_class(root, backend="emu", progress=False, sandboxed=SANDBOXED, **kw)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("instructor") / "course"
    copy_course(root)
    wrong = (FIXTURES / "naive-wrong_result.cu").read_text()
    place(root, "ann", notebook(correct()))
    place(root, "ben", notebook(cells(add2d=solution_kernel("add2d"), naive=wrong)))
    place(root, "cid", notebook(correct(), drop="test_add2d_correct"))
    place(root, "dee", notebook(correct())[:4000])
    enrol(root, ["ann", "ben", "cid", "dee", "eve"])
    return root, grade(root)


def failures(summary: dict, student: str) -> list[dict]:
    return [f for f in summary["failures"] if f.get("student") == student]


def test_a_missing_submission_is_named(graded):
    _, summary = graded
    assert summary["missing"] == [{"student": "eve", "assignment": A}]
    text = table(summary)
    assert "missing   1 submission(s), not graded" in text and "eve 01-naive" in text
    assert summary["class"]["students"]["eve"] == {A: None}


def test_a_broken_notebook_is_reported_by_its_one_line_reason(graded):
    _, summary = graded
    said = failures(summary, "dee")
    assert [f["step"] for f in said] == ["autograde"], said  # no second line for feedback
    error = said[0]["error"]
    assert "naive.ipynb is not a readable notebook" in error, error
    assert "Traceback" not in error and "\n" not in error
    assert "Traceback" in said[0]["detail"] or said[0]["detail"]  # the log is kept


def test_a_deleted_hidden_test_cell_is_explained(graded):
    root, summary = graded
    said = [f["error"] for f in failures(summary, "cid") if f["step"] == "cells"]
    assert said and "test_add2d_correct was deleted from naive.ipynb" in said[0], said
    text = (root / "autograder" / "feedback" / "cid" / A / "tilelab_verdict.txt").read_text()
    assert "test_add2d_correct was deleted" in text


def test_the_run_ends_with_a_student_by_assignment_table(graded):
    _, summary = graded
    lines = table(summary).splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("student"))
    assert lines[head].split() == ["student", A, "total"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[head + 1:]}
    assert rows["ann"] == ["5/7", "5/7"]
    assert rows["ben"][0] == "2/7"  # add2d right, naive wrong
    assert rows["eve"] == ["-", "0/7"]
    assert set(rows) == {"ann", "ben", "cid", "dee", "eve"}


def test_a_rerun_counts_this_run_and_the_class_apart(graded):
    root, first = graded
    again = grade(root)
    assert again["graded"] == 0 and again["up_to_date"] == 4
    text = table(again)
    class_score = first["class"]["score"]
    assert class_score > 0
    assert f"this run: 0 of 0; class: {class_score:g} of {5 * 7:g}" in text, text


def test_student_filters_and_regrades_only_what_changed_unless_forced(graded):
    root, _ = graded
    assert grade(root, students=["ann"])["graded"] == 0
    forced = grade(root, students=["ann"], force=True)
    assert [(s["student"], s["assignment"]) for s in forced["submissions"]] == [("ann", A)]


def test_an_unknown_student_is_refused_like_an_unknown_assignment(graded, capsys):
    root, _ = graded
    with pytest.raises(ValueError, match=r"unknown student\(s\) \['zoe'\]"):
        grade(root, students=["zoe"])
    for args, said in ((["--student", "zoe"], "unknown student(s) ['zoe']"),
                       (["--assignment", "05-nope"], "unknown assignment(s) ['05-nope']")):
        code = cli.main(["grade", "--course", str(root), "--backend", "emu", "--quiet",
                         *([] if SANDBOXED else ["--no-sandbox"]), *args])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("tilelab grade: ") and said in err, err
        assert "Traceback" not in err


def test_a_changed_grade_is_written_to_the_trail_with_who_why_before_after(graded):
    root, _ = graded
    cd = classroom.open_api(root).coursedir
    before = len(trail.read(cd))
    place(root, "ben", notebook(correct()))
    summary = grade(root, students=["ben"], reason="ben's resubmission, accepted late")
    assert summary["graded"] == 1
    lines = trail.read(cd)[before:]
    assert len(lines) == 1, lines
    entry = lines[0]
    assert (entry["student"], entry["assignment"]) == ("ben", A)
    assert entry["why"] == "ben's resubmission, accepted late" and entry["who"]
    assert entry["before"]["naive"]["correct"] == 0 and entry["after"]["naive"]["correct"] == 3
    assert (entry["score_before"], entry["score_after"]) == (2, 5)
    again = grade(root, students=["ben"], force=True)  # the same points: no line
    assert again["graded"] == 1 and len(trail.read(cd)) == before + 1


def test_a_listing_piped_into_a_closed_reader_ends_quietly():
    """``tilelab list | head``: the reader has gone before the first line is written."""
    proc = subprocess.Popen([sys.executable, "-m", "tilelab.cli", "list"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
