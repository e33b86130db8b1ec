"""The class run's summary: one schema wherever its tasks ran, and its short table.

``tilelab grade`` ends with :func:`table` on a terminal and the whole summary with
``--json``. Keys: ``backend``, ``gpu``, ``speed_measured``, ``award_speed_without_gpu``,
``gates``, ``executor`` (where the tasks ran), ``workers``, ``cluster_start_seconds``,
``submissions`` (one entry per graded submission), ``failures``, ``graded``,
``up_to_date``, ``timings`` (each task's seconds, worker and start), ``wall_seconds``,
``timing`` (per-task statistics), ``csv`` and ``kernels_csv``, and where they apply
``note`` (no GPU) and ``unknown_students``.
"""

from __future__ import annotations

import statistics
from typing import Any

from tilelab.classroom.escape import terminal_text
from tilelab.classroom.task import Result


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
    }


def add(summary: dict[str, Any], result: Result) -> None:
    """One recorded result: its entry, its failures, its timing."""
    summary["submissions"].append(
        {**result.summary, "seconds": round(result.seconds, 2), "worker": result.worker}
    )
    summary["failures"].extend(result.failures)
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
    """A few lines for the terminal: students, submissions, points, failures and why, time
    (every control character of a name or a message written visibly: it is printed)."""
    subs = summary["submissions"]
    students = {s["student"] for s in subs}
    score = sum(s.get("score", 0.0) for s in subs)
    most = sum(s.get("max_score", 0.0) for s in subs)
    on = f"GPU {summary['gpu']}" if summary.get("gpu") else f"backend {summary['backend']}"
    lines = [
        f"graded    {len(subs)} submission(s) of {len(students)} student(s) on {on}, "
        f"{summary['executor']}; {summary['up_to_date']} up to date, not graded again",
        f"points    {score:g} of {most:g}" + (f" ({score / most:.0%})" if most else ""),
        f"time      {summary.get('wall_seconds', 0.0):g} s"
        + (f"; {summary['timing']['task_seconds_mean']:g} s per submission"
           if summary.get("timing", {}).get("tasks") else ""),
        f"failures  {len(summary['failures'])}",
    ]
    for f in summary["failures"]:
        who = " ".join(x for x in (f.get("student"), f.get("assignment")) if x) or "the run"
        said = " ".join(str(f.get("error", "")).split())
        line = terminal_text(f"  {who} ({f.get('step', '?')}): {said}")
        lines.append(line if len(line) <= width else line[: width - 3] + "...")
    if summary.get("note"):
        lines.append(f"note      {summary['note']}")
    for key, what in (("csv", "grades"), ("kernels_csv", "per kernel")):
        if summary.get(key):
            lines.append(f"{what:<9} {summary[key]}")
    return "\n".join(map(terminal_text, lines))
