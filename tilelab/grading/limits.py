"""What one grading worker may use: the worker sets these on itself, the sandbox names
them when a worker dies of one; and how long one emulated launch may run."""

import os

from tilelab.catalog.problems import Problem, Shape

MEMORY_LIMIT = 6 * 1024**3  # address space of an emulator grading process
FILE_LIMIT = 64 * 1024**2  # any file the worker writes, its stderr included

#: An emulated launch's time limit: a base for the fork and the copies, plus the work at
#: the slowest rate a course kernel runs at on a loaded CPU (the reference kernels run at
#: 1e7 to 2e8 flop/s on the emulator): an endless loop at a small shape is stopped in
#: seconds, a slow correct kernel at the largest shape is not.
EMU_LAUNCH_BASE_S = 5.0
EMU_WORK_PER_S = 2e6  # flops (or bytes moved, for data movement) a second


def emu_launch_seconds(problem: Problem, shape: Shape) -> float | None:
    """The time limit of one emulated launch at ``shape`` (None: ``$TILELAB_EMU_TIMEOUT``
    is set, and the emulator applies it)."""
    if os.environ.get("TILELAB_EMU_TIMEOUT", "").strip():
        return None
    work = max(problem.flops(shape), problem.bytes_moved(shape))
    return round(EMU_LAUNCH_BASE_S + work / EMU_WORK_PER_S, 1)
