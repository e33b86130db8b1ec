"""The class run's summary: one schema wherever its tasks ran, and its short table.

``tilelab grade`` ends with :func:`table` on a terminal and the whole summary with
``--json``. Keys: ``backend``, ``gpu``, ``speed_measured``, ``award_speed_without_gpu``,
``gates``, ``executor`` (where the tasks ran), ``workers``, ``cluster_start_seconds``,
``submissions`` (one entry per graded submission), ``failures``, ``graded``,
``up_to_date``, ``timings`` (each task's seconds, worker and start), ``wall_seconds``,
``timing`` (per-task statistics), ``csv`` and ``kernels_csv``, ``missing`` (student and
assignment with no submitted folder), ``class`` (the whole gradebook's points after the
run: :func:`standing`), and where they apply ``note`` (no GPU) and ``unknown_students``.
A failure's ``error`` is one line (why, in a sentence); ``detail`` keeps nbgrader's whole
log where the sentence was made from one.
"""

from __future__ import annotations

import statistics
import textwrap
from typing import Any

from tilelab.classroom.escape import terminal_text
from tilelab.classroom.standing import Standing
from tilelab.classroom.task import Result

#: a failure of these steps is reported by its reason, not by nbgrader's log
LOGGED_STEPS = ("autograde", "generate_feedback")
#: the most rows of the closing student x assignment table (grades.csv has them all)
TABLE_ROWS = 40


def start(backend: str | None, award: bool, gates: dict[str, float],
          executor: str) -> dict[str, Any]:
    """The summary before any submission is graded (``backend`` None: each worker's own)."""
    return {
        "backend": backend,
        "gpu": None,
        "speed_measured": backend == "gpu",
        "award_speed_without_gpu": award,
        "gates": gates,
        "executor": executor,
        "workers": 0,
        "cluster_start_seconds": 0.0,
        "submissions": [],
        "failures": [],
        "graded": 0,
        "up_to_date": 0,
        "timings": [],
        "missing": [],
    }


def add(summary: dict[str, Any], result: Result) -> None:
    """One recorded result: its entry, its failures, its timing."""
    summary["submissions"].append(
        {**result.summary, "seconds": round(result.seconds, 2), "worker": result.worker}
    )
    summary["failures"].extend(one_line(result))
    summary["timings"].append({
        "student": result.student, "assignment": result.assignment,
        "seconds": round(result.seconds, 2), "worker": result.worker,
        "started": round(result.started, 3),
    })
    summary["graded"] += 1
    if summary["backend"] is None and result.backend:
        summary["backend"] = result.backend
        summary["speed_measured"] = result.backend == "gpu"
    if result.gpu:
        summary["gpu"] = result.gpu


def one_line(result: Result) -> list[dict[str, Any]]:
    """A result's failures, each ``error`` one sentence: for nbgrader's steps, the reason
    the grader found (a notebook that is not readable, from the verdict) or the log's last
    line, with the log kept as ``detail``; a feedback failure that follows an autograde
    failure of the same submission is left out (it says the same)."""
    said = {m.removeprefix("not graded (0 points): ") for ms in
            result.summary.get("messages", {}).values() for m in ms[:1]
            if m.startswith("not graded (0 points): ")}
    out: list[dict[str, Any]] = []
    steps = {f.get("step") for f in result.failures}
    for f in result.failures:
        step, error = f.get("step"), str(f.get("error", ""))
        if step not in LOGGED_STEPS:
            out.append(f)
            continue
        if step == "generate_feedback" and "autograde" in steps:
            continue
        lines = [ln.strip() for ln in error.strip().splitlines() if ln.strip()
                 and not ln.strip().startswith(("[", "Please see"))]
        why = next(iter(sorted(said)), "") or (lines[-1] if lines else "nbgrader failed")
        out.append({**f, "error": f"nbgrader's {step} failed: {why}", "detail": error})
    return out


def standing(summary: dict[str, Any], table: Standing, assignments: list[str]) -> None:
    """The gradebook's points after the run (every student of it), for ``assignments``."""
    got, most = table.total(assignments)
    summary["class"] = {
        "assignments": {a: table.assignments.get(a, 0.0) for a in assignments},
        "score": got,
        "max_score": most,
        "students": {s.id: {a: table.score(s.id, a) for a in assignments}
                     for s in table.students},
    }


def finish(summary: dict[str, Any], wall: float) -> None:
    """Times of the whole run, and the note on speed where no GPU measured it."""
    summary["wall_seconds"] = round(wall, 2)
    summary["timing"] = timing(summary["timings"], summary["wall_seconds"])
    if summary["backend"] not in ("gpu", None):
        summary["note"] = (
            "no GPU: speed and lesson points were not measured (the emulator's bank-conflict "
            "degree and traffic are feedback only); they were "
            + ("awarded anyway (as asked)" if summary["award_speed_without_gpu"]
               else "not awarded")
        )


def timing(timings: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """Per-task time and throughput of a run."""
    seconds = [t["seconds"] for t in timings if t["seconds"] > 0]
    if not seconds:
        return {"tasks": 0, "wall_seconds": wall}
    return {
        "tasks": len(seconds),
        "wall_seconds": wall,
        "task_seconds_mean": round(statistics.fmean(seconds), 2),
        "task_seconds_median": round(statistics.median(seconds), 2),
        "task_seconds_max": round(max(seconds), 2),
        "submissions_per_minute": round(len(timings) / wall * 60, 2) if wall > 0 else None,
    }


def table(summary: dict[str, Any], width: int = 100) -> str:
    """The run on a terminal: what it graded and what it did not (and why), the points of
    this run and of the whole class, its time, then a student x assignment table of the
    class's points ("-": nothing submitted). Every line is printed inert (a name or a
    message with control characters shows them as escapes)."""
    subs = summary["submissions"]
    score = sum(s.get("score", 0.0) for s in subs)
    most = sum(s.get("max_score", 0.0) for s in subs)
    on = f"GPU {summary['gpu']}" if summary.get("gpu") else f"backend {summary['backend']}"
    klass = summary.get("class") or {}
    lines = [
        f"graded    this run: {len(subs)} submission(s) of "
        f"{len({s['student'] for s in subs})} student(s) on {on}, {summary['executor']}; "
        f"{summary['up_to_date']} up to date, not graded again",
        f"points    this run: {score:g} of {most:g}"
        + (f"; class: {klass['score']:g} of {klass['max_score']:g}"
           + (f" ({klass['score'] / klass['max_score']:.0%})" if klass["max_score"] else "")
           if klass else ""),
        f"time      {summary.get('wall_seconds', 0.0):g} s"
        + (f"; {summary['timing']['task_seconds_mean']:g} s per submission"
           if summary.get("timing", {}).get("tasks") else ""),
    ]
    missing = summary.get("missing") or []
    if missing:
        lines.append(f"missing   {len(missing)} submission(s), not graded: nothing under "
                     "submitted/ for")
        lines += _wrapped(", ".join(f"{m['student']} {m['assignment']}" for m in missing),
                          width)
    lines.append(f"failures  {len(summary['failures'])}")
    for f in summary["failures"]:
        who = " ".join(x for x in (f.get("student"), f.get("assignment")) if x) or "the run"
        said = " ".join(str(f.get("error", "")).split())
        lines += textwrap.wrap(f"{who} ({f.get('step', '?')}): {said}", width,
                               initial_indent="  ", subsequent_indent="    ", max_lines=3,
                               placeholder=" ...")
    if summary.get("note"):
        lines.append(f"note      {summary['note']}")
    for key, what in (("csv", "grades"), ("kernels_csv", "per kernel")):
        if summary.get(key):
            lines.append(f"{what:<9} {summary[key]}")
    if klass.get("students"):
        lines += ["", *points_table(klass)]
    return "\n".join(map(terminal_text, lines))


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="  ")


def points_table(klass: dict[str, Any], rows: int = TABLE_ROWS) -> list[str]:
    """Students down, assignments across, each cell ``points/most`` ("-": not submitted),
    a total per student; past ``rows`` students, a line saying how many more."""
    names = list(klass["assignments"])
    students = list(klass["students"].items())
    first = max([len("student"), *(len(s) for s, _ in students[:rows])])
    cols = [max(len(a), len(f"{m:g}/{m:g}")) for a, m in klass["assignments"].items()]
    head = "  ".join([f"{'student':<{first}}",
                      *(f"{a:>{w}}" for a, w in zip(names, cols, strict=True)), "total"])
    out = [head]
    most = sum(klass["assignments"].values())
    for student, got in students[:rows]:
        cells, total = [], 0.0
        for (a, top), w in zip(klass["assignments"].items(), cols, strict=True):
            v = got.get(a)
            total += v or 0.0
            cell = "-" if v is None else f"{v:g}/{top:g}"
            cells.append(f"{cell:>{w}}")
        out.append("  ".join([f"{student:<{first}}", *cells, f"{total:g}/{most:g}"]))
    if len(students) > rows:
        out.append(f"... and {len(students) - rows} more student(s): see grades.csv")
    return out
