"""The bad-submission corpus's second class run: the cases whose notebook misbehaves in its
cells, files or pages (:func:`test_corpus.shard_of`). tests/test_corpus.py holds the corpus
and the tests both runs share; the two modules run on two test workers side by side."""

from __future__ import annotations

import json

import pytest
from test_corpus import (  # noqa: F401  the tests both modules run
    class_run,
    files_of,
    needs,
    pytestmark,
    test_calibrated_gates_reach_every_verdict,
    test_every_case_is_caught_and_nobody_else_is_affected,
    test_no_submission_config_or_feedback_of_another_was_touched,
    test_only_students_of_the_gradebook_are_graded,
)

SHARD = "cells"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return class_run(tmp_path_factory, SHARD)


def test_no_cell_reached_the_network_or_the_course(corpus):
    root, summary = corpus
    assert summary["connections"] == 0
    feedback = root / "autograder" / "feedback"  # each marker is printed only on success
    markers = (("c03", "SQLite format"), ("c04", "GOT OTHER"), ("c05", "CONNECTED"),
               ("c08", "ALLOCATED"), ("c09", "WROTE"), ("c13", "FOUNDDB"),
               ("c13", "SQLite format"))
    needs(summary, *(student for student, _ in markers))
    for student, marker in markers:
        for path in files_of(feedback / student, "*.html"):
            assert marker not in path.read_text(errors="replace"), (student, path)


def test_no_learner_script_in_a_page_the_instructor_opens(corpus):
    from nbconvert import HTMLExporter
    from support.active_html import active_content

    from tilelab.classroom import course

    root, summary = corpus
    needs(summary, "a01", "n04")
    pages = {}
    for student in ("aaron", "a01", "n04"):
        feedback = root / "autograder" / "feedback" / student / "01-naive" / "naive.html"
        autograded = root / "autograder" / "autograded" / student / "01-naive" / "naive.ipynb"
        assert feedback.is_file() and autograded.is_file(), student
        # formgrader's page: the exporter as the course's configuration makes it
        exporter = HTMLExporter(config=course.load_config(root))
        pages[student] = (feedback.read_text(), exporter.from_filename(str(autograded))[0])
    fb_base, ag_base = pages.pop("aaron")
    assert pages
    for student, (fb, ag) in pages.items():
        assert "alert(" in fb, student  # its text is there, as text
        assert active_content(fb, fb_base) == [], student
        assert active_content(ag, ag_base) == [], student


def test_the_csv_says_where_a_submission_time_came_from(corpus):
    import csv

    from tilelab.classroom import grades_csv

    _, summary = corpus
    with open(summary["csv"], encoding="utf-8") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    needs(summary, "t01")
    assert rows["t01"]["timestamp"].startswith("2000-01-01")
    assert rows["t01"]["timestamp_from"] == grades_csv.TIMESTAMP_FROM
    assert rows["aaron"]["timestamp_from"] == ""  # no timestamp.txt: none claimed


def test_outputs_are_capped(corpus):
    root, summary = corpus
    capped = ("c10", "w01", "d01", "d05", "d06", "n01")
    needs(summary, *capped)
    for student in capped:  # and nothing large copied (a refused one has no notebook run)
        kept = [p for kind in ("autograded", "feedback")
                for p in (root / "autograder" / kind / student).rglob("*") if p.is_file()]
        assert kept, student  # its feedback at least: what the caps are measured on
        for path in kept:
            assert path.stat().st_size < 16 * 1024**2, path
    for path in files_of(root / "autograder" / "autograded" / "w01", "*.ipynb"):
        assert "widgets" not in json.loads(path.read_text())["metadata"]
