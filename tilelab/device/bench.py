"""GPU timing: CUDA events, warm-up, L2 flushed, interleaved kernels, medians.

Kernels compared with each other are timed in one process on one GPU, alternating launch
by launch, so clock and thermal drift hit all of them alike; a speedup is the ratio of
their medians. The emulator has no meaningful time; :func:`time_checked` still runs there,
so that the rotation and checks of a graded speed run are tested without a GPU.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilelab.catalog.problems import Launch, Problem, Shape
from tilelab.device.backend import Backend
from tilelab.device.rounds import REPEAT, WARMUP

if TYPE_CHECKING:  # annotations only: the emulator would make this module slower to load
    from tilelab.device.runtime import Runtime


@dataclass
class Timing:
    """Event-timed runs of one launch."""

    label: str
    samples_ms: list[float] = field(default_factory=list)
    redone: int = 0  # timed rounds run again (see time_checked's redo_after_ms)
    waited_s: float = 0.0  # seconds the run waited for a shared GPU's lock (time_checked)
    alone_s: float = 0.0  # seconds its timed rounds held a shared GPU alone (time_checked)
    holds: int = 0  # how many holds of the GPU alone those rounds took
    #: host milliseconds from each kept sample's start event to its launch's return
    #: (time_interleaved; a sample past :data:`LEAD_MS` is timed again, see there)
    submitted_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how noisy the runs were."""
        q = np.percentile(self.samples_ms, [10, 90])
        return float((q[1] - q[0]) / self.median_ms)


#: A kernel that keeps the GPU busy for a given number of nanoseconds (PTX, loaded by the
#: driver: no compiler needed), queued before each timed launch's start event.
LEAD_PTX = b"""
.version 7.0
.target sm_52
.address_size 64

.visible .entry tilelab_lead(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
WAIT:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra WAIT;
    ret;
}
"""
#: How long the GPU is kept busy before a timed launch's start event (milliseconds): more
#: than it takes this process to queue the start event, the launch and the end event
LEAD_MS = 0.5


class Lead:
    """Gives the GPU :data:`LEAD_MS` of its own work before a timed launch, so that the
    start event, the launch and the end event are all queued before the GPU reaches them.
    Without it the GPU, idle, takes the start event at once and the time counts the host's
    way to the launch: measured on an H100, a launch after a tenth of a second of checking
    on the CPU took 40-70 us longer, so that whichever kernel came first in a round looked
    slower."""

    def __init__(self) -> None:
        import pycuda.driver as cuda

        self._module = cuda.module_from_buffer(LEAD_PTX)
        lead = self._module.get_function("tilelab_lead")
        ns = np.uint64(int(LEAD_MS * 1e6))
        self._lead = lambda: lead(ns, block=(32, 1, 1), grid=(1, 1))

    def __call__(self) -> None:
        self._lead()


class L2Flusher(Lead):
    """Overwrites a buffer twice the size of L2 so no run finds the last one's data, then
    gives the GPU its lead (:class:`Lead`)."""

    def __init__(self) -> None:
        import pycuda.driver as cuda

        super().__init__()
        l2 = cuda.Context.get_device().get_attribute(cuda.device_attribute.L2_CACHE_SIZE)
        self.words = max(2 * l2 // 4, 1 << 20)
        self.buf = cuda.mem_alloc(self.words * 4)
        self._memset = cuda.memset_d32

    def __call__(self) -> None:
        self._memset(self.buf, 0, self.words)
        super().__call__()


#: A timed sample whose launch returned more than this many host milliseconds after its
#: start event was queued may have reached the GPU after its lead ran out (the GPU idle,
#: the start event already taken): time_interleaved times it again.
LATE_MS = LEAD_MS
#: at most this many late samples, per sample kept, before a run gives up (:class:`HeldUp`)
LATE_BUDGET = 1.0


def time_interleaved(
    launches: dict[str, Callable[[], None]],
    warmup: int = WARMUP,
    repeat: int = REPEAT,
    flush: bool = True,
) -> dict[str, Timing]:
    """Time each launch ``repeat`` times, alternating between them, with CUDA events (the
    GPU given a lead before each, and its L2 flushed first where ``flush``). A sample
    whose launch was queued after the lead could have run out (:data:`LATE_MS`) is timed
    again, so that no kept time counts the host's way to the launch; each kept sample's
    submit time is in ``Timing.submitted_ms`` and the samples timed again in ``redone``."""
    import pycuda.driver as cuda

    flusher = L2Flusher() if flush else Lead()
    for run in launches.values():
        for _ in range(warmup):
            run()
    cuda.Context.synchronize()
    timings = {k: Timing(k) for k in launches}
    start, end = cuda.Event(), cuda.Event()
    budget = [max(1, int(LATE_BUDGET * repeat * len(launches)))]
    for _ in range(repeat):
        for key, run in launches.items():
            keep_early(lambda run=run: timed_launch(run, start, end, flusher), timings[key],
                       budget)
    return timings


def keep_early(launch: Callable[[], tuple[float, float]], timing: Timing,
               budget: list[int]) -> None:
    """Add one sample of ``launch`` (its milliseconds and its submit time, as
    :func:`timed_launch` gives them) to ``timing``: launched again while it was queued
    later than :data:`LATE_MS`, each late one counted in ``timing.redone`` and taken from
    ``budget[0]``; raise :class:`HeldUp` once the budget is spent."""
    while True:
        ms, submitted = launch()
        if submitted <= LATE_MS:
            timing.samples_ms.append(ms)
            timing.submitted_ms.append(submitted)
            return
        timing.redone += 1
        budget[0] -= 1
        if budget[0] < 0:
            raise HeldUp(f"timed samples kept being queued more than {LATE_MS:g} ms after "
                         "their start event (this machine's CPU held the process up): "
                         "their times would count the wait")


def timed_launch(run: Callable[[], None], start, end,
                 flush: Callable[[], None] | None) -> tuple[float, float]:
    """Milliseconds of one launch between two CUDA events, the L2 flushed and the GPU given
    a lead before them (:class:`L2Flusher`); and the host's milliseconds from the start
    event's record to the launch's return (a few hundredths normally: the launch is queued
    while the GPU still works through its lead; more, and this process was held up there,
    which the GPU's time may then count)."""
    if flush:
        flush()
    t0 = time.perf_counter()
    start.record()
    run()
    submitted = (time.perf_counter() - t0) * 1e3
    end.record()
    end.synchronize()
    return start.time_till(end), submitted


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


# ------------------------------------------------ checked launches (graded speed runs)

#: how many device buffer groups each kernel's launches rotate through, so that no launch
#: finds the pointers (or the output) of the one before it
BUFFER_GROUPS = 3


@dataclass(frozen=True)
class Timed:
    """A kernel to time: its compiled function and its launch geometry."""

    fn: Callable
    launch: Launch


class HeldUp(RuntimeError):
    """More timed rounds were held up by this machine's CPU than a speed run may run again
    (see :func:`time_checked`'s ``redo_after_ms``): its times would count the waits."""


class WrongLaunch(RuntimeError):
    """A timed launch whose output is wrong: ``label`` names the kernel, ``index`` the launch
    (0-based, warm-up included) and ``reason`` what the check found."""

    def __init__(self, label: str, index: int, total: int, reason: str) -> None:
        super().__init__(f"{label}: launch {index + 1} of {total}: {reason}")
        self.label, self.index, self.total, self.reason = label, index, total, reason


class InputSets:
    """A different set of inputs for every launch: for each input, one random pool of twice
    its size, and launch ``i`` reads a window of it at its own offset. Offsets are distinct
    and never a whole number of rows apart, so no launch's data is a row shift of another's
    (a kernel cannot rebuild one launch's output from an earlier one's)."""

    def __init__(self, make: Callable, shape: Shape, rng: np.random.Generator,
                 count: int) -> None:
        base = make(shape, rng)
        self.count = count
        self.shapes = {k: a.shape for k, a in base.items()}
        self.pools = {k: np.concatenate([a.ravel(), make(shape, rng)[k].ravel()])
                      for k, a in base.items()}
        self.offsets = {k: _offsets(a.size, a.shape[-1], count, rng) for k, a in base.items()}
        self._wide: dict[tuple[str, bool], np.ndarray] = {}  # pools widened (:meth:`widened`)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        return {k: self._window(self.pools[k], k, i) for k in self.shapes}

    def _window(self, pool: np.ndarray, name: str, i: int) -> np.ndarray:
        start = self.offsets[name][i]
        return pool[start:start + int(np.prod(self.shapes[name]))].reshape(self.shapes[name])

    def wide(self, i: int) -> Wide:
        """Launch ``i``'s inputs in float64 and their magnitudes, for its check."""
        return Wide(self, i)

    def widened(self, name: str, i: int, magnitude: bool = False) -> np.ndarray:
        """Input ``name`` of launch ``i`` in float64 (``magnitude``: its absolute values): a
        window of its pool, widened once for every launch (a speed run checks each
        launch against float64: widening a 2048 x 2048 input per launch cost a matmul's
        check more than its float64 product)."""
        return self._window(self._widened_pool(name, magnitude), name, i)

    def _widened_pool(self, name: str, magnitude: bool) -> np.ndarray:
        key = (name, magnitude)
        if key not in self._wide:
            self._wide[key] = (np.abs(self._widened_pool(name, False)) if magnitude
                               else self.pools[name].astype(np.float64))
        return self._wide[key]


class Wide:
    """One launch's inputs in float64, and their magnitudes, by name
    (:meth:`InputSets.widened`: windows of pools widened once)."""

    def __init__(self, sets: InputSets, i: int) -> None:
        self.sets, self.i = sets, i

    def value(self, name: str) -> np.ndarray:
        return self.sets.widened(name, self.i)

    def magnitude(self, name: str) -> np.ndarray:
        return self.sets.widened(name, self.i, magnitude=True)


class DevicePools:
    """The pools of an :class:`InputSets`, copied to the device once: a launch's inputs are
    then copied into its buffers from there, on the device (the same bytes as a copy from
    the host, without a host copy per launch)."""

    def __init__(self, rt: Runtime, sets: InputSets) -> None:
        self.rt, self.sets = rt, sets
        self.bufs = {k: rt.to_device(pool) for k, pool in sets.pools.items()}

    def fill(self, i: int, bufs: dict[str, Any]) -> None:
        """Copy launch ``i``'s inputs into ``bufs`` (by input name)."""
        for k, pool in self.sets.pools.items():
            nbytes = int(np.prod(self.sets.shapes[k])) * pool.itemsize
            if nbytes:
                start = int(self.bufs[k]) + self.sets.offsets[k][i] * pool.itemsize
                self.rt.memcpy_dtod(int(bufs[k]), start, nbytes)


def _offsets(size: int, row: int, count: int, rng: np.random.Generator) -> list[int]:
    """``count`` distinct offsets in [0, size], no two a multiple of ``row`` apart (each its
    own residue modulo ``row``) where there are enough residues; distinct otherwise."""
    if count <= row <= size:
        residues = rng.choice(row, count, replace=False)
        rows = rng.integers(0, size // row, count)
        return [int(r + row * q) for r, q in zip(residues, rows, strict=True)]
    return [int(x) for x in rng.choice(size + 1, count, replace=size + 1 < count)]


#: Counts the words of an output that still hold the poison, on the device: a timed
#: launch's check reads back that count and a few rows, not the whole output (a 4096 x 4096
#: transpose's is 64 MiB, read while the GPU is held alone). Compiled by the caller of
#: :func:`time_checked` (see :data:`UNWRITTEN`).
UNWRITTEN_SOURCE = r"""
__global__ void unwritten_words(const unsigned int* out, unsigned long long n,
                                unsigned int poison, unsigned long long* count)
{
    unsigned long long mine = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        mine += out[i] == poison;
    if (mine)
        atomicAdd(count, mine);
}
"""
UNWRITTEN = "unwritten_words"


@dataclass(frozen=True)
class Sample:
    """What one timed launch's output is checked on: how many of its ``size`` words still
    hold the poison, and the output rows ``rows`` (indices, drawn once the launch ended;
    None: every row), read back as ``data``."""

    unwritten: int
    size: int
    rows: np.ndarray | None
    data: np.ndarray

    @classmethod
    def of(cls, out: np.ndarray, poison: int, rows: np.ndarray | None) -> Sample:
        """The sample of an output held whole on the host (as the device's gives it)."""
        unwritten = int(np.count_nonzero(out.view(np.uint32) == np.uint32(poison)))
        return cls(unwritten, out.size, rows, out if rows is None else out[rows])


def sampled_rows(rng: np.random.Generator, count: int, rows: int) -> np.ndarray | None:
    """``rows`` of ``count`` rows, drawn at random and sorted; None where that is all."""
    return None if count <= rows else np.sort(rng.choice(count, rows, replace=False))


class Rotation:
    """One kernel's device buffers for checked launches: :data:`BUFFER_GROUPS` groups of
    inputs and output, used in turn; before each launch its group gets that launch's inputs
    (copied on the device from :class:`DevicePools`) and an output filled with ``poison``
    (32-bit pattern); :meth:`sample` reads back what the last launch's check needs, by
    ``unwritten`` (the compiled :data:`UNWRITTEN_SOURCE`; None for launches unchecked)."""

    def __init__(self, rt: Runtime, kernel: Timed, problem: Problem, shape: Shape,
                 inputs: dict[str, np.ndarray], poison: int,
                 unwritten: Callable | None = None) -> None:
        self.rt, self.kernel, self.problem, self.shape = rt, kernel, problem, shape
        self.out_shape = problem.output_shape(shape)
        self.poison = int(poison)  # a Python int: PyCUDA takes no NumPy scalar here
        self.words = int(np.prod(self.out_shape))
        self.groups = []
        for _ in range(BUFFER_GROUPS):
            bufs = {name: rt.mem_alloc(max(a.nbytes, 1)) for name, a in inputs.items()}
            bufs[problem.output] = rt.mem_alloc(max(4 * self.words, 1))
            self.groups.append(bufs)
        self.unwritten = unwritten  # the compiled UNWRITTEN_SOURCE (None: no samples)
        self.count = rt.mem_alloc(8) if unwritten is not None else None
        self.counted = (rt.driver.pagelocked_empty(1, np.uint64) if unwritten is not None
                        else None)
        threads = 256 if rt.name is Backend.GPU else 64  # an emulated thread costs more
        self.count_grid = (max(1, min(1024, -(-self.words // (threads * 8)))), 1)
        self.count_block = (threads, 1, 1)
        self.grid = kernel.launch.grid(problem.sizes(shape))
        self.current = self.groups[0]

    def prepare(self, i: int, pools: DevicePools) -> Callable[[], None]:
        """Fill group ``i % BUFFER_GROUPS`` for launch ``i``; return the launch itself."""
        bufs = self.current = self.groups[i % BUFFER_GROUPS]
        pools.fill(i, bufs)
        if self.words:
            self.rt.memset_d32(int(bufs[self.problem.output]), self.poison, self.words)
        args = self.problem.arguments(bufs, self.shape)
        block, grid, fn = self.kernel.launch.block, self.grid, self.kernel.fn
        return lambda: fn(*args, block=block, grid=grid)

    def sample(self, rows: np.ndarray | None) -> Sample:
        """What the last launch wrote: its words still holding the poison, counted on the
        device, and its output rows ``rows`` (None: all of them), read back."""
        if self.unwritten is None:
            raise ValueError("a rotation made without the count of unwritten words")
        out = self.current[self.problem.output]
        data = np.empty(self.out_shape if rows is None else (len(rows), *self.out_shape[1:]),
                        np.float32)
        if not self.words:
            return Sample(0, 0, rows, data)
        self.rt.memset_d32(self.count, 0, 2)
        self.unwritten(out, np.uint64(self.words), np.uint32(self.poison), self.count,
                       block=self.count_block, grid=self.count_grid)
        self.rt.memcpy_dtoh(self.counted, self.count)
        if rows is None:
            self.rt.memcpy_dtoh(data, out)
        else:
            flat = data.reshape(len(rows), -1)  # a row each (one element of a 1-D output)
            for k, r in enumerate(rows):
                self.rt.memcpy_dtoh(flat[k], int(out) + int(r) * flat[k].nbytes)
        return Sample(int(self.counted[0]), self.words, rows, data)


#: checks one launch's output (its :class:`Sample`) against its inputs (and their float64
#: copies, :class:`Wide`, where it has them): None when right, else why not
Check = Callable[[dict[str, np.ndarray], Sample, "Wide | None"], "str | None"]
#: a context manager's factory: a region of a GPU's lock (see :func:`time_checked`)
Region = Callable[[], contextlib.AbstractContextManager[Any]]


#: seconds one hold of the GPU alone may take before its timed rounds give the GPU back
#: (then wait for it again): a few rounds' launches and copies, so that other tasks' work
#: waits a fraction of a second, and each hold costs one wait for the GPU to empty
HOLD_SECONDS = 0.5
#: bytes of sampled outputs a hold may read back before their checks (made with the GPU
#: given back)
HOLD_BYTES = 512 << 20


def time_checked(
    rt: Runtime,
    kernels: dict[str, Timed],
    problem: Problem,
    shape: Shape,
    rng: np.random.Generator,
    check: Check,
    poison: int,
    unwritten: Callable,
    rows: int,
    warmup: int = WARMUP,
    repeat: int = REPEAT,
    gpu_work: Region = contextlib.nullcontext,
    alone: Region = contextlib.nullcontext,
    redo_after_ms: float | None = None,
) -> dict[str, Timing]:
    """Time kernels interleaved so that no timed launch can replay an earlier one.

    Every launch, warm-up included, of every kernel gets inputs no earlier launch saw
    (:class:`InputSets`), buffers at other addresses than the launch before
    (:class:`Rotation`) and an output freshly filled with ``poison``; all of that, and the
    L2 flush on a GPU, happens before the start event. After each round's launches,
    ``rows`` output rows are drawn at random (the same for every kernel of the round), and
    each launch's :class:`Sample` is read back before the next launch: its words still
    holding the poison, counted on the device by ``unwritten`` (the compiled
    :data:`UNWRITTEN_SOURCE`), and those rows. Each is ``check``-ed against that launch's
    inputs; a wrong one raises :class:`WrongLaunch`. Kernel launch ``i`` of each kernel
    sees the same inputs, so they are compared on the same work. Runs on the emulator too
    (no flush; its times mean nothing), which is how the rotation and checks are tested
    without a GPU.

    On a GPU shared by several grading tasks, ``alone`` (a context manager) holds a run of
    rounds (each round: one launch of each kernel with its copies, flush, events and
    samples) with no other task's work on the GPU, for up to :data:`HOLD_SECONDS` and
    :data:`HOLD_BYTES` of samples; the samples are checked against float64 once the GPU is
    given back. Every hold waits for the other tasks' GPU work to end, so a hold per run of
    rounds, not per round, is what lets several tasks share a GPU; the timed launches are
    as alone as before. ``gpu_work`` holds the untimed GPU work outside them (buffers made
    and freed).

    ``redo_after_ms``: a timed round in which this process took longer than that to queue
    a launch after its start event (held up by the CPU's other work: the GPU's time would
    count the wait) is checked, its times dropped for every kernel alike, and run again on
    new inputs, at most ``repeat`` times; one more raises :class:`HeldUp` (once the rounds
    already run are checked), so a held-up time is never counted.
    """
    spare = repeat if redo_after_ms is not None else 0
    sets = InputSets(problem.make_inputs, shape, rng, warmup + repeat + spare)
    timings = {k: Timing(k) for k in kernels}
    gpu: dict[str, Any] = {}  # every device object, freed inside `gpu_work`
    waited = [0.0]
    gpu_work, alone = _waits(gpu_work, waited), _waits(alone, waited)
    try:
        with gpu_work():
            gpu["pools"] = DevicePools(rt, sets)
            gpu["rotations"] = {k: Rotation(rt, t, problem, shape, sets[0], poison, unwritten)
                                for k, t in kernels.items()}
            gpu["flush"] = L2Flusher() if rt.name is Backend.GPU else None
            gpu["events"] = rt.driver.Event(), rt.driver.Event()
        pools, rotations, flusher = gpu["pools"], gpu["rotations"], gpu["flush"]
        start, end = gpu["events"]
        out_shape = problem.output_shape(shape)
        per_row = 4 * int(np.prod(out_shape[1:]))
        per_round = len(rotations) * per_row * min(rows, out_shape[0] if out_shape else 1)
        most = max(1, HOLD_BYTES // max(per_round, 1))
        i = timed = redone = holds = 0
        alone_s, held_up = 0.0, False
        while timed < repeat and not held_up:
            held: list[tuple[int, dict[str, Sample]]] = []  # rounds to check
            with alone():
                began = time.perf_counter()
                while timed < repeat and (not held or (
                        len(held) < most and time.perf_counter() - began < HOLD_SECONDS)):
                    runs = {key: rot.prepare(i, pools) for key, rot in rotations.items()}
                    ms = {key: timed_launch(run, start, end, flusher)
                          for key, run in runs.items()}
                    picked = sampled_rows(rng, out_shape[0], rows) if out_shape else None
                    held.append((i, {key: rot.sample(picked)
                                     for key, rot in rotations.items()}))
                    if i >= warmup:
                        late = redo_after_ms is not None and max(
                            took for _, took in ms.values()) > redo_after_ms
                        if late and redone == spare:  # never a held-up time counted
                            held_up = True
                            break
                        if late:
                            redone += 1
                        else:
                            timed += 1
                            for key, (sample, _) in ms.items():
                                timings[key].samples_ms.append(sample)
                    i += 1
                alone_s += time.perf_counter() - began
                holds += 1
            for j, outputs in held:
                inputs = sets[j]
                for key, got in outputs.items():
                    why = check(inputs, got, sets.wide(j))
                    if why is not None:
                        raise WrongLaunch(key, j, warmup + repeat + redone, why)
        if held_up:  # the outputs checked first: a wrong launch is that, held up or not
            raise HeldUp(f"this machine's CPU held up {redone + 1} of the timed rounds (a "
                         f"launch queued more than {redo_after_ms:g} ms after its start "
                         "event), more than a speed run may run again")
    finally:
        runs = pools = rotations = flusher = start = end = None  # type: ignore[assignment]
        if gpu:  # the device buffers and events, freed as GPU work
            with gpu_work():
                gpu.clear()
    for t in timings.values():
        t.redone, t.waited_s, t.alone_s, t.holds = redone, waited[0], alone_s, holds
    return timings


def _waits(region: Region, waited: list[float]) -> Region:
    """``region``, adding the seconds it takes to enter to ``waited[0]``."""

    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        t0 = time.perf_counter()
        with region():
            waited[0] += time.perf_counter() - t0
            yield

    return entered
