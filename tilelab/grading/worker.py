"""The grading worker: ``python -m tilelab.grading.worker``, the child process
:mod:`tilelab.grading.sandbox` starts for one kernel source.

Its first act is to cap its own resources (before it reads the learner's source); then it
runs :func:`tilelab.grading.pipeline.evaluate` and writes the JSON verdict. With
``--launch-once`` it is the program compute-sanitizer or Nsight Compute watches instead:
launches of the kernel on the GPU.

On a GPU that a class run's tasks share (:mod:`tilelab.isolation.gpulock`), each holds the
GPU's lock only around what puts work on it: its CUDA context's start and teardown, and
each launch with its copies (shared; the launch Nsight Compute counts with the GPU's one
profiler, and alone where the setting says so).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# one BLAS thread (before numpy loads): this process's emulated launches fork on threads
# of their own, and OpenBLAS's thread pool does not survive a fork made while it works
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from tilelab.device.backend import Backend, resolve
from tilelab.grading import sidecar
from tilelab.isolation import gpulock
from tilelab.isolation.limits import FILE_LIMIT, MEMORY_LIMIT


def limit_resources(backend: Backend) -> None:
    """Caps on written files, core dumps and (on the emulator) memory, for this process and
    everything it starts."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if backend is Backend.EMU:  # CUDA maps huge address ranges; cap only the emulator
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tilelab.grading.worker")
    p.add_argument("--exercise", required=True)
    p.add_argument("--source", required=True, help="file with the kernel source")
    p.add_argument("--out", help="where to write the JSON verdict: a file, or fd:N for a pipe "
                   "the parent made (the sandbox's result channel)")
    p.add_argument("--backend", choices=("gpu", "emu"))
    p.add_argument("--no-speed", action="store_true")
    p.add_argument("--no-sanitize", action="store_true")
    p.add_argument("--gate", type=float)
    p.add_argument("--trace-reference", action="store_true",
                   help="where the verdict carries the kernel's trace, the reference's too")
    p.add_argument("--launch-once", action="store_true",
                   help="only launch the kernel once on the GPU (for compute-sanitizer, "
                   "or Nsight Compute with --at speed)")
    p.add_argument("--at", choices=("sanitize", "speed"), default="sanitize",
                   help="the shape of --launch-once: the problem's sanitize shape, or the "
                   "exercise's speed shape")
    p.add_argument("--launches", type=int, default=1,
                   help="with --launch-once --at speed: after one launch at every graded "
                   "shape, launch this many times at the speed shape, each on new inputs")
    p.add_argument("--shape", help="with --launch-once: the problem's sizes, comma-separated "
                   "(one launch there, instead of --at's)")
    p.add_argument("--lock", choices=(gpulock.SHARED, gpulock.ALONE), default=gpulock.SHARED,
                   help="with --launch-once, on a GPU a class run shares: how each launch "
                   "(with --counted, the counted one) takes the GPU's lock (alone: no other "
                   "task's work beside it)")
    p.add_argument("--wait", action="store_true",
                   help="with --launch-once: start CUDA, then wait for 'go' on standard input "
                   "before reading the source (the grader's tools start ahead of the grade)")
    p.add_argument("--counted", type=int, default=-1,
                   help="with --launch-once: the launch (0-based, of all it makes) Nsight "
                   "Compute counts; it alone holds the GPU's one profiler and --lock's "
                   "mode, the others share the GPU")
    return p


def launch_once(exercise_id: str, source_path: str, at: str = "sanitize",
                launches: int = 1, shape: tuple[int, ...] = (),
                lock: str = gpulock.SHARED, counted: int = -1, wait: bool = False) -> None:
    """One launch at ``shape``, else at the problem's ``sanitize_shape`` (what
    compute-sanitizer inspects); or, for Nsight Compute, the launches a graded run makes:
    one at every graded shape, then ``launches`` at the exercise's speed shape as the timed
    run makes them (:func:`launch_plan`; ncu counts one of the timed ones, drawn by the
    grader). Each launch holds the GPU's lock as ``lock`` says, or, where ``counted`` names
    the launch ncu counts, that one holds this GPU's one profiler and ``lock``'s mode and the
    launches before it share the GPU, in one hold (several ncu processes then overlap but
    for their counted launches: the driver serves one profiled launch at a time). Under
    ncu, its first-profile set-up is done once CUDA has started (:func:`counters.warm_up`)
    and the counted launch alone is profiled besides (:func:`counters.profiled`). Making
    inputs holds nothing. With ``wait``, the source is read only once the grader says go on
    standard input (:mod:`tilelab.grading.sidecar`); nothing is launched when it never
    does. The CUDA driver starts on a thread while the process imports
    (:func:`~tilelab.device.backend.begin_driver_start`)."""
    from tilelab.device import backend

    backend.begin_driver_start()
    import numpy as np

    from tilelab.catalog import exercises
    from tilelab.device.runtime import get_runtime, start_driver
    from tilelab.grading import counters
    from tilelab.grading.steps import build

    ex = exercises.get(exercise_id)
    sidecar.mark("imported")
    start_driver()  # the tool's own start with it, before the GPU's lock: no GPU work
    sidecar.mark("driver")
    rt = gpulock.start_cuda(lambda: get_runtime(backend.Backend.GPU))
    sidecar.mark("cuda")
    with ThreadPoolExecutor(1) as pool:  # the inputs, made while ncu sets itself up
        planned = pool.submit(launch_plan, exercise_id, at, launches, shape,
                              np.random.default_rng())
        if counted >= 0:  # under Nsight Compute: its first-profile set-up, now
            counters.warm_up()
            sidecar.mark("warmed")
        once, sets = planned.result()
    sidecar.mark("ready")
    if wait and not sidecar.wait_for_go(sys.stdin):
        return
    sidecar.mark("go")
    with open(source_path, encoding="utf-8") as f:
        fn = build(rt, f.read()).get_function(ex.kernel)
    sidecar.mark("built")
    _launch_planned(_planned(rt, fn, ex, once, sets), counted, lock)
    sidecar.mark("launched")


def _planned(rt: Any, fn: Any, ex: Any, once: list, sets: Any) -> Iterator[Callable[[], None]]:
    """:func:`launch_plan`'s launches of ``fn``, in order, each ready to run: those made
    once, then a speed run's rotation over ``sets`` (its pools and buffers made on the GPU
    at the first of them)."""
    import numpy as np

    from tilelab.device.bench import DevicePools, Rotation, Timed
    from tilelab.grading.correctness import launch
    from tilelab.grading.diagnosis import POISON_BITS

    for s, inputs in once:
        given = {k: np.ascontiguousarray(a) for k, a in inputs.items()}  # CPU copies first
        yield functools.partial(launch, rt, fn, ex.problem, ex.launch, s, given)
    if sets is None:
        return
    with gpulock.shared():  # the pools and buffers, on the GPU once (freed at the exit)
        pools = DevicePools(rt, sets)
        rotation = Rotation(rt, Timed(fn, ex.launch), ex.problem, ex.speed_shape,
                            sets[0], POISON_BITS)
        rt.synchronize()
    for j in range(len(sets)):
        yield functools.partial(_launch_rotated, rt, rotation, pools, j)


def _launch_planned(plan: Iterator[Callable[[], None]], counted: int, lock: str) -> None:
    """Run the planned launches, each holding the GPU as :func:`launch_lock` says: those
    before the counted one in one shared hold, none after it."""
    from tilelab.grading import counters

    i = 0
    if counted > 0:  # ncu's launches before the counted one: one shared hold, not one each
        with gpulock.shared():  # (each hold waits behind a timed round awaiting the GPU)
            for _, run in zip(range(counted), plan):  # noqa: B905 (plan may be longer)
                run()
                i += 1
    sidecar.mark("pre")
    for run in plan:  # the counted launch (ncu has what it counts: no later one), or
        with (launch_lock(i, counted, lock),  # with none counted, each as --lock says
              counters.profiled() if i == counted else contextlib.nullcontext()):
            run()
        if i == counted:
            break
        i += 1


def _launch_rotated(rt: Any, rotation: Any, pools: Any, j: int) -> None:
    """Launch ``j`` of a speed run's rotation, on inputs no other launch saw."""
    rotation.prepare(j, pools)()
    rt.synchronize()


@contextlib.contextmanager
def launch_lock(i: int, counted: int, lock: str) -> Iterator[None]:
    """How :func:`launch_once`'s launch ``i`` holds a shared GPU: as ``lock`` says where no
    launch is counted (``counted`` < 0); the counted one with this GPU's one profiler and
    ``lock``'s mode; any other one shared."""
    if counted < 0:
        with gpulock.region(lock):
            yield
    elif i == counted:
        with gpulock.profiler(), gpulock.region(lock):
            yield
    else:
        with gpulock.shared():
            yield


def launch_plan(exercise_id: str, at: str, launches: int, shape: tuple[int, ...],
                rng: Any) -> tuple[list[tuple[tuple[int, ...], dict[str, Any]]], Any]:
    """The launches :func:`launch_once` makes, in order: the shape and inputs of each
    launch made once (at ``shape`` or the sanitize shape; or, at ``"speed"``, at every
    graded shape), then, at ``"speed"``, the speed shape's :class:`InputSets` (one set per
    launch, drawn as the timed run draws them; else None)."""
    from tilelab.catalog import exercises
    from tilelab.device.bench import InputSets

    ex = exercises.get(exercise_id)
    if shape or at == "sanitize":
        one = shape or ex.problem.sanitize_shape
        return [(one, ex.problem.make_inputs(one, rng))], None
    once = [(s, ex.problem.make_inputs(s, rng)) for s in ex.shapes]
    return once, InputSets(ex.problem.make_inputs, ex.speed_shape, rng, max(1, launches))


def grade(a: argparse.Namespace, backend: Backend) -> dict:
    """The verdict of ``a.source`` on ``backend``, as JSON-ready data; the grader's own
    failure says so. Its ``timeline`` also says when (seconds from here) the GPU's tools
    were started, CUDA was ready, the grade began and ended."""
    t0 = time.perf_counter()
    from tilelab.device.backend import begin_driver_start
    from tilelab.grading import ahead
    from tilelab.grading.verdict import Verdict

    with open(a.source, "rb") as f:
        source = f.read()
    gpu = backend is Backend.GPU
    tools: ahead.Ahead | None = None
    marks: dict[str, float] = {}
    try:
        with gpulock.private() if gpu else contextlib.nullcontext():
            if gpu:  # the tools first (they start slower), then CUDA's start: GPU work
                tools = ahead.start(a.exercise, speed=not a.no_speed, sanitize=not a.no_sanitize)
                marks["worker_tools_started"] = time.perf_counter() - t0
                begin_driver_start()  # beside the imports below
            from tilelab.device.runtime import get_runtime, start_driver  # after the tools
            from tilelab.grading.pipeline import evaluate

            if gpu:
                start_driver()
                gpulock.start_cuda(lambda: get_runtime(Backend.GPU))
                marks["worker_cuda_ready"] = time.perf_counter() - t0
            marks["worker_grade_began"] = time.perf_counter() - t0
            verdict = evaluate(a.exercise, source, backend, speed=not a.no_speed,
                               sanitize=not a.no_sanitize, gate=a.gate, ahead=tools,
                               trace_reference=a.trace_reference)
    except Exception as exc:  # never crash silently
        verdict = Verdict(exercise=a.exercise, backend=backend.value,
                          error=f"{type(exc).__name__}: {exc}")
        verdict.messages.append(f"internal grader error: {f'{type(exc).__name__}: {exc}'[:300]}")
        traceback.print_exc()
    finally:
        if tools is not None:  # not taken (a grade stopped early): ended here
            tools.stop()
    marks["worker_graded"] = time.perf_counter() - t0
    verdict.timeline |= {k: round(t, 3) for k, t in marks.items()}
    return verdict.to_dict()


def main(argv: list[str] | None = None, exit_at_once: bool = False) -> int:
    """Grade (or, with ``--launch-once``, launch for a tool); ``exit_at_once``: once the
    verdict is written, end the process there (:func:`os._exit`)."""
    a = parser().parse_args(argv)
    if a.launch_once:
        launch_once(a.exercise, a.source, a.at, a.launches,
                    tuple(int(n) for n in a.shape.split(",")) if a.shape else (), a.lock,
                    a.counted, a.wait)
        return 0
    backend = resolve(a.backend)  # decided once, here, for the whole grade
    limit_resources(backend)
    if not a.out:
        parser().error("--out is required to grade")
    if a.out.startswith("fd:"):  # keep the channel from every process this one starts
        os.set_inheritable(int(a.out[3:]), False)
    data = json.dumps(grade(a, backend)).encode()
    if a.out.startswith("fd:"):
        fd = int(a.out[3:])
        while data:
            data = data[os.write(fd, data):]
        os.close(fd)
    else:
        with open(a.out, "wb") as f:
            f.write(data)
    if exit_at_once:  # what is left, the operating system reclaims at once: the CUDA
        # context's own teardown would hold the sandbox, and the verdict, a while longer
        # (a tool's worker ends normally: Nsight Compute and compute-sanitizer finish
        # their reports as it exits)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(exit_at_once=True))
