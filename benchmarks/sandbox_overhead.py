"""What the sandbox costs, on the CPU emulator.

``python benchmarks/sandbox_overhead.py [N]``: the same fresh kernels (never cached) graded
with and without the bubblewrap sandbox, interleaved; prints both medians and the overhead
per submission. ``--start``: the cost of starting one process in a sandbox (``python -c
pass``, 20 runs each way). ``--class``: the test suite's class (tests/test_classroom.py) graded end
to end by ``tilelab grade``'s pipeline, once unsandboxed and once sandboxed.
"""

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tilelab import classroom
from tilelab.grading import sandbox as grade
from tilelab.reference import KERNELS


def per_submission(n: int) -> None:
    src = KERNELS["naive"].source()
    grade.grade_source("naive", src + "// warm\n", backend_name="emu", sandboxed=True)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(n):
        for boxed in (False, True):
            unique = src + f"// {uuid.uuid4()}\n"  # never cached: a new submission
            t = time.perf_counter()
            v = grade.grade_source("naive", unique, backend_name="emu", sandboxed=boxed)
            times[boxed].append(time.perf_counter() - t)
            assert v.points_correct == 3, v.messages
    plain, boxed_ = statistics.median(times[False]), statistics.median(times[True])
    print(f"emulator, naive matmul, {n} fresh kernels each: unsandboxed median "
          f"{plain * 1e3:.0f} ms, sandboxed median {boxed_ * 1e3:.0f} ms, overhead "
          f"{(boxed_ - plain) * 1e3:.0f} ms per submission")


def start() -> None:
    import subprocess

    from tilelab.grading import bubblewrap

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


def whole_class() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_classroom import build_course

    for boxed in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "course"
            build_course(root)
            t = time.perf_counter()
            summary = classroom.grade_class(root, backend="emu", progress=False,
                                            sandboxed=boxed)
            took = time.perf_counter() - t
            print(f"class run ({len(summary['submissions'])} submissions, emulator), "
                  f"{'sandboxed' if boxed else 'unsandboxed'}: {took:.1f} s, "
                  f"{len(summary['failures'])} failures")


if __name__ == "__main__":
    if "--class" in sys.argv:
        whole_class()
    elif "--start" in sys.argv:
        start()
    else:
        per_submission(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
