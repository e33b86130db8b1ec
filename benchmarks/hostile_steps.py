"""What each class of hostile notebook costs the grader: its time and peak memory.

``python benchmarks/hostile_steps.py [CASE ...] [--out FILE]``: for each case, a course
with one honest student and that case's student (the released 01-naive notebook with the
reference kernel, plus the case's edit) graded by ``tilelab grade``'s pipeline on the
emulator, sandboxed, in a fresh process of its own; prints one line per case and a table
last: the run's wall seconds, the grader's own peak memory (its process's maximum resident
set) and its largest child's, the sizes of the case's autograded notebook and feedback
page, its points for the naive kernel, and the first note it was given. Run from any
checkout (PYTHONPATH picks the tree measured): the cases use only ``grade_class``.

Cases: ``display`` (96 outputs under one display id, then one 8 MiB update), ``latex144``
and ``latex288`` (that many KB of unmatched ``\\begin{x}`` in a markdown cell), ``cells``
(60,000 empty cells), ``honest`` (the honest student alone).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the course's test helpers build the class
CASES = ("honest", "display", "latex144", "latex288", "cells")


def edit(nb: dict, case: str) -> dict:
    from support import hostile_steps

    if case == "display":
        nb["cells"].append(hostile_steps.code_cell(hostile_steps.DISPLAY_BOMB))
    elif case.startswith("latex"):
        nb["cells"].append(hostile_steps.unmatched_begins(int(case[5:])))
    elif case == "cells":
        nb["cells"] += hostile_steps.empty_cells()
    return nb


def one(case: str) -> dict:
    """Grade the case's class in this process; what it cost."""
    from support.classroom import (
        copy_course,
        kernel_cell,
        released_stub,
        solution_kernel,
        submission,
        write_submissions,
    )

    from tilelab import classroom

    root = Path(tempfile.mkdtemp(prefix="hostile-steps-")) / "course"
    copy_course(root)
    cell = kernel_cell(released_stub("naive"), solution_kernel("naive"))
    files = {("aaron", "01-naive"): json.dumps(submission("01-naive", {"naive": cell})).encode()}
    if case != "honest":
        files[("mallory", "01-naive")] = json.dumps(
            edit(submission("01-naive", {"naive": cell}), case)).encode()
    write_submissions(root, files)
    t0 = time.monotonic()
    summary = classroom.grade_class(root, backend="emu", progress=False, sandboxed=True)
    wall = time.monotonic() - t0
    who = "mallory" if case != "honest" else "aaron"
    entry = next((s for s in summary["submissions"] if s["student"] == who), {})
    a = root / "autograder"
    size = {p: (a / p / who / "01-naive" / f).stat().st_size
            if (a / p / who / "01-naive" / f).exists() else 0
            for p, f in (("autograded", "naive.ipynb"), ("feedback", "naive.html"))}
    notes = entry.get("notes") or [f.get("error", "")[:160] for f in summary["failures"]
                                   if f.get("student") == who]
    return {
        "case": case, "seconds": round(wall, 1),
        "grader_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "child_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
        "autograded_mib": round(size["autograded"] / 2**20, 2),
        "feedback_mib": round(size["feedback"] / 2**20, 2),
        "naive_points": entry.get("points", {}).get("naive", {}).get("correct"),
        "note": (notes[0] if notes else "")[:160],
        "aaron_ok": any(s["student"] == "aaron"
                        and s.get("points", {}).get("naive", {}).get("correct") == 3.0
                        for s in summary["submissions"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child: one case
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one)))
        return
    rows = []
    for case in a.cases:
        proc = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True,
                              text=True, env=os.environ)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        row = json.loads(lines[-1]) if lines else {"case": case, "note": proc.stderr[-300:]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{'case':9} {'s':>7} {'grader MiB':>10} {'child MiB':>9} {'autograded':>10} "
          f"{'feedback':>8} {'points':>6}  note")
    for r in rows:
        print(f"{r['case']:9} {r.get('seconds', '-'):>7} {r.get('grader_peak_mib', '-'):>10} "
              f"{r.get('child_peak_mib', '-'):>9} {r.get('autograded_mib', '-'):>10} "
              f"{r.get('feedback_mib', '-'):>8} {r.get('naive_points', '-')!s:>6}  "
              f"{r.get('note', '')[:70]}")


if __name__ == "__main__":
    main()
