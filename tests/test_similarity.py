"""``tilelab similarity`` on a generated class (no grading: the kernels are read from the
submitted notebooks): the planted copies are found with their matched lines, honest
kernels that differ from the reference only by their names are not paired (the reference
is among the book's listings: boilerplate), and every learner string is escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import classgen
from support.classroom import copy_course, enrol, kernel_cell, released_stub, submission

from tilelab import classroom, cli
from tilelab.classroom import similarity

REPO = Path(__file__).resolve().parents[1]
STUDENTS = 14


def stub(exercise_id: str) -> str:
    return classroom.extract_kernel(REPO / "exercises" / "01-naive" / "naive.ipynb",
                                    exercise_id)


def solution(exercise_id: str) -> str:
    return classroom.extract_kernel(REPO / "solutions" / "01-naive" / "naive.ipynb",
                                    exercise_id)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("similar") / "course"
    copy_course(root)
    made = classgen.generate(STUDENTS, seed=54, solution={e: solution(e) for e in
                                                          ("add2d", "naive")},
                             stub={e: stub(e) for e in ("add2d", "naive")}, copiers=2)
    made.notebooks["<b>x\x1b]52;c;evil\x07"] = made.notebooks[made.copied[0][0]]
    for student, cells in made.notebooks.items():
        folder = root / "autograder" / "submitted" / student / "01-naive"
        folder.mkdir(parents=True)
        (folder / "naive.ipynb").write_bytes(
            classgen.notebook_bytes(submission, kernel_cell, released_stub, cells))
    enrol(root, sorted(made.notebooks))
    cd = classroom.open_api(root).coursedir
    return root, made, similarity.find(cd)


def test_the_planted_copies_are_found_with_their_matched_lines(generated):
    _, made, found = generated
    assert len(made.copied) == 2
    pairs = {(p["exercise"], tuple(sorted(p["students"]))): p for p in found["pairs"]}
    for original, copier in made.copied:
        p = pairs.get(("naive", tuple(sorted((original, copier)))))
        assert p is not None, (original, copier, sorted(pairs))
        assert min(p["similarity"]) >= similarity.THRESHOLD
        assert all(p["lines"]), p["lines"]  # each side's matched lines


def test_kernels_that_are_the_reference_under_other_names_are_not_paired(generated):
    """The book prints each step's reference: its fingerprints are boilerplate."""
    _, made, found = generated
    plain = {s for s, kinds in made.kinds.items() if kinds.get("naive") == "reference"}
    assert len(plain) >= 2, made.kinds
    for p in found["pairs"]:
        if p["exercise"] == "naive":
            assert not set(p["students"]) <= plain, p["students"]
    assert found["boilerplate_texts"] > 2 and found["medians"]["naive"] < similarity.THRESHOLD


def test_learner_strings_are_escaped_on_the_terminal_and_the_page(generated):
    _, _, found = generated
    shown = similarity.text(found)
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b]52" in shown
    page = similarity.page(found)
    assert "<b>x" not in page and "&lt;b&gt;x" in page
    assert "<script" not in page.lower()


def test_the_command_prints_json_and_writes_the_page(generated, tmp_path, capsys):
    root, _, _ = generated
    out = tmp_path / "similar.html"
    assert cli.main(["similarity", "--course", str(root), "--json", "--html", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"] and doc["advisory"] and out.read_text().startswith("<!DOCTYPE html>")
