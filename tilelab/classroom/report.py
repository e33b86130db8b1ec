"""``tilelab report``: what a class got wrong, per exercise, from the verdicts already recorded.

For each exercise: how many learners submitted it, attempted it (more than the released
stub), passed correctness and speed (or had speed not measured, without a GPU); the share
of each diagnosed cause among its wrong kernels (the diagnosis's own names,
:data:`tilelab.grading.diagnosis.CAUSES`, and the grader's other findings: a compile error,
a barrier only some threads reach, a race with right results, a kernel the subset refused),
and of each feedback class (the outcome a learner was told), most common first. Nothing is
graded again: it reads the verdict files the class run keeps (:mod:`tilelab.classroom.verdicts`).

Text for a terminal, ``--json``, or a static HTML page with a plot (every string on it
escaped; nothing on it runs).
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter
from typing import Any

from nbgrader.coursedir import CourseDirectory

from tilelab.catalog import exercises
from tilelab.classroom import verdicts as recorded_verdicts
from tilelab.classroom.escape import terminal_text
from tilelab.grading import scoring
from tilelab.grading.diagnosis import CAUSES
from tilelab.grading.verdict import Verdict

LIKELY = re.compile(r"Likely cause: ([^:.]+)")
NOT_ATTEMPTED = "not attempted (0 points)"


def cause(v: Verdict) -> str | None:
    """The diagnosed cause of a wrong kernel, in a few words (None for a correct one)."""
    if v.correct:
        return None
    said = [m for m in v.messages if not m.startswith("grading note:")]
    text = "\n".join(said)
    if v.error:
        return "the grader's own failure"
    if not v.compiled:
        first = said[0] if said else ""
        if first.startswith(NOT_ATTEMPTED):
            return "not attempted (the released stub)"
        if first.startswith("not graded"):
            return "not graded (the notebook or its kernel cell could not be read)"
        if first.startswith("the kernel does not compile"):
            return "does not compile"
        return "refused before it ran (outside the graded subset of CUDA C)"
    for found in LIKELY.findall(text):
        if found.strip() in CAUSES:
            return found.strip()
    for shape in v.shapes:
        c = str(shape.get("cause") or "").split(":", 1)[0].strip()
        if c in CAUSES:
            return c
    if "Barrier divergence" in text:
        return "barrier divergence"
    if "Out-of-bounds" in text:
        return "out of bounds"
    if v.races:
        return "race"
    if "not on the emulator, which runs the blocks" in text:
        return "right only in some block orders"
    return "wrong (no cause found)"


def feedback_class(v: Verdict, award: bool = False) -> str:
    """What the learner was told, as one of a few outcomes."""
    if v.correct:
        p = scoring.points(v, award)
        if not v.max_points_speed or p.speed >= v.max_points_speed:
            return "passed"
        if not scoring.speed_judged(v):
            return "correct; speed not measured"
        return "correct; too slow or the lesson skipped"
    c = cause(v) or ""
    if c.startswith(("not attempted", "not graded", "does not compile", "refused",
                     "the grader")):
        return c.split(" (")[0]
    if any("wrong" not in s for s in v.shapes if not s.get("ok")):
        return "the launch failed"
    return "wrong results"


def build(cd: CourseDirectory, assignments: list[str] | None = None) -> dict[str, Any]:
    """The class report as data: by exercise, in the course's order."""
    per: dict[str, dict[str, Any]] = {}
    learners: set[str] = set()
    for rec in recorded_verdicts.recorded(cd, assignments):
        learners.add(rec.student)
        for v in rec.verdicts:
            if v.exercise not in exercises.EXERCISES:
                continue
            e = per.setdefault(v.exercise, {"submitted": 0, "attempted": 0, "correct": 0,
                                            "speed_passed": 0, "speed_not_measured": 0,
                                            "causes": Counter(), "feedback": Counter()})
            e["submitted"] += 1
            c = cause(v)
            e["attempted"] += not (c or "").startswith("not attempted")
            e["correct"] += v.correct
            p = scoring.points(v, rec.award)
            e["speed_passed"] += bool(v.correct and v.max_points_speed
                                      and p.speed >= v.max_points_speed)
            e["speed_not_measured"] += bool(v.correct and v.max_points_speed
                                            and not scoring.speed_judged(v))
            if c:
                e["causes"][c] += 1
            e["feedback"][feedback_class(v, rec.award)] += 1
    out = []
    for exercise_id, e in sorted(per.items(), key=lambda kv: list(exercises.EXERCISES).index(
            kv[0])):
        ex = exercises.get(exercise_id)
        wrong = sum(e["causes"].values())
        out.append({
            "exercise": exercise_id,
            "assignment": ex.assignment,
            "speed_graded": ex.speed_graded,
            **{k: e[k] for k in ("submitted", "attempted", "correct", "speed_passed",
                                 "speed_not_measured")},
            "causes": _shares(e["causes"], wrong),
            "feedback": _shares(e["feedback"], e["submitted"]),
        })
    return {"learners": len(learners), "exercises": out}


def _shares(counts: Counter, total: int) -> list[dict[str, Any]]:
    """Most common first (ties by name): count and share of ``total``."""
    return [{"what": k, "count": n, "share": round(n / total, 4) if total else 0.0}
            for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _pct(n: int, total: int) -> str:
    return f"{n} ({n / total:.0%})" if total else str(n)


def text(report: dict[str, Any]) -> str:
    """The report on a terminal."""
    lines = [f"class report: {report['learners']} learner(s) with recorded verdicts"]
    for e in report["exercises"]:
        n = e["submitted"]
        speed = (f"speed passed {_pct(e['speed_passed'], n)}"
                 + (f", not measured {e['speed_not_measured']}" if e["speed_not_measured"]
                    else "") if e["speed_graded"] else "graded for correctness only")
        lines.append(f"{e['exercise']} ({e['assignment']}): {n} submitted, "
                     f"{e['attempted']} attempted; correct {_pct(e['correct'], n)}; {speed}")
        for key, what in (("causes", "causes"), ("feedback", "told")):
            if e[key]:
                lines.append(f"  {what}: " + "; ".join(
                    f"{c['what']} {c['count']} ({c['share']:.0%})" for c in e[key]))
    return "\n".join(map(terminal_text, lines))


def plot_png(report: dict[str, Any]) -> bytes:
    """One bar per exercise: its submissions by feedback class (stacked)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = report["exercises"]
    classes = sorted({c["what"] for e in rows for c in e["feedback"]},
                     key=lambda w: (w != "passed", w))
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rows) + 2), 4), dpi=100)
    bottom = [0] * len(rows)
    for what in classes:
        counts = [next((c["count"] for c in e["feedback"] if c["what"] == what), 0)
                  for e in rows]
        ax.bar([e["exercise"] for e in rows], counts, bottom=bottom, label=what)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.set_ylabel("submissions")
    ax.set_title("What each exercise's submissions were told")
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def page(report: dict[str, Any]) -> str:
    """A static HTML page: the plot (an embedded PNG) and a table per exercise; every
    string escaped, no script, no link out."""
    esc = html.escape
    png = base64.b64encode(plot_png(report)).decode() if report["exercises"] else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'\">",
        "<title>Class report</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px;"
        "text-align:left}</style></head><body>",
        f"<h1>Class report: {report['learners']} learner(s)</h1>",
    ]
    if png:
        parts.append(f'<img alt="submissions per exercise by feedback class" '
                     f'src="data:image/png;base64,{png}">')
    for e in report["exercises"]:
        n = e["submitted"]
        parts.append(f"<h2>{esc(e['exercise'])} ({esc(e['assignment'])})</h2>")
        parts.append(f"<p>{n} submitted, {e['attempted']} attempted; correct "
                     f"{esc(_pct(e['correct'], n))}"
                     + (f"; speed passed {esc(_pct(e['speed_passed'], n))}"
                        if e["speed_graded"] else "") + "</p>")
        for key, what in (("causes", "Diagnosed cause"), ("feedback", "Told")):
            if not e[key]:
                continue
            parts.append(f"<table><tr><th>{what}</th><th>count</th><th>share</th></tr>")
            parts += [f"<tr><td>{esc(c['what'])}</td><td>{c['count']}</td>"
                      f"<td>{c['share']:.0%}</td></tr>" for c in e[key]]
            parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
