"""Sandbox overhead per submission on the emulator: the same fresh kernels graded with and
without the bubblewrap sandbox, interleaved; prints the medians and their difference."""
import statistics
import sys
import time
import uuid

from tilelab import grade
from tilelab.reference import KERNELS

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
src = KERNELS["naive"].source()
grade.grade_source("naive", src + "// warm\n", backend_name="emu", sandboxed=True)  # base cache
times = {False: [], True: []}
for _i in range(n):
    for sb in (False, True):
        unique = src + f"// {uuid.uuid4()}\n"  # never cached: a new submission
        t = time.perf_counter()
        v = grade.grade_source("naive", unique, backend_name="emu", sandboxed=sb)
        times[sb].append(time.perf_counter() - t)
        assert v.points_correct == 3, v.messages
plain, boxed = statistics.median(times[False]), statistics.median(times[True])
print(f"emulator, naive matmul, {n} fresh kernels each: unsandboxed median {plain*1e3:.0f} ms, "
      f"sandboxed median {boxed*1e3:.0f} ms, overhead {(boxed-plain)*1e3:.0f} ms per submission")
