"""How long the emulator's launches of a check may run, and how many at once.

One emulated launch is limited to a base (the fork and the copies) plus its work at the
slowest rate a course kernel runs at (:func:`emu_launch_seconds`); a check's launches
together to one base plus all their work (:func:`emu_check_seconds`); and they run as
many at once as this process has cores for (:func:`emu_lanes`). ``TILELAB_EMU_TIMEOUT``,
where set, limits every launch instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from tilelab.catalog.problems import Problem, Shape

#: An emulated launch's time limit: a base for the fork and the copies, plus the work at
#: the slowest rate a course kernel runs at on a loaded CPU (the reference kernels run at
#: 1e7 to 2e8 flop/s on the emulator): an endless loop at a small shape is stopped in
#: seconds, a slow correct kernel at the largest shape is not.
EMU_LAUNCH_BASE_S = 5.0
EMU_WORK_PER_S = 2e6  # flops (or bytes moved, for data movement) a second
#: The least a check's launches have together (:func:`emu_check_seconds`): some twenty
#: times what the slowest exercise's reference check takes on an idle 2-core machine
EMU_CHECK_MIN_S = 20.0


def _emu_timeout_set() -> bool:
    """Whether ``$TILELAB_EMU_TIMEOUT`` is set: the emulator then limits every launch to it,
    and the grader's own limits stand aside."""
    return bool(os.environ.get("TILELAB_EMU_TIMEOUT", "").strip())


def emu_check_seconds(problem: Problem, shapes: Sequence[Shape]) -> float | None:
    """The time budget of a check's emulated launches together, from the first one's start:
    one base and every shape's work at the slowest rate (each launch's own limit,
    :func:`emu_launch_seconds`, gives every launch the base: a kernel that waits out most
    of each limit could stretch a check to their sum), and at least :data:`EMU_CHECK_MIN_S`.
    None where ``$TILELAB_EMU_TIMEOUT`` is set, as for one launch."""
    if _emu_timeout_set():
        return None
    work = sum(problem.work(s) for s in shapes)
    return round(max(EMU_CHECK_MIN_S, EMU_LAUNCH_BASE_S + work / EMU_WORK_PER_S), 1)


#: At most this many of a check's emulated launches run at once (see :func:`emu_lanes`).
MAX_EMU_LANES = 4


def emu_lanes() -> int:
    """How many of a check's emulated launches may run at once, each a process of its own:
    the CPU cores this process may use (its affinity, and ``OMP_NUM_THREADS`` where a
    scheduler set it: Dask's nanny sets 1, one task to a core), at most
    :data:`MAX_EMU_LANES`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    with contextlib.suppress(ValueError):
        cores = min(cores, int(os.environ.get("OMP_NUM_THREADS", "") or cores))
    return max(1, min(cores, MAX_EMU_LANES))


def emu_launch_seconds(problem: Problem, shape: Shape) -> float | None:
    """The time limit of one emulated launch at ``shape`` (None: ``$TILELAB_EMU_TIMEOUT``
    is set, and the emulator applies it)."""
    if _emu_timeout_set():
        return None
    return round(EMU_LAUNCH_BASE_S + problem.work(shape) / EMU_WORK_PER_S, 1)
