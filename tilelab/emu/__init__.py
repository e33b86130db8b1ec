"""CPU emulator for CUDA C kernels written for PyCUDA's ``SourceModule``.

Runs kernels on the CPU with PyCUDA's call signatures, so they can be written and checked
without a GPU; poisons shared and fresh device memory, runs threads in orders that expose
missing barriers, reports out-of-bounds accesses and divergent barriers, and (with
``analysis=True``) finds shared-memory races and bank conflicts.
"""

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
    "from_device",
    "mem_alloc",
    "memcpy_dtoh",
    "memcpy_htod",
    "to_device",
]
