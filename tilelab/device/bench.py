"""GPU timing: CUDA events, warm-up, L2 flushed, interleaved kernels, medians.

Kernels compared with each other are timed in one process on one GPU, alternating launch
by launch, so clock and thermal drift hit all of them alike; a speedup is the ratio of
their medians. Nothing here runs on the emulator: it has no meaningful time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.device.runtime import Runtime

WARMUP = 5
REPEAT = 20


@dataclass
class Timing:
    """Event-timed runs of one launch."""

    label: str
    samples_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how noisy the runs were."""
        q = np.percentile(self.samples_ms, [10, 90])
        return float((q[1] - q[0]) / self.median_ms)


class L2Flusher:
    """Overwrites a buffer twice the size of L2 so no run finds the last one's data."""

    def __init__(self) -> None:
        import pycuda.driver as cuda

        l2 = cuda.Context.get_device().get_attribute(cuda.device_attribute.L2_CACHE_SIZE)
        self.words = max(2 * l2 // 4, 1 << 20)
        self.buf = cuda.mem_alloc(self.words * 4)
        self._memset = cuda.memset_d32

    def __call__(self) -> None:
        self._memset(self.buf, 0, self.words)


def time_interleaved(
    launches: dict[str, Callable[[], None]],
    warmup: int = WARMUP,
    repeat: int = REPEAT,
    flush: bool = True,
) -> dict[str, Timing]:
    """Time each launch ``repeat`` times, alternating between them, with CUDA events."""
    import pycuda.driver as cuda

    flusher = L2Flusher() if flush else None
    for run in launches.values():
        for _ in range(warmup):
            run()
    cuda.Context.synchronize()
    timings = {k: Timing(k) for k in launches}
    start, end = cuda.Event(), cuda.Event()
    for _ in range(repeat):
        for key, run in launches.items():
            if flusher:
                flusher()
            start.record()
            run()
            end.record()
            end.synchronize()
            timings[key].samples_ms.append(start.time_till(end))
    return timings


def prepared_launch(
    rt: Runtime,
    fn,
    problem: Problem,
    launch_: Launch,
    shape: Shape,
    inputs: dict[str, np.ndarray],
    keep: list,
) -> Callable[[], None]:
    """A zero-argument closure that launches ``fn`` on device copies of ``inputs``."""
    sizes = problem.sizes(shape)
    bufs = {name: rt.to_device(arr) for name, arr in inputs.items()}
    out_shape = problem.output_shape(shape)
    # poisoned, so that the output read back after timing shows what the timed runs wrote
    bufs[problem.output] = rt.to_device(np.full(out_shape, np.nan, np.float32))
    keep.append(bufs)  # device memory lives as long as the caller keeps this list
    args = problem.arguments(bufs, shape)
    block, grid = launch_.block, launch_.grid(sizes)
    return lambda: fn(*args, block=block, grid=grid)
