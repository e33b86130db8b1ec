"""Timing course kernels side by side on one GPU, as every timed experiment does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelab.catalog.problems import Shape
from tilelab.catalog.reference import KERNELS
from tilelab.device.bench import (
    LATE_MS,
    LEAD_MS,
    REPEAT,
    WARMUP,
    Timing,
    prepared_launch,
    time_interleaved,
)
from tilelab.device.runtime import Runtime

#: How the timed experiments measure (the ``method`` of their provenance).
METHOD = (
    f"CUDA events around each launch; {WARMUP} warm-up launches; median of {REPEAT} "
    "runs; the kernels of one table interleaved launch by launch; L2 flushed before "
    f"every timed launch and the GPU given a {LEAD_MS:g} ms lead (the host's way to the "
    f"launch is not timed: a sample whose launch was queued more than {LATE_MS:g} ms after "
    "its start event is timed again); random float32 inputs, one set per table and size, "
    "shared by its kernels"
)


def compile_kernel(rt: Runtime, key: str):
    """The compiled function of the course kernel ``key`` (see ``reference.KERNELS``)."""
    k = KERNELS[key]
    return rt.SourceModule(k.source()).get_function(k.name)


def time_ladder(
    rt: Runtime, keys: list[str], shape: Shape, rng: np.random.Generator
) -> dict[str, Timing]:
    """The kernels ``keys`` (one problem) on the same inputs, timed interleaved."""
    problem = KERNELS[keys[0]].problem
    inputs = problem.make_inputs(shape, rng)
    keep: list = []
    runs = {
        k: prepared_launch(
            rt, compile_kernel(rt, k), KERNELS[k].problem, KERNELS[k].launch, shape, inputs, keep
        )
        for k in keys
    }
    return time_interleaved(runs)


def simple_launches(
    rt: Runtime, source: str, names: list[str], make: Callable[[Any], Callable[[], None]]
) -> dict[str, Callable[[], None]]:
    """``make(function)`` for each kernel ``names`` of ``source``: launches to time."""
    mod = rt.SourceModule(source)
    return {name: make(mod.get_function(name)) for name in names}
