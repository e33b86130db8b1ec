"""The instructors' page's term, run as written: every command block of *One term, command
by command* (``book/appendix/instructors.md``), in order, in a copy of the course with an
exchange folder of its own and a home folder for the learner (nbgrader's exchange takes
the learner from ``--student``, so one account, root here, plays everyone).

Between the learner's fetch and submit, the learner writes the reference kernels into the
fetched notebook; the hand-placed submission is a released notebook with the naive
kernel wrong. After the blocks: the collected and the placed submissions were graded, the
missing learner was named, feedback reached the learner through the exchange, and each
export and tool wrote what the page says.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.classroom import (
    FIXTURES,
    SANDBOXED,
    copy_course,
    kernel_cell,
    released_stub,
    solution_kernel,
    submission,
)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not SANDBOXED, reason="tilelab grade needs bubblewrap here")]

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "book" / "appendix" / "instructors.md"
SECTION = "## One term, command by command"
BLOCK = re.compile(r"^```(bash|\{code-block\} text)\n(.*?)^```$", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    """The section's blocks in order: ("bash", script) or ("file:PATH", content)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    out = []
    for m in BLOCK.finditer(text[start:end]):
        kind, body = m.groups()
        if kind == "bash":
            out.append(("bash", body))
        else:
            caption, _, content = body.partition("\n")
            out.append(("file:" + caption.removeprefix(":caption:").strip(), content))
    return out


def test_the_section_is_found_and_its_blocks_say_who_runs_them():
    found = blocks()
    assert len(found) >= 10, found
    for kind, body in found:
        if kind == "bash":
            assert body.startswith(("# instructor, in the course repository\n",
                                    "# learner, in their own folder\n")), body[:60]


def cells(**kernels: str) -> dict[str, str]:
    return {e: kernel_cell(released_stub(e), src) for e, src in kernels.items()}


def write_kernels(notebook: Path, kernels: dict[str, str]) -> None:
    """The learner's work: kernel cells of the fetched notebook replaced."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        exercise_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
        if exercise_id.removeprefix("kernel_") in kernels:
            cell["source"] = kernels[exercise_id.removeprefix("kernel_")]
    notebook.write_text(json.dumps(nb), encoding="utf-8")


def test_one_term_as_the_page_writes_it(tmp_path):
    course, home, exchange = tmp_path / "course", tmp_path / "home", tmp_path / "exchange"
    copy_course(course)
    home.mkdir()
    exchange.mkdir()
    (course / "_config.yml").write_text((REPO / "_config.yml").read_text())  # the course URL
    mail = home / "mail" / "bob"
    mail.mkdir(parents=True)
    wrong = (FIXTURES / "naive-wrong_result.cu").read_text()
    (mail / "naive.ipynb").write_text(json.dumps(submission("01-naive", cells(
        add2d=solution_kernel("add2d"), naive=wrong))))
    bindir = str(Path(sys.executable).parent)
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)},
           "HOME": str(home), "EXCHANGE": str(exchange), "TILELAB_BACKEND": "emu",
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO), "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}
    said = []
    for kind, body in blocks():
        if kind.startswith("file:"):
            (course / kind.removeprefix("file:")).write_text(body, encoding="utf-8")
            continue
        learner = body.startswith("# learner")
        if learner and "nbgrader submit" in body:
            write_kernels(home / "01-naive" / "naive.ipynb", {
                e: kernel_cell(released_stub(e), solution_kernel(e))
                for e in ("add2d", "naive")})
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body],
                              cwd=home if learner else course, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, f"{body}\n--- stdout\n{proc.stdout[-4000:]}\n" \
                                     f"--- stderr\n{proc.stderr[-4000:]}"
        said.append((body, proc.stdout + proc.stderr))
    auto = course / "autograder"
    assert (auto / "submitted" / "alice" / "01-naive" / "submission_secret.txt").is_file()
    grading = next(out for body, out in said if "tilelab grade\n" in body)
    assert "missing   1 submission(s)" in grading and "carol 01-naive" in grading, grading
    assert "this run: 0 graded" not in grading  # the first run graded alice and bob
    rows = {(r["student_id"], r["assignment"]): float(r["score"])
            for r in csv.DictReader((auto / "grades.csv").open())}
    assert rows[("alice", "01-naive")] == 5 and rows[("bob", "01-naive")] == 2
    trail = [json.loads(ln) for ln in (auto / "regrades.jsonl").read_text().splitlines()] \
        if (auto / "regrades.jsonl").exists() else []
    assert all(e["why"] == "bob asked for a regrade" for e in trail)
    assert list((home / "01-naive" / "feedback").glob("*/naive.html"))
    assert (home / "mail" / "bob" / "feedback-01-naive" / "tilelab_verdict.txt").is_file()
    canvas = list(csv.reader((auto / "canvas.csv").open()))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert {r[2]: r[1] for r in canvas[2:]}["alice"] == "1001"
    assert (auto / "gradescope" / "alice" / "01-naive" / "results.json").is_file()
    assert (auto / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert (auto / "nbgrader-grades.csv").is_file()
