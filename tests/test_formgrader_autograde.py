"""formgrader's Autograde button, and ``nbgrader autograde``, are turned off in this course:
both say to run ``tilelab grade`` and change nothing (the class run's own autograde, which
runs sandboxed, stays on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from support.classroom import copy_course, submission, write_submissions

from tilelab.classroom import course, formgrader

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # in nbgrader

REPO = Path(__file__).resolve().parents[1]


def placed(root: Path) -> Path:
    """A course with one released notebook submitted and an autograded copy of it (as a
    class run leaves one), whose path is returned."""
    copy_course(root)
    data = json.dumps(submission("01-naive", {})).encode()
    write_submissions(root, {("dana", "01-naive"): data})
    course.ensure_in_gradebook(course.open_api(root), "01-naive")
    graded = root / "autograder" / "autograded" / "dana" / "01-naive" / "naive.ipynb"
    graded.parent.mkdir(parents=True)
    graded.write_bytes(data)
    return graded


def test_formgraders_autograde_button_says_to_run_tilelab_grade(tmp_path):
    """What the button's handler calls (``NbGraderAPI.autograde`` under the course's
    configuration, as formgrader loads it): refused, the message in the log it shows, and
    the autograded notebook the class run wrote still there."""
    graded = placed(tmp_path / "course")
    config = course.load_config(tmp_path / "course")
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result = api.autograde("01-naive", "dana")
    assert not result["success"]
    assert "tilelab grade" in result["log"] and formgrader.MESSAGE in result["log"]
    assert graded.is_file()  # made before anything of the submission is touched


def test_nbgrader_autograde_says_to_run_tilelab_grade(tmp_path):
    graded = placed(tmp_path / "course")
    out = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", "01-naive", "--student", "dana",
         "--force"], cwd=tmp_path / "course" / "autograder", capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode != 0
    assert "tilelab grade" in out.stdout + out.stderr
    assert graded.is_file()


def test_the_class_runs_own_autograde_stays_on(tmp_path):
    copy_course(tmp_path / "course")
    assert "exporter_class" in course.load_config(tmp_path / "course").Autograde
    api = course.open_api(tmp_path / "course", sandboxed=True)
    assert "exporter_class" not in api.config.Autograde
