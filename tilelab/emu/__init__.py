"""CPU emulator for CUDA C kernels written for PyCUDA's ``SourceModule``.

Runs kernels on the CPU with PyCUDA's call signatures, so they can be written and checked
without a GPU; poisons shared and fresh device memory, runs threads in orders that expose
missing barriers, reports out-of-bounds accesses and divergent barriers, and (with
``analysis=True``) finds shared-memory races and bank conflicts.

The source scanners (``mask``, ``find_kernels``, ``param_name``, ``file_directives``) and
the ``#include`` allow-list are exported for the grader, which refuses a source before any
compiler sees it with the same reading of C the emulator uses.
"""

from .checks import ALLOWED_INCLUDES, file_directives
from .errors import (
    BarrierDivergence,
    CompileError,
    EmulatorError,
    KernelCrash,
    KernelTimeout,
    LaunchError,
    LogicError,
    OutOfBoundsAccess,
    UnsupportedConstruct,
)
from .kernels import find_kernels, param_name
from .lexer import mask
from .memory import (
    Context,
    DeviceAllocation,
    In,
    InOut,
    Out,
    from_device,
    mem_alloc,
    memcpy_dtoh,
    memcpy_htod,
    to_device,
)
from .module import Function, SourceModule, analyze
from .report import AnalysisReport, BankLine, LaunchReport, Race

__all__ = [
    "ALLOWED_INCLUDES",
    "AnalysisReport",
    "BankLine",
    "BarrierDivergence",
    "CompileError",
    "Context",
    "DeviceAllocation",
    "EmulatorError",
    "Function",
    "In",
    "InOut",
    "KernelCrash",
    "KernelTimeout",
    "LaunchError",
    "LaunchReport",
    "LogicError",
    "Out",
    "OutOfBoundsAccess",
    "Race",
    "SourceModule",
    "UnsupportedConstruct",
    "analyze",
    "file_directives",
    "find_kernels",
    "from_device",
    "mask",
    "mem_alloc",
    "memcpy_dtoh",
    "memcpy_htod",
    "param_name",
    "to_device",
]
