"""A synthetic class graded by 1 worker (this process) and then a Dask cluster of 2 (or more).

The class (``--students`` learners, each submitting assignments 01-naive and 02-tiled,
one kernel each) cycles through five kinds of submission: right (the reference kernel),
wrong (a wrong result, a missing barrier), slow (uncoalesced, untiled), broken (does not
compile; a kernel cell that is not a string literal) and hostile (a notebook that patches
the grader in its own process). Each worker count grades a fresh copy of the class; the
benchmark prints submissions per minute, the speedup over the first count, each worker's
first task (it builds the worker's caches) and later ones, the cluster's start and each
worker's time in tasks and idle, how much slower a task is beside other workers, the
median seconds of each grading step beside the first count's (which steps slow down
when workers share a machine), whether every grade is identical (each submission's points
equal those the first run gave the same submitted file: ``--base-students`` gives the
first run a smaller class holding every kind of file, so that a big class measures the
shared runs without a long one-task run), and from the measured
time per kernel what a course of 1,000 learners x 5 kernels costs on 8 GPUs (one worker
each).

    python benchmarks/class_scale.py [--students 30] [--base-students 10] [--workers 1 2]
                                     [--gpu] [--dask] [--tasks-per-gpu 1 2 4 8]

Without ``--gpu`` the workers grade on the CPU emulator; with it each worker gets a GPU of
its own (``--workers 1 2`` needs two GPUs), and ``--tasks-per-gpu K`` gives each GPU K
tasks at once that share its lock (:mod:`tilelab.isolation.gpulock`); the last table is one
GPU's submissions per minute at each K, the grades compared with the first run's, and what
1,000 learners x 5 kernels cost on one GPU and on 8. Run from the repository root.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

HOSTILE = (
    'KERNEL = r"""__global__ void {name}(const float* A, const float* B, float* C,'
    ' int M, int N, int K) {{ }}"""\n'
    "import tilelab.notebook\n"
    "from tilelab.grading.verdict import Verdict\n"
    "tilelab.notebook.grade_source = lambda e, s, **k: Verdict(e, 'emu', correct=True,"
    " speed_passed=True, points_correct=3, points_speed=2)\n"
)
KINDS = {  # kind -> exercise -> a fixture's stem, "solution", or a whole cell
    "right": {"naive": "solution", "tiled": "solution"},
    "wrong": {"naive": "naive-wrong_result", "tiled": "tiled-missing_barrier"},
    "slow": {"naive": "naive-uncoalesced", "tiled": "tiled-untiled"},
    "broken": {"naive": "naive-compile_error", "tiled": 'cell:KERNEL = open("k.cu").read()\n'},
    "hostile": {"naive": "cell:" + HOSTILE.format(name="matmul_naive"),
                "tiled": "cell:" + HOSTILE.format(name="matmul_tiled")},
}


def build_class(root: Path, students: int) -> dict[str, str]:
    """A copy of the course with ``students`` learners' submissions: each one's
    ``student/assignment`` and the SHA-256 of its submitted notebook."""
    import support.classroom as tc

    from tilelab.catalog import exercises

    tc.copy_course(root)
    files = {}
    kinds = list(KINDS)
    for i in range(students):
        for j, exercise_id in enumerate(("naive", "tiled")):
            what = KINDS[kinds[(i + j) % len(kinds)]][exercise_id]
            if what.startswith("cell:"):
                cell = what.removeprefix("cell:")
            else:
                src = (
                    tc.solution_kernel(exercise_id)
                    if what == "solution"
                    else (tc.FIXTURES / f"{what}.cu").read_text(encoding="utf-8")
                )
                cell = tc.kernel_cell(tc.released_stub(exercise_id), src)
            a = exercises.get(exercise_id).assignment
            nb = tc.submission(a, {exercise_id: cell})
            files[(f"s{i:03d}", a)] = json.dumps(nb).encode()
    tc.write_submissions(root, files)
    return {f"{s}/{a}": hashlib.sha256(data).hexdigest() for (s, a), data in files.items()}


def cpu_seconds() -> float:
    """CPU time of this process and every process it started that has ended."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def verdict_docs(root: Path) -> list[dict]:
    """Each graded submission's verdict file (points, verdicts, step times)."""
    from tilelab.classroom.steps import VERDICT_FILE

    return [json.loads(path.read_text()) for path in
            sorted((root / "autograder" / "feedback").glob(f"*/*/{VERDICT_FILE}.json"))]


def grades(docs: list[dict]) -> dict[str, object]:
    """(student, assignment) -> points."""
    return {f"{d['student']}/{d['assignment']}": d["points"] for d in docs}


def notes(docs: list[dict]) -> dict[str, str]:
    """(student, assignment) -> what its verdicts said (their messages, shortened)."""
    return {f"{d['student']}/{d['assignment']}": " | ".join(
        m[:300] for v in d.get("verdicts", []) for m in v.get("messages", [])) for d in docs}


def differences(base: dict, run: dict, contents: dict[str, str]) -> list[str]:
    """Each submission of ``run`` whose points differ from those the base run gave the
    same submitted file (``contents``: each submission's digest; the first of the base's
    submissions of that file, so the base run compared with itself finds identical files
    it graded two ways), with its points in both and what each run's grader said."""
    first: dict[str, str] = {}
    for key in sorted(base["keys"]):
        first.setdefault(contents[key], key)
    out = []
    for key in sorted(run["keys"]):
        ref = first.get(contents[key])
        if ref is None:
            out.append(f"  {key}: a file the base run ({base['label']}) did not grade")
        elif base["grades"].get(ref) != run["grades"].get(key):
            out.append(f"  {key}: {run['grades'].get(key)} in {run['label']}, "
                       f"{base['grades'].get(ref)} for {ref} (the same file) in "
                       f"{base['label']}\n"
                       f"    {base['label']}: {base['notes'].get(ref, '(no verdict)')}\n"
                       f"    {run['label']}: {run['notes'].get(key, '(no verdict)')}")
    return out


def step_seconds(docs: list[dict], timings: list[dict]) -> dict[str, float]:
    """Median seconds of each kernel-grading step over the run's verdicts, and of the rest
    of a task (its notebook run, nbgrader, the course copy): where a slower task lost time."""
    steps: dict[str, list[float]] = {}
    task = {(t["student"], t["assignment"]): t["seconds"] for t in timings}
    rest = []
    for doc in docs:
        spent = 0.0
        for v in doc.get("verdicts", []):
            for name, sec in v.get("step_seconds", {}).items():
                steps.setdefault(name, []).append(sec)
                spent += sec
        if (key := (doc["student"], doc["assignment"])) in task:
            rest.append(task[key] - spent)
    steps["rest of the task"] = rest
    return {k: round(statistics.median(v), 3) for k, v in steps.items() if v}


def timeline_seconds(docs: list[dict]) -> dict[str, float]:
    """Median seconds from a kernel's grade's start to each moment of its ``timeline``
    (its tools' steps; ``speed_lock_wait``: what its speed run waited for the GPU's lock),
    over the run's verdicts that have one."""
    marks: dict[str, list[float]] = {}
    for doc in docs:
        for v in doc.get("verdicts", []):
            for name, sec in v.get("timeline", {}).items():
                marks.setdefault(name, []).append(sec)
    return {k: round(statistics.median(v), 3) for k, v in sorted(marks.items())}


def redone(docs: list[dict]) -> dict[str, int]:
    """Speed runs measured, and their timed rounds run again (a grader held up on a busy
    CPU between its start event and its launch: see tilelab.device.bench.time_checked)."""
    runs = [v["speed_rounds_redone"] for d in docs for v in d.get("verdicts", [])
            if v.get("speed_rounds_redone") is not None]
    return {"speed_runs": len(runs), "rounds": sum(runs)}


def in_tasks(timings: list[dict]) -> float:
    """Seconds from the first task's start to the last one's end: the run without the
    cluster's start and stop and the CSV export, which a class of any size pays once."""
    return (max(t["started"] + t["seconds"] for t in timings)
            - min(t["started"] for t in timings)) if timings else 0.0


def by_worker(timings: list[dict]) -> dict[str, list[float]]:
    """Each worker's task seconds, in the order the results arrived."""
    return {w: [t["seconds"] for t in tasks] for w, tasks in _by_worker_tasks(timings).items()}


def busy(timings: list[dict], grading: float, start: float) -> str:
    """The cluster's start, and each worker's seconds in tasks and not in them (before its
    first task: the course's trip; between tasks: dispatch; after its last one: the
    others' tail)."""
    spent = [sum(s) for s in by_worker(timings).values()]
    return (f"cluster start {start:.1f} s; per worker: in tasks "
            f"{', '.join(f'{x:.1f}' for x in spent)} s, idle "
            f"{', '.join(f'{grading - start - x:.1f}' for x in spent)} s")


def gaps(timings: list[dict]) -> str:
    """Where the workers' idle time went, from the first task's start to the last one's
    end, summed over the workers: before each one's first task, between its tasks (the
    executor's dispatch), after its last one (the others' tail)."""
    if not timings:
        return "no tasks"
    first = min(t["started"] for t in timings)
    last = max(t["started"] + t["seconds"] for t in timings)
    lead = between = tail = 0.0
    for tasks in _by_worker_tasks(timings).values():
        tasks.sort(key=lambda t: t["started"])
        lead += tasks[0]["started"] - first
        between += sum(b["started"] - (a["started"] + a["seconds"])
                       for a, b in itertools.pairwise(tasks))
        tail += last - (tasks[-1]["started"] + tasks[-1]["seconds"])
    return (f"idle in tasks' span, all workers: {lead:.1f} s before the first task, "
            f"{between:.1f} s between tasks, {tail:.1f} s after the last")


def _by_worker_tasks(timings: list[dict]) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for t in timings:
        by.setdefault(t["worker"], []).append(t)
    return by


def per_worker(timings: list[dict]) -> str:
    """Each worker's first task (it builds the worker's caches) and its later ones."""
    by = by_worker(timings)
    first = [s[0] for s in by.values()]
    rest = [x for s in by.values() for x in s[1:]]
    median = statistics.median(rest) if rest else 0.0
    return (f"first task on each worker {', '.join(f'{x:.1f}' for x in first)} s, later "
            f"tasks median {median:.1f} s; tasks per worker "
            f"{', '.join(str(len(s)) for s in by.values())}")


def label(workers: int, per_gpu: int, gpu: bool) -> str:
    return f"{workers} worker(s)" + (f" x {per_gpu} task(s) per GPU" if gpu else "")


def slots(run: dict) -> int:
    """Tasks a run grades at once."""
    return run["workers"] * run["tasks_per_gpu"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=30, help="learners (2 submissions each)")
    p.add_argument("--base-students", type=int, default=None,
                   help="learners of the first run only (default --students; at least "
                        f"{len(KINDS)}, so that it grades every kind of file): a big class "
                        "for the shared runs without its long one-task run")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--gpu", action="store_true", help="one worker per GPU, speed measured")
    p.add_argument("--tasks-per-gpu", type=int, nargs="+", default=[1],
                   help="with --gpu: grade with N tasks at once on each GPU, for each N "
                        "(the timed steps take the GPU alone)")
    p.add_argument("--json", help="also write the figures to this file (`tilelab bench "
                   "gpu_sharing` runs this script and writes the book's data file from it)")
    p.add_argument("--dask", action="store_true",
                   help="1 worker on a Dask cluster too (default: 1 worker is this process)")
    a = p.parse_args()
    if any(n > 1 for n in a.tasks_per_gpu) and not a.gpu:
        p.error("--tasks-per-gpu above 1 needs --gpu")
    base_students = a.students if a.base_students is None else a.base_students
    if base_students != a.students and not len(KINDS) <= base_students < a.students:
        p.error(f"--base-students must be from {len(KINDS)} to --students")

    from tilelab.classroom import grade_class
    from tilelab.classroom.inline import inline
    from tilelab.cluster.run import on_dask

    backend = "gpu" if a.gpu else "emu"
    runs = []
    with tempfile.TemporaryDirectory(prefix="tilelab-class-scale-") as tmp:
        contents = build_class(template := Path(tmp) / "class", a.students)
        n = len(contents)
        small = Path(tmp) / "base-class"  # the first base_students learners of the class
        keys = {True: list(build_class(small, base_students) if base_students < a.students
                           else contents), False: list(contents)}
        print(f"class: {n} submissions ({a.students} learners x 2 assignments; right, wrong, "
              f"slow, broken, hostile), {len(keys[True])} in the first run, backend "
              f"{backend}, {os.cpu_count()} CPU cores, "
              f"load average {os.getloadavg()[0]:.1f}")
        for workers, per_gpu in [(w, k) for w in a.workers for k in a.tasks_per_gpu]:
            root = Path(tmp) / f"w{workers}-t{per_gpu}"
            first = not runs
            shutil.copytree(small if first and base_students < a.students else template, root)
            load0 = os.getloadavg()[0]
            cpu0 = cpu_seconds()
            t0 = time.monotonic()
            executor = (on_dask(workers, gpus=a.gpu, tasks_per_gpu=per_gpu)
                        if workers > 1 or per_gpu > 1 or a.dask else inline)
            summary = grade_class(root, backend=backend, progress=False, run_tasks=executor)
            wall = time.monotonic() - t0
            cpu = cpu_seconds() - cpu0  # the cluster's processes have ended: all counted
            timing = summary["timing"]
            runs.append({
                "workers": workers,
                "tasks_per_gpu": per_gpu,
                "label": label(workers, per_gpu, a.gpu),
                "submissions": summary["graded"],
                "wall_seconds": round(wall, 1),
                "grading_seconds": timing["wall_seconds"],
                "submissions_per_minute": timing["submissions_per_minute"],
                "task_seconds_mean": timing["task_seconds_mean"],
                "failures": len(summary["failures"]),
                "task_seconds": round(own := sum(t["seconds"] for t in summary["timings"]), 2),
                # tasks running at once, on average: the cluster's side of the speedup
                "in_flight": round(own / timing["wall_seconds"], 2),
                "in_tasks_seconds": round(span := in_tasks(summary["timings"]), 1),
                "per_minute_in_tasks": round(summary["graded"] / span * 60, 2) if span else 0,
                "load_average": [round(load0, 1), round(os.getloadavg()[0], 1)],
                "cluster_start_seconds": summary.get("cluster_start_seconds", 0.0),
                "cpu_seconds": round(cpu, 1),
                "cores_busy": round(cpu / wall, 2),
                "keys": keys[first],
                "grades": grades(docs := verdict_docs(root)),
                "notes": notes(docs),
                "timings": summary["timings"],
                "step_seconds": step_seconds(docs, summary["timings"]),
                "timeline_seconds": timeline_seconds(docs),
                "speed_rounds_redone": redone(docs),
            })
            r = runs[-1]
            print(f"{r['label']}: {r['submissions']} submissions in "
                  f"{r['grading_seconds']:.1f} s = {r['submissions_per_minute']:.1f} "
                  f"submissions/min (mean task {r['task_seconds_mean']:.1f} s; "
                  f"{wall:.1f} s with cluster start and CSV); {r['in_flight']:.2f} tasks "
                  f"running on average; load average {r['load_average'][0]} -> "
                  f"{r['load_average'][1]} on {os.cpu_count()} cores; the run's own processes "
                  f"used {r['cpu_seconds']:.0f} CPU s ({r['cores_busy']:.2f} cores busy)")
            points = sorted(sum(x for e in g.values() for x in e.values())
                            for g in r["grades"].values())
            print(f"  from the first task's start to the last one's end {span:.1f} s = "
                  f"{r['per_minute_in_tasks']:.1f} submissions/min (without the cluster's "
                  "start and stop, paid once a run)")
            print(f"  {per_worker(r['timings'])}; points per submission "
                  f"{dict(collections.Counter(points))}")
            print(f"  {busy(r['timings'], r['grading_seconds'], r['cluster_start_seconds'])}")
            print(f"  {gaps(r['timings'])}")
            print("  timeline (median s): " + ", ".join(
                f"{k} {v:.2f}" for k, v in r["timeline_seconds"].items()))
            if a.gpu:
                print(f"  timed rounds run again because a grader's CPU held up a launch: "
                      f"{r['speed_rounds_redone']['rounds']} in "
                      f"{r['speed_rounds_redone']['speed_runs']} speed runs")
    base = runs[0]
    for r in runs[1:]:
        speedup = r["submissions_per_minute"] / base["submissions_per_minute"]
        r["speedup"] = round(speedup, 2)
        target = 1.7 if backend == "emu" else 1.8
        print(f"speedup {base['label']} -> {r['label']}: {speedup:.2f}x "
              f"(target >= {target}x for 1 -> 2: {'met' if speedup >= target else 'NOT met'})")
    # on a shared machine the speedup is capped by the CPU the run is given, not by the cluster
    for r in runs[1:]:
        need = base["cores_busy"] * slots(r) / slots(base)
        print(f"{r['label']} needed about {need:.2f} of {os.cpu_count()} cores to "
              f"scale fully from {base['label']} ({base['cores_busy']:.2f} cores busy); "
              f"they got {r['cores_busy']:.2f}")
    for r in runs[1:]:  # the speedup's two losses: slower tasks, idle workers
        own, base_own = r["task_seconds"], base["task_seconds"]
        print(f"tasks' own time, {r['label']} vs {base['label']}: {own:.1f} / "
              f"{base_own:.1f} s = {own / base_own:.3f}x (a task beside other workers is "
              f"that much slower)")
    for r in runs[1:]:  # which grading steps slow down beside other workers
        ratios = ", ".join(f"{k} {v:.2f}/{base['step_seconds'][k]:.2f} s"
                           for k, v in r["step_seconds"].items() if base["step_seconds"].get(k))
        print(f"median step seconds, {r['label']} vs {base['label']}: {ratios}")
    for r in runs:
        differ = differences(base, r, contents)
        r["grades_identical"] = not differ
        if differ:
            print(f"graded differently in {r['label']}:", *differ, sep="\n")
    same = all(r["grades_identical"] for r in runs)
    print(f"grades identical in every run: {'yes' if same else 'NO'}")
    # 1,000 learners x 5 kernels on 8 workers, from the measured time per kernel (01-naive
    # and 02-tiled hold one kernel each, so a task here is one kernel and its notebook)
    best = runs[-1]
    per_kernel = base["task_seconds_mean"]
    efficiency = best.get("speedup", 1.0) * slots(base) / slots(best)
    hours = 1000 * 5 * per_kernel / (8 * min(1.0, efficiency)) / 3600
    print(f"1,000 learners x 5 kernels on 8 {'GPUs' if a.gpu else 'workers'}: "
          f"{per_kernel:.1f} s per kernel x 5,000 / (8 x {min(1.0, efficiency):.2f} "
          f"efficiency) = {hours:.1f} h")
    if a.gpu:  # one GPU's throughput at each setting, and what a course costs with it
        print(f"{'tasks per GPU':>13} | {'submissions/min per GPU':>23} | {'vs 1 task':>9} | "
              f"{'in tasks /min':>13} | {'grades identical':>16} | 1,000 learners x 5 "
              "kernels: one GPU, 8 GPUs")
        for r in runs:
            r["per_gpu_per_minute"] = per_gpu_minute = r["submissions_per_minute"] / r["workers"]
            # a course's hours at the rate in tasks: its cluster starts and stops once
            r["per_gpu_per_minute_in_tasks"] = steady = r["per_minute_in_tasks"] / r["workers"]
            r["hours_1000x5_one_gpu"] = round(5000 / steady / 60, 2)
            r["hours_1000x5_eight_gpus"] = round(5000 / steady / 60 / 8, 2)
            first = base["submissions_per_minute"] / base["workers"]
            print(f"{r['tasks_per_gpu']:>13} | {per_gpu_minute:>23.1f} | "
                  f"{per_gpu_minute / first:>8.2f}x | {steady:>13.1f} | "
                  f"{'yes' if r['grades_identical'] else 'NO':>16} | "
                  f"{r['hours_1000x5_one_gpu']:.1f} h, {r['hours_1000x5_eight_gpus']:.2f} h")
    if a.json:
        doc = {"backend": backend, "runs": [{k: v for k, v in r.items()
                                             if k not in ("grades", "notes", "keys")}
                                            for r in runs],
               "grades_identical": same, "estimate_1000x5_on_8_hours": round(hours, 2)}
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
