"""A new gradebook is stamped with the head of nbgrader's migrations, read in this process.

nbgrader finds that head by running ``alembic heads`` in a new process, which imports all
of nbgrader (seconds of CPU for every gradebook made: each class run's template, each
course's first write). The course reads the same head from the same folder once per
process, and keeps nbgrader's own answer wherever the folder does not name one head.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from nbgrader import api as nbgrader_api
from nbgrader import dbutil
from nbgrader.api import Gradebook

from tilelab.classroom import course


def stamped(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return [row[0] for row in con.execute("SELECT version_num FROM alembic_version")]


@pytest.mark.slow
def test_a_new_gradebook_gets_nbgraders_own_stamp_without_a_new_process(tmp_path, monkeypatch):
    course._alembic_on_path()
    own = course._NBGRADERS_OWN()  # `alembic heads`, as nbgrader runs it
    course.gradebook_head_in_process()

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(nbgrader_api.sp, "check_output", no_process)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", "tilelab"):
        pass
    assert stamped(tmp_path / "gradebook.db") == [own]


@pytest.mark.slow
def test_where_the_migrations_have_two_heads_nbgraders_own_answer_stands(tmp_path, monkeypatch):
    from alembic.script import ScriptDirectory

    newest = ScriptDirectory(dbutil.ALEMBIC_DIR).get_revision("head")
    folder = tmp_path / "alembic"
    shutil.copytree(dbutil.ALEMBIC_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "versions" / "ffffffffffff_a_second_head.py").write_text(
        '"""A second head beside the newest."""\n'
        "revision = 'ffffffffffff'\n"
        f"down_revision = {newest.down_revision!r}\n"  # the newest one's parent: a branch
        "branch_labels = None\ndepends_on = None\n\n"
        "def upgrade():\n    pass\n\n\ndef downgrade():\n    pass\n"
    )
    monkeypatch.setattr(dbutil, "ALEMBIC_DIR", str(folder))
    with pytest.raises(Exception, match="head"):  # the in-process reading refuses two
        ScriptDirectory(str(folder)).get_current_head()
    answers, real = [], course._NBGRADERS_OWN

    def nbgraders_own() -> str:
        answers.append(real())
        return answers[-1]

    monkeypatch.setattr(course, "_NBGRADERS_OWN", nbgraders_own)
    assert course._alembic_head.__wrapped__() == answers[0] and len(answers) == 1
