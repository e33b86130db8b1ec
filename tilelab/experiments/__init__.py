"""The measurements behind the book: one module per data file.

``tilelab/experiments/<name>.py`` writes ``book/data/<name>.json``; ``ls`` shows the
course's progression. ``tilelab bench NAME... --out book/data`` runs them; every file
carries its provenance (GPU, driver, CUDA, PyCUDA, date, command) through
:mod:`tilelab.experiments.datafile`, which the book reads through too.

An experiment module defines ``run(rt, out) -> Path``; ``rt`` is the GPU runtime for the
experiments that need one and ``None`` for those that run on the CPU. Registering one is
a line in :data:`EXPERIMENTS`. This module imports nothing of the course (the book asks
:func:`needs_gpu` without loading PyCUDA or the emulator); :mod:`.runner` runs them.
"""

from __future__ import annotations

#: Experiment name -> whether it needs a GPU, in the order ``tilelab bench`` runs them.
EXPERIMENTS: dict[str, bool] = {
    "device": True,
    "matmul": True,
    "transpose": True,
    "elementwise": True,
    "bank_stride": True,
    "occupancy": True,
    "sass": True,
    "racecheck": True,
    "calibration": True,
    "shared_bw": True,
    "divergence": True,
    "waves": True,
    "latency": True,
    "bank_wide": True,
    "counters": True,
    "emu_analysis": False,
    "model": False,
    "cublas_check": True,
    "sgemm": True,
    "sgemm_ptxas": False,
    "shared_gpu": True,
    "counters_load": True,
    "start_load": True,
    "gpu_sharing": True,
}
ALL = tuple(EXPERIMENTS)


def needs_gpu(name: str) -> bool:
    """Whether the experiment ``name`` measures a GPU (unknown names: assume it does)."""
    return EXPERIMENTS.get(name, True)


def check_names(names: list[str]) -> None:
    """Raise ``KeyError`` naming the unknown experiments, if any."""
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise KeyError(f"unknown experiment(s) {unknown}; choose from {', '.join(ALL)}")

