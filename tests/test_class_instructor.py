"""What a class run tells its instructor, end to end on a small class graded once (in this
process, sandboxed where bubblewrap works): what it did not grade and why, the closing
table, honest counts on a rerun, ``--student`` and ``--force``, the regrade trail, and the
command line's refusals without a traceback.

The class: ann's kernels are the reference's; ben's naive is wrong; cid deleted a hidden
test cell; dee's notebook is cut short (not JSON); eve is enrolled and submitted nothing.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
from support.classroom import (
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
from tilelab.catalog import exercises
from tilelab.classroom import course, dryrun, report, trail
from tilelab.classroom.summary import table
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict

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


def test_the_class_report_counts_each_exercise_and_its_causes(graded, tmp_path, capsys):
    root, _ = graded
    cd = classroom.open_api(root).coursedir
    doc = report.build(cd)
    assert doc["learners"] == 4  # eve submitted nothing: no verdict
    rows = {e["exercise"]: e for e in doc["exercises"]}
    assert list(rows) == ["add2d", "naive"]
    naive = rows["naive"]
    assert (naive["submitted"], naive["correct"]) == (4, 2)  # ann, cid right; ben, dee not
    assert naive["speed_not_measured"] == 2 and naive["speed_passed"] == 0
    causes = {c["what"]: c["count"] for c in naive["causes"]}
    assert sum(causes.values()) == 2 and any(c.startswith("not graded") for c in causes)
    for e in doc["exercises"]:
        for key in ("causes", "feedback"):
            counts = [c["count"] for c in e[key]]
            assert counts == sorted(counts, reverse=True)
            assert abs(sum(c["share"] for c in e[key]) - 1) < 1e-6 or not counts
    told = {c["what"]: c["count"] for c in naive["feedback"]}
    assert told["correct; speed not measured"] == 2 and told["wrong results"] == 1
    page = tmp_path / "report.html"
    assert cli.main(["report", "--course", str(root), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "naive (01-naive): 4 submitted" in out and "correct 2 (50%)" in out
    html = page.read_text()
    assert 'src="data:image/png;base64,' in html and "<script" not in html.lower()
    assert cli.main(["report", "--course", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


def test_canvas_export_has_canvas_columns_and_inert_fields(graded, tmp_path):
    root, _ = graded
    cd = classroom.open_api(root).coursedir
    with course.gradebook(cd) as gb:
        gb.update_or_create_student("eve", first_name="Eve",
                                    last_name="=HYPERLINK(\"http://x\")",
                                    email="eve@example.org")
    dest = tmp_path / "canvas.csv"
    assert cli.main(["export", "canvas", "--course", str(root), "--out", str(dest)]) == 0
    rows = list(csv.reader(dest.open(encoding="utf-8")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "7"
    by_id = {r[2]: r for r in rows[2:]}
    assert by_id["ann"][5] == "5" and by_id["ben"][5] == "2"
    assert by_id["eve"][5] == ""  # nothing submitted: no grade, not a zero
    assert by_id["eve"][0] == "'=HYPERLINK(\"http://x\"), Eve" and by_id["eve"][3] == (
        "eve@example.org")
    assert not [c for r in rows for c in r if c.startswith(("=", "+", "-", "@"))]


def test_gradescope_export_writes_one_test_per_graded_step(graded, tmp_path):
    root, _ = graded
    out = tmp_path / "gradescope"
    assert cli.main(["export", "gradescope", "--course", str(root), "--out", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.glob("*/*/results.json"))
    assert written == [f"{s}/{A}/results.json" for s in ("ann", "ben", "cid", "dee")]
    ann = json.loads((out / "ann" / A / "results.json").read_text())
    names = [t["name"] for t in ann["tests"]]
    assert names == ["add2d: correctness", "naive: correctness", "naive: speed"]
    assert [t["score"] for t in ann["tests"]] == [2, 3, 0] and ann["score"] == 5
    assert [t["max_score"] for t in ann["tests"]] == [2, 3, 2]
    for test in ann["tests"]:
        assert test["visibility"] and test["output_format"] == "text"
        assert "Exercise" in test["output"]


def test_a_dry_run_lists_what_a_registry_change_would_flip_and_writes_nothing(
        graded, monkeypatch, capsys):
    root, _ = graded
    gradebook = root / "autograder" / "gradebook.db"
    seen = gradebook.stat().st_mtime_ns, len(list(root.rglob("*")))
    naive = exercises.get("naive")
    monkeypatch.setitem(exercises.EXERCISES, "naive",
                        dataclasses.replace(naive, points_correct=naive.points_correct + 1))
    assert cli.main(["grade", "--course", str(root), "--dry-run", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    flipped = {(f["student"], f["exercise"], f["test"], f["before"], f["after"])
               for f in found["flips"]}
    assert flipped == {("ann", "naive", "correct", 3, 4), ("cid", "naive", "correct", 3, 4)}
    assert (gradebook.stat().st_mtime_ns, len(list(root.rglob("*")))) == seen


def test_a_gate_change_flips_a_recorded_gpu_verdict():
    ex = exercises.get("tiled")
    fast = Verdict(exercise="tiled", backend="gpu", gpu="H200", compiled=True, correct=True,
                   speed_measured=True, speed_passed=True, speedup=1.62, gate=1.5,
                   max_points_correct=ex.points_correct, max_points_speed=ex.points_speed)
    slower, unknown = dryrun.rejudge(fast, 1.8)
    assert slower.speed_passed is False and not unknown
    assert scoring.points(slower).speed == 0 < scoring.points(fast).speed
    failed = dataclasses.replace(fast, speed_passed=False, gate=1.7)
    _, unknown = dryrun.rejudge(failed, 1.5)
    assert unknown  # over the new gate: its lesson is judged only by timing it again


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
