"""What the sandbox costs, on the CPU emulator or on a GPU.

``python benchmarks/sandbox_overhead.py [N] [--backend gpu]``: the same fresh kernels (never
cached) graded with and without the bubblewrap sandbox, interleaved; prints both medians and
the overhead per submission (on a GPU the grade includes the speed runs). ``--start``: the
cost of starting one process in a sandbox (``python -c pass``, 20 runs each way).
``--class``: the test suite's class (tests/test_classroom.py) graded end to end by ``tilelab
grade``'s pipeline, once unsandboxed and once sandboxed. ``--steps``: what the sandbox of
nbgrader's steps costs one submission (:mod:`tilelab.classroom.notebook_sandbox`): its start
until it has read the notebook's kernel cells, and its end, against reading them here.
"""

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tilelab import classroom
from tilelab.catalog.reference import KERNELS
from tilelab.grading import sandbox as grade


def per_submission(n: int, backend: str) -> None:
    src = KERNELS["naive"].source()
    grade.grade_source("naive", src + "// warm\n", backend_name=backend, sandboxed=True)
    times: dict[bool, list[float]] = {False: [], True: []}
    steps: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
    for _ in range(n):
        for boxed in (False, True):
            unique = src + f"// {uuid.uuid4()}\n"  # never cached: a new submission
            t = time.perf_counter()
            v = grade.grade_source("naive", unique, backend_name=backend, sandboxed=boxed)
            took = time.perf_counter() - t
            times[boxed].append(took)
            assert v.points_correct == 3, v.messages
            for name, sec in {**v.step_seconds,
                              "outside the steps": took - sum(v.step_seconds.values())}.items():
                steps[boxed].setdefault(name, []).append(sec)
    plain, boxed_ = statistics.median(times[False]), statistics.median(times[True])
    print("step                 unsandboxed ms  sandboxed ms  (medians)")
    for name in steps[True]:
        print(f"{name:20} {statistics.median(steps[False][name]) * 1e3:14.0f} "
              f"{statistics.median(steps[True][name]) * 1e3:13.0f}")
    print(f"{backend}, naive matmul, {n} fresh kernels each: unsandboxed median "
          f"{plain * 1e3:.0f} ms, sandboxed median {boxed_ * 1e3:.0f} ms, overhead "
          f"{(boxed_ - plain) * 1e3:.0f} ms per submission")


def start() -> None:
    import subprocess

    from tilelab.isolation import bubblewrap

    plain, boxed = [], []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(20):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert bubblewrap.run([sys.executable, "-c", "pass"], work).returncode == 0
            boxed.append(time.perf_counter() - t)
    p, b = statistics.median(plain), statistics.median(boxed)
    print(f"python -c pass, 20 runs each: plain median {p * 1e3:.0f} ms, sandboxed median "
          f"{b * 1e3:.0f} ms, overhead {(b - p) * 1e3:.0f} ms per sandbox")


def whole_class(backend: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.classroom import build_course

    for boxed in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "course"
            build_course(root)
            t = time.perf_counter()
            summary = classroom.grade_class(root, backend=backend, progress=False,
                                            sandboxed=boxed)
            took = time.perf_counter() - t
            print(f"class run ({len(summary['submissions'])} submissions, {backend}), "
                  f"{'sandboxed' if boxed else 'unsandboxed'}: {took:.1f} s, "
                  f"{len(summary['failures'])} failures")


def steps(n: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import json

    from support.classroom import (
        copy_course,
        kernel_cell,
        released_stub,
        solution_kernel,
        submission,
    )

    from tilelab.classroom import notebook_sandbox
    from tilelab.classroom import steps as class_steps

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "course"
        copy_course(root)
        nb = submission("01-naive", {"naive": kernel_cell(released_stub("naive"),
                                                          solution_kernel("naive"))})
        folder = root / "autograder" / "submitted" / "ann" / "01-naive"
        folder.mkdir(parents=True)
        (folder / "naive.ipynb").write_text(json.dumps(nb))
        here, boxed, ended = [], [], []
        for _ in range(n):
            t = time.perf_counter()
            class_steps.read_kernels(folder / "naive.ipynb", "01-naive")
            here.append(time.perf_counter() - t)
            t = time.perf_counter()
            box = notebook_sandbox.NotebookSandbox(root, "01-naive", "ann", "naive.ipynb", 10, 60)
            with box:
                assert box.start([]) is not None, box.problem
                boxed.append(time.perf_counter() - t)
                t = time.perf_counter()
            ended.append(time.perf_counter() - t)
    h, b, e = (statistics.median(x) for x in (here, boxed, ended))
    print(f"nbgrader's steps' sandbox, {n} runs: its start until the kernel cells are read "
          f"{b * 1e3:.0f} ms, its end {e * 1e3:.0f} ms, against {h * 1e3:.0f} ms reading them "
          f"here: {(b + e - h) * 1e3:.0f} ms per submission (medians)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=5, help="fresh kernels each way")
    ap.add_argument("--backend", choices=("emu", "gpu"), default="emu")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--start", action="store_true", help="one process start, each way")
    mode.add_argument("--class", dest="whole", action="store_true", help="a class run, each way")
    mode.add_argument("--steps", action="store_true",
                      help="the sandbox of nbgrader's steps, per submission")
    a = ap.parse_args()
    if a.steps:
        steps(a.n)
    elif a.whole:
        whole_class(a.backend)
    elif a.start:
        start()
    else:
        per_submission(a.n, a.backend)
