"""A PostgreSQL gradebook through nbgrader's own ``db_url``, on a real server.

The fixture starts a PostgreSQL server on this machine (see ``postgres_server``) and
stops it after; the course's ``nbgrader_config.py`` names it. A class run records every
grade there through its one writer (wherever its tasks ran: each task grades in a private
SQLite gradebook), and a rerun changes nothing in any table.
"""

from __future__ import annotations

import postgres_server
import pytest
from nbgrader.api import Gradebook
from sqlalchemy import create_engine, inspect, text
from support.classroom import EMU, SANDBOXED, expected_points, small_class

from tilelab import classroom

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]
STUDENTS = ["alice", "bob", "mallory"]


@pytest.fixture(scope="module")
def postgres():
    """The URL of a running PostgreSQL server (no database name)."""
    why = postgres_server.unavailable()
    if why:
        pytest.skip(why)
    with postgres_server.server() as url:
        yield url


def dump(url: str) -> dict[str, list[str]]:
    """Every row of every table, as text."""
    engine = create_engine(url)
    try:
        with engine.connect() as con:
            return {
                table: sorted(map(repr, con.execute(text(f'SELECT * FROM "{table}"'))))
                for table in sorted(inspect(con).get_table_names())
            }
    finally:
        engine.dispose()


def test_a_class_run_records_in_postgresql(tmp_path, postgres):
    url = postgres_server.create_database(postgres, "gradebook_class")
    root = tmp_path / "course"
    small_class(root, STUDENTS)
    config = root / "autograder" / "nbgrader_config.py"
    config.write_text(config.read_text() + f"\nc.CourseDirectory.db_url = {url!r}\n")
    (root / "autograder" / "gradebook.db").unlink()  # the class is enrolled in PostgreSQL
    with Gradebook(url, "tilelab") as gb:
        for student in STUDENTS:
            gb.update_or_create_student(student)

    summary = classroom.grade_class(root, backend="emu", progress=False, sandboxed=SANDBOXED)
    assert summary["failures"] == [] and summary["graded"] == len(STUDENTS)
    assert not (root / "autograder" / "gradebook.db").exists()  # nothing went to SQLite
    want = expected_points(EMU)
    with Gradebook(url, "tilelab") as gb:
        for student in STUDENTS:
            grades = {g.name: g.score for g in gb.find_submission_notebook(
                "naive", "01-naive", student).grades}
            got = (grades["test_naive_correct"], grades["test_naive_speed"])
            assert got == want[student]["naive"], student
            comment = gb.find_comment("kernel_naive", "naive", "01-naive", student)
            assert comment.manual_comment and "naive" in comment.manual_comment
    before = dump(url)
    assert len(before["grade"]) > 0

    again = classroom.grade_class(root, backend="emu", progress=False, sandboxed=SANDBOXED)
    assert again["graded"] == 0 and again["up_to_date"] == len(STUDENTS)
    assert dump(url) == before
