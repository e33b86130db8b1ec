"""``gpu_sharing.json``: how many submissions a minute one GPU grades with 1, 2, 4 and 8
grading tasks at once, and what a course costs at each setting.

It runs the repository's ``benchmarks/class_scale.py`` on one GPU: a synthetic class (right,
wrong, slow, broken and hostile submissions) graded by a Dask cluster with K tasks per GPU
for each K of :data:`TASKS`, the tasks of the GPU sharing its lock
(:mod:`tilelab.isolation.gpulock`: untimed GPU work shared, each timed round alone). Each
row is one K: submissions per minute, the speedup over one task, whether every grade
equals the one-task run's, and the hours 1,000 learners x 5 kernels take on one such GPU
and on eight (each with as many CPU cores as this machine). The recommended setting is the
fewest tasks whose rate is within :data:`NEAR` of the best with every grade identical.
``TILELAB_GPU_SHARING_STUDENTS`` (default 8, two submissions each) sizes the class;
``TILELAB_GPU_SHARING_BASE_STUDENTS`` (default the same, at least 5) the first setting's
(its grades are the reference: each submission is held to the points it gave the same
file); ``TILELAB_GPU_SHARING_TASKS`` (default ``1 2 4 8``) names the settings measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tilelab.experiments.datafile import write
from tilelab.isolation import gpulock

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "class_scale.py"
TASKS = (1, 2, 4, 8)
NEAR = 0.05
STUDENTS_ENV = "TILELAB_GPU_SHARING_STUDENTS"
BASE_ENV = "TILELAB_GPU_SHARING_BASE_STUDENTS"
TASKS_ENV = "TILELAB_GPU_SHARING_TASKS"
COLUMNS = {"tasks_per_gpu": "", "submissions": "", "submissions_per_minute": "/min",
           "speedup": "x", "per_minute_in_tasks": "/min", "grades_identical": "",
           "hours_one_gpu": "h",
           "hours_eight_gpus": "h", "recommended": "", "counters_lock": "", "start_lock": ""}


def rows_from(doc: dict[str, Any], counters_lock: str,
              start_lock: str = gpulock.SHARED) -> list[dict[str, Any]]:
    """The data file's rows from ``class_scale.py --json``'s document, measured with the
    counted launches and the CUDA starts taking the lock as the two settings say."""
    runs = doc["runs"]
    first = runs[0]["per_gpu_per_minute"]
    rows = [{"tasks_per_gpu": r["tasks_per_gpu"], "submissions": r["submissions"],
             "submissions_per_minute": round(r["per_gpu_per_minute"], 2),
             "speedup": round(r["per_gpu_per_minute"] / first, 2),
             "per_minute_in_tasks": round(r.get("per_gpu_per_minute_in_tasks", 0.0), 2),
             "grades_identical": bool(r["grades_identical"]),
             "hours_one_gpu": r["hours_1000x5_one_gpu"],
             "hours_eight_gpus": r["hours_1000x5_eight_gpus"],
             "recommended": False, "counters_lock": counters_lock,
             "start_lock": start_lock} for r in runs]
    good = [r for r in rows if r["grades_identical"]]
    if good:
        best = max(r["submissions_per_minute"] for r in good)
        pick = min((r for r in good if r["submissions_per_minute"] >= (1 - NEAR) * best),
                   key=lambda r: r["tasks_per_gpu"])
        pick["recommended"] = True
    return rows


def run(rt: Any, out: Path) -> Path:
    """The class run at every K of :data:`TASKS` on this machine's first GPU."""
    del rt  # the class run's workers start CUDA themselves
    if not SCRIPT.exists():
        raise RuntimeError(f"gpu_sharing runs {SCRIPT.name} from the course's repository "
                           "(benchmarks/); run `tilelab bench gpu_sharing` from a clone")
    students = int(os.environ.get(STUDENTS_ENV, "8"))
    base = int(os.environ.get(BASE_ENV) or students)
    tasks = [int(k) for k in os.environ.get(TASKS_ENV, "").split()] or list(TASKS)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tilelab-gpu-sharing-") as tmp:
        result = Path(tmp) / "scale.json"
        p = subprocess.run([sys.executable, str(SCRIPT), "--gpu", "--dask", "--workers", "1",
                            "--students", str(students), "--base-students", str(base),
                            "--tasks-per-gpu", *map(str, tasks), "--json", str(result)],
                           cwd=SCRIPT.parents[1], text=True)
        if not result.exists():
            raise RuntimeError(f"class_scale.py wrote no figures (exit status {p.returncode})")
        doc = json.loads(result.read_text())
    rows = rows_from(doc, gpulock.counted_mode(), gpulock.start_mode())
    return write(
        out, "gpu_sharing", "Submissions per minute on one GPU, by grading tasks per GPU",
        f"A synthetic class of {students} learners x 2 assignments (right, wrong, slow, "
        "broken and hostile submissions; one kernel each"
        + (f"; the first setting grades its first {base} learners" if base < students else "")
        + ") graded on one GPU by a Dask "
        f"cluster with {', '.join(map(str, tasks))} tasks at once sharing the GPU's lock "
        "(untimed GPU work shared, each round of timed launches alone; counted launches "
        "as counters_lock says, CUDA's starts and ends as start_lock says). "
        f"grades_identical: every submission's points equal those the {tasks[0]}-task run "
        "gave the same submitted file. "
        "per_minute_in_tasks: the rate from the first task's start to the "
        "last one's end (without the cluster's start and stop, which a class of any size "
        "pays once). "
        "hours: 1,000 learners x 5 kernels at the rate in tasks on one GPU, and on eight GPUs with "
        "as many CPU cores each as this machine. recommended: the fewest tasks within "
        f"{NEAR:.0%} of the best rate with every grade identical. "
        f"{os.cpu_count()} CPU cores. Took {time.monotonic() - t0:.0f} s.",
        COLUMNS, rows, method="benchmarks/class_scale.py --gpu --dask --workers 1 "
                              f"--students {students} --base-students {base} "
                              f"--tasks-per-gpu {' '.join(map(str, tasks))}",
    )
