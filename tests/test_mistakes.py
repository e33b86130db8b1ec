"""Learner mistakes, each told its cause and its line: thirty across the six spine exercises
(``mistakes.json``), and races of every shape (``races.json``: a lost update, an atomic
beside a plain access, a missing barrier across loop trips, one element stored by several
lanes, an index error that looks like a race, a ``__device__`` array shared by blocks).

``tests/data/mistakes/<exercise>/*.cu`` are honest, buggy kernels (each one edit away from
the solution a learner writes); each manifest names, for each, the cause the feedback
must give (a pattern), whether its output is right (a bank-conflicted tile's is), the line
(or lines) it must name, and advice it must not give (``__syncwarp()`` for a race across
warps, a barrier for a lost update, the vague "indexing" catch-all, the naive kernel's
index hint for a tiled one).
Each is graded on the emulator in this process, as the grader's worker does; and none of
them, nor the grader's report on it, is ever taken for a reference solution shown in a
notebook.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tilelab.catalog import exercises
from tilelab.classroom import submissions
from tilelab.grading import scoring
from tilelab.grading.pipeline import evaluate
from tilelab.grading.verdict import Verdict

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "mistakes"
MANIFESTS = sorted(DATA.glob("*.json"))
CASES: list[dict[str, Any]] = [c for m in MANIFESTS for c in json.loads(m.read_text())]
THIRTY = json.loads((DATA / "mistakes.json").read_text())
BLOCKS = submissions.solution_blocks(
    sorted((Path(__file__).resolve().parent.parent / "solutions").glob("*/*.ipynb")))


def rate(case: dict[str, Any], v: Verdict) -> tuple[str, str]:
    """"right" (the cause and a line named, no wrong advice), "vague" or "wrong"; and why."""
    text = "\n".join(v.messages)
    if v.correct != case["output_correct"]:  # a slow kernel's output is right
        return "wrong", f"graded {'correct' if v.correct else 'wrong'}"
    for bad in case["forbidden"]:  # nor in the analysis table the notebook shows
        if re.search(bad, text) or re.search(bad, scoring.analysis_text(v)):
            return "wrong", f"says {bad!r}"
    if not re.search(case["cause"], text, re.S):
        return "vague", f"no {case['cause']!r}"
    if case["lines"] and not any(re.search(rf"\bline {n}\b", text) for n in case["lines"]):
        return "vague", f"names none of lines {case['lines']}"
    return "right", ""


def test_thirty_mistakes_across_every_exercise():
    assert len(THIRTY) == 30 and DATA / "races.json" in MANIFESTS
    spine = {"naive", "tiled", "transpose_shared", "transpose_padded", "matmul_at_padded",
             "regblock"}  # the six kernels of the course's spine (the others are steps)
    assert {c["exercise"] for c in THIRTY} == spine <= set(exercises.EXERCISES)
    assert {c["exercise"] for c in CASES} <= set(exercises.EXERCISES)
    assert all((DATA / c["file"]).is_file() for c in CASES)
    assert len({c["file"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["file"][:-3] for c in CASES])
def test_each_mistake_gets_its_cause_and_line(tmp_path, case):
    source = (DATA / case["file"]).read_text()
    v = evaluate(case["exercise"], source, "emu", speed=False)
    rating, why = rate(case, v)
    assert rating == "right", f"{why}\n" + "\n".join(v.messages)
    # an honest learner whose notebook shows this feedback is not taken for a cheat
    cell = nbformat.v4.new_code_cell(f'KERNEL = r"""{source}"""\ncheck(KERNEL)')
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=scoring.report(v)),
                    nbformat.v4.new_output("stream", name="stdout",
                                           text=scoring.analysis_text(v))]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nbformat.write(nb, tmp_path / "n.ipynb")
    secret = submissions.secret_windows(BLOCKS)
    assert submissions.solution_shown(tmp_path / "n.ipynb", secret, nbformat.writes(nb)) == 0
