"""Whether a timed launch counts the host's way to it: the unpadded and padded transposes
at 4096 x 4096 timed back to back and after a tenth of a second of host idle (a graded
round's checks), in both orders, with the L2 flush alone and with the GPU's lead
(:class:`tilelab.device.bench.L2Flusher`). With the lead the idle spell changes nothing.

    python benchmarks/launch_lead.py      # on a machine with a GPU; prints a table
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tilelab.catalog import exercises
from tilelab.device.bench import L2Flusher, prepared_launch, timed_launch
from tilelab.device.runtime import get_runtime


def main() -> None:
    import pycuda.driver as cuda

    rt = get_runtime("gpu")
    ex = exercises.get("transpose_padded")
    shape, keep = ex.speed_shape, []
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(0))
    runs = {"unpadded": prepared_launch(rt, rt.SourceModule(ex.baseline.source()).get_function(
                ex.baseline.name), ex.problem, ex.baseline.launch, shape, inputs, keep),
            "padded": prepared_launch(rt, rt.SourceModule(ex.reference.source()).get_function(
                ex.reference.name), ex.problem, ex.launch, shape, inputs, keep)}
    lead = L2Flusher()

    def flush_only() -> None:
        cuda.memset_d32(lead.buf, 0, lead.words)

    start, end = cuda.Event(), cuda.Event()
    print(f"{'before each launch':<20} {'idle s':>6} {'first':>9} {'unpadded ms':>12} "
          f"{'padded ms':>10} {'ratio':>6}")
    for name, before in (("L2 flush", flush_only), ("L2 flush + lead", lead)):
        for idle in (0.0, 0.1):
            for order in (("unpadded", "padded"), ("padded", "unpadded")):
                t: dict[str, list[float]] = {k: [] for k in order}
                for _ in range(15):
                    time.sleep(idle)
                    for k in order:
                        t[k].append(timed_launch(runs[k], start, end, before)[0])
                u, p = statistics.median(t["unpadded"]), statistics.median(t["padded"])
                print(f"{name:<20} {idle:>6} {order[0]:>9} {u:>12.4f} {p:>10.4f} {u / p:>6.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
