"""Wall time of ``tilelab check`` per exercise, sandboxed (the default) and, as a yardstick
measured in the same minute, unsandboxed; traffic counters on.

Each run is the command a learner types (a fresh process: import, grade in a child,
correctness on every shape, the analysis launch with races, banks and traffic), on the
exercise's reference solution after one warm-up check (the user's caches warm, as for a
learner who checks again). The sandboxed and unsandboxed runs alternate, so that the
yardstick sees the same load on a shared machine. Prints p50 and p95 of each, and the
median CPU seconds of the unsandboxed check's processes (what an idle machine's wall time
comes near: a check runs mostly on one core; a sandbox's processes are not counted).

With ``--backend gpu`` (on a machine with a GPU) it also prints the median seconds of each
grading step of the sandboxed checks (the verdict's ``step_seconds``) and of each moment of
their ``timeline`` (when the worker's CUDA was ready, each GPU tool's steps, the speed run's
wait for the GPU's lock), and the unsandboxed checks' timeline (where a sandbox's time goes),
after a line naming the lock settings the checks ran with
(``TILELAB_START_LOCK``, ``TILELAB_COUNTERS_LOCK``): with the start lock shared, each GPU
tool's CUDA start waits behind the speed run's timed rounds, and a check takes longer.

With ``--edited`` each timed check is of a kernel no check has built (the reference with
a new comment), as a learner's check after each edit: its builds are in no cache.

With ``--notebook`` it times a notebook's visible check instead (``tilelab.notebook.check``
called in one long-lived process, as a Jupyter kernel calls it; sandboxed): p50 and p95
of each exercise after one warm-up check.

    python benchmarks/check_times.py [--repeat 10] [--exercise tiled ...] [--backend gpu] [--edited]
    python benchmarks/check_times.py --notebook [--repeat 10] [--exercise tiled ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tilelab import settings  # noqa: E402
from tilelab.catalog import exercises  # noqa: E402


def children_cpu() -> float:
    """CPU seconds of every process this one started and waited for (and theirs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, dict]:
    """Seconds one check took, the CPU seconds it used, and its verdict (which must give
    the reference every point: a failed check's time measures something else)."""
    t0, c0 = time.perf_counter(), children_cpu()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds, cpu = time.perf_counter() - t0, children_cpu() - c0
    try:
        verdict = json.loads(out.stdout)["verdict"]
    except (ValueError, KeyError) as exc:
        raise SystemExit(f"{' '.join(cmd)} printed no verdict (exit {out.returncode}):\n"
                         f"{out.stderr[-2000:]}") from exc
    ex = exercises.get(verdict["exercise"])
    full = ex.points_correct + (ex.points_speed if env["TILELAB_BACKEND"] == "gpu" else 0)
    if verdict["points"] != full:
        raise SystemExit(f"{' '.join(cmd)}: the reference scored {verdict['points']} of "
                         f"{full}:\n" + "\n".join(verdict["messages"]))
    return seconds, cpu, verdict


NOTEBOOK = """
import contextlib, io, json, sys, time
from tilelab import notebook
from tilelab.catalog import exercises
repeat, ids = int(sys.argv[1]), sys.argv[2:]
for exercise_id in ids:
    ex = exercises.get(exercise_id)
    src = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
    seconds = []
    for i in range(repeat + 1):  # the first warms the caches
        out = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out):
            notebook.check(exercise_id, src)
        seconds.append(time.perf_counter() - t0)
        if "PASS" not in out.getvalue():
            raise SystemExit(f"{exercise_id}: the check did not pass:\\n{out.getvalue()}")
    print(json.dumps([exercise_id, seconds[1:]]), flush=True)
"""


class Edits:
    """Writes the kernel a check reads: ``text``, and where ``edited``, with a comment no
    earlier check had before each call (a kernel no check has built yet)."""

    def __init__(self, path: Path, text: str, edited: bool) -> None:
        self.path, self.text, self.edited, self.count = path, text, edited, 0
        path.write_text(text)

    def __call__(self) -> None:
        if self.edited:
            self.count += 1
            self.path.write_text(f"{self.text}\n// edit {self.count} of {os.getpid()}\n")


def notebook_checks(ids: list[str], repeat: int, env: dict[str, str]) -> None:
    """p50 and p95 of ``tilelab.notebook.check`` per exercise, in one process."""
    print(f"{'exercise':<18} {'p50 s':>7} {'p95 s':>7}   (notebook check, n={repeat}, after "
          "one warm-up check)")
    proc = subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(repeat), *ids], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        exercise_id, seconds = json.loads(line)
        p50, p95 = np.percentile(seconds, [50, 95])
        print(f"{exercise_id:<18} {p50:>7.2f} {p95:>7.2f}", flush=True)
    if proc.wait():
        raise SystemExit(f"the notebook checks failed (exit {proc.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--exercise", nargs="*", help="only these exercises (default: all)")
    parser.add_argument("--backend", choices=("emu", "gpu"), default="emu")
    parser.add_argument("--edited", action="store_true",
                        help="each timed check is of a kernel not checked before (the "
                        "reference with a new comment): a learner's check after an edit, "
                        "whose builds are not in any cache")
    parser.add_argument("--no-yardstick", action="store_true",
                        help="skip the unsandboxed runs")
    parser.add_argument("--notebook", action="store_true",
                        help="time a notebook's visible check instead")
    a = parser.parse_args()
    env = {**os.environ, "TILELAB_BACKEND": a.backend,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if a.notebook:
        notebook_checks(a.exercise or list(exercises.EXERCISES), a.repeat, env)
        return
    plain = {**env, "TILELAB_SANDBOXED": "1"}  # as if already in a sandbox: none is made
    print(f"{'exercise':<18} {'p50 s':>7} {'p95 s':>7}   {'unsandboxed p50':>15} "
          f"{'p95':>6} {'cpu s':>6}  (n={a.repeat}, {a.backend}, after one warm-up check"
          f"{', each of an edited kernel' if a.edited else ''}; "
          f"cpu: median CPU seconds of the unsandboxed check's processes)")
    if a.backend == "gpu":  # they decide what a check's GPU tools wait for
        print("    " + ", ".join(f"{v.name}={v.get()}" for v in (settings.START_LOCK,
                                                             settings.COUNTERS_LOCK)))
    chosen = [exercises.get(e) for e in a.exercise] if a.exercise else \
        list(exercises.EXERCISES.values())
    with tempfile.TemporaryDirectory() as tmp:
        for ex in chosen:
            src = Path(tmp) / f"{ex.id}.cu"
            text = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
            edit = Edits(src, text, a.edited)
            cmd = [sys.executable, "-m", "tilelab.cli", "check", ex.id, str(src), "--json"]
            timed(cmd, env)  # warm the user's caches
            if not a.no_yardstick:
                timed(cmd, plain)
            boxed, bare, steps, timelines, bare_timelines = [], [], [], [], []
            for _ in range(a.repeat):
                edit()
                seconds, cpu, verdict = timed(cmd, env)
                boxed.append((seconds, cpu))
                steps.append(verdict.get("step_seconds", {}))
                timelines.append(verdict.get("timeline", {}))
                if not a.no_yardstick:
                    edit()
                    seconds, cpu, verdict = timed(cmd, plain)
                    bare.append((seconds, cpu))
                    bare_timelines.append(verdict.get("timeline", {}))
            p50, p95 = np.percentile([s for s, _ in boxed], [50, 95])
            line = f"{ex.id:<18} {p50:>7.2f} {p95:>7.2f}"
            if bare:
                q50, q95 = np.percentile([s for s, _ in bare], [50, 95])
                line += (f"   {q50:>15.2f} {q95:>6.2f} "
                         f"{statistics.median(c for _, c in bare):>6.2f}")
            print(line, flush=True)
            if a.backend == "gpu":
                for title, runs in (("steps", steps), ("timeline", timelines),
                                    ("timeline unsandboxed", bare_timelines)):
                    if not runs:
                        continue
                    names = sorted({k for s in runs for k in s}, key=lambda k: (
                        k.split("_")[0], statistics.median(s.get(k, 0.0) for s in runs)))
                    print(f"    {title} (median s): " + ", ".join(
                        f"{k} {statistics.median(s.get(k, 0.0) for s in runs):.2f}"
                        for k in names), flush=True)


if __name__ == "__main__":
    main()
