"""The instructor's tools on a generated class: grade it, then time ``tilelab report``,
``similarity``, both exports and ``grade --dry-run``, and print an excerpt of each.

The class (``--students`` learners, 01-naive: add2d and naive) comes from
``tests/support/classgen.py``: the reference, recorded mistakes, fixtures and stubs, each in
the learner's own style, and ``--copiers`` learners who hand in another's kernels under
other names (how many of those pairs similarity finds, and what else it lists, is printed).

    python benchmarks/instructor_tools.py [--students 24] [--copiers 3] [--seed 54]
                                          [--out DIR] [--no-sandbox] [--backend gpu]
                                          [--gates-scaled 1.25]

Runs on the CPU emulator by default (no GPU needed); ``--backend gpu`` grades with speed
measured, and ``--gates-scaled F`` makes the dry run judge every recorded verdict against
gates F times the registry's (on a GPU: the speed verdicts a stricter gate would flip).
From the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support import classgen  # noqa: E402
from support.classroom import (  # noqa: E402
    copy_course,
    enrol,
    kernel_cell,
    released_stub,
    submission,
)

from tilelab import classroom  # noqa: E402
from tilelab.catalog import exercises  # noqa: E402
from tilelab.classroom import dryrun, export, report, similarity  # noqa: E402
from tilelab.classroom.summary import table  # noqa: E402


def timed(what: str, times: dict[str, float], fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    times[what] = round(time.perf_counter() - t0, 2)
    return out


def excerpt(text: str, lines: int = 12) -> str:
    rows = text.splitlines()
    return "\n".join(rows[:lines] + ([f"... ({len(rows) - lines} more lines)"]
                                     if len(rows) > lines else []))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=24)
    ap.add_argument("--copiers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--out", type=Path, default=None, help="where the outputs are kept")
    ap.add_argument("--no-sandbox", action="store_true")
    ap.add_argument("--backend", choices=("emu", "gpu"), default="emu")
    ap.add_argument("--gates-scaled", type=float, default=1.0)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="instructor-tools-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="instructor-class-")) / "course"
    copy_course(root)
    nb = REPO / "exercises" / "01-naive" / "naive.ipynb"
    sol = REPO / "solutions" / "01-naive" / "naive.ipynb"
    made = classgen.generate(a.students, a.seed,
                             {e: classroom.extract_kernel(sol, e) for e in ("add2d", "naive")},
                             {e: classroom.extract_kernel(nb, e) for e in ("add2d", "naive")},
                             a.copiers)
    for student, cells in made.notebooks.items():
        folder = root / "autograder" / "submitted" / student / "01-naive"
        folder.mkdir(parents=True)
        (folder / "naive.ipynb").write_bytes(
            classgen.notebook_bytes(submission, kernel_cell, released_stub, cells))
    enrol(root, [*sorted(made.notebooks), "absent001"])
    times: dict[str, float] = {}
    summary = timed("grade", times, classroom.grade_class, root, backend=a.backend,
                    progress=False, sandboxed=not a.no_sandbox)
    cd = classroom.open_api(root).coursedir
    doc = timed("report", times, report.build, cd)
    report_text = report.text(doc)
    (out / "report.html").write_text(timed("report_html", times, report.page, doc))
    found = timed("similarity", times, similarity.find, cd)
    similar_text = similarity.text(found)
    (out / "similarity.html").write_text(similarity.page(found))
    timed("export_canvas", times, export.canvas, cd, out / "canvas.csv")
    written = timed("export_gradescope", times, export.gradescope, cd, out / "gradescope")
    gates = {e.id: e.gate * a.gates_scaled for e in exercises.EXERCISES.values()}
    flips = timed("dry_run", times, dryrun.flips, cd, gates)
    planted = {tuple(sorted(p)) for p in made.copied}
    listed = {tuple(sorted(p["students"])) for p in found["pairs"]}
    doc_out = {"students": a.students, "copiers": a.copiers, "seed": a.seed, "times": times,
               "graded": summary["graded"], "failures": len(summary["failures"]),
               "planted": sorted(planted), "found": sorted(listed),
               "planted_found": len(planted & listed), "other_pairs": len(listed - planted),
               "kinds": made.kinds, "gradescope_files": len(written),
               "dry_run_flips": len(flips["flips"])}
    (out / "instructor_tools.json").write_text(json.dumps(doc_out, indent=1) + "\n")
    for name, text in (("grade (closing table)", table(summary)), ("report", report_text),
                       ("similarity", similar_text),
                       ("canvas.csv", (out / "canvas.csv").read_text()),
                       ("a results.json", written[0].read_text() if written else ""),
                       ("dry run", dryrun.text(flips))):
        print(f"--- {name}\n{excerpt(text, 16)}")
    print(f"--- outputs in {out}")
    print(f"{'step':<18} {'seconds':>8}")
    for what, s in times.items():
        print(f"{what:<18} {s:>8}")
    print(f"class: {a.students} learners ({summary['graded']} graded, "
          f"{len(summary['failures'])} failures); similarity: {len(planted & listed)} of "
          f"{len(planted)} planted copies found, {len(listed - planted)} other pair(s) listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
