"""CPU emulator for CUDA C kernels written for PyCUDA's ``SourceModule``.

Runs kernels on the CPU with PyCUDA's call signatures, so they can be written and checked
without a GPU; poisons shared and fresh device memory, runs threads in orders that expose
missing barriers, meets the lanes of a warp at warp-level calls, reports out-of-bounds
accesses, divergent barriers and launches a GPU would refuse, and (with ``analysis=True``)
finds races (in shared and global memory) and bank conflicts. It also stands in for the parts of
``pycuda.driver`` and ``pycuda.gpuarray`` the course uses.

The source scanners (``mask``, ``find_kernels``, ``param_name``, ``file_directives``) and
the ``#include`` allow-list are exported for the grader, which refuses a source before any
compiler sees it with the same reading of C the emulator uses.
"""

from . import gpuarray
from .attributes import func_cache, function_attribute
from .checks import ALLOWED_INCLUDES, file_directives
from .errors import (
    BarrierDivergence,
    CompileError,
    EmulatorError,
    KernelCrash,
    KernelTimeout,
    LaunchError,
    LaunchStopped,
    LogicError,
    MisalignedAccess,
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
    memcpy_dtod,
    memcpy_dtoh,
    memcpy_dtoh_async,
    memcpy_htod,
    memcpy_htod_async,
    memset_d32,
    pagelocked_empty,
    pagelocked_zeros,
    to_device,
)
from .module import Function, SourceModule, analyze
from .report import AnalysisReport, BankLine, LaunchReport, Race
from .streams import Event, Stream

__all__ = [
    "ALLOWED_INCLUDES",
    "AnalysisReport",
    "BankLine",
    "BarrierDivergence",
    "CompileError",
    "Context",
    "DeviceAllocation",
    "EmulatorError",
    "Event",
    "Function",
    "In",
    "InOut",
    "KernelCrash",
    "KernelTimeout",
    "LaunchError",
    "LaunchReport",
    "LaunchStopped",
    "LogicError",
    "MisalignedAccess",
    "Out",
    "OutOfBoundsAccess",
    "Race",
    "SourceModule",
    "Stream",
    "UnsupportedConstruct",
    "analyze",
    "file_directives",
    "find_kernels",
    "from_device",
    "func_cache",
    "function_attribute",
    "gpuarray",
    "mask",
    "mem_alloc",
    "memcpy_dtod",
    "memcpy_dtoh",
    "memcpy_dtoh_async",
    "memcpy_htod",
    "memcpy_htod_async",
    "memset_d32",
    "pagelocked_empty",
    "pagelocked_zeros",
    "param_name",
    "to_device",
]


def __getattr__(name: str) -> object:
    """A clear error for the parts of ``pycuda.driver`` the emulator does not have."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"the CPU emulator (tilelab.emu, standing in for pycuda.driver) has no {name!r}. It "
        "has: SourceModule, mem_alloc, memcpy_htod/dtoh(_async), memcpy_dtod, memset_d32, "
        "to_device, from_device, In, Out, InOut, pagelocked_empty/zeros, Event, Stream, "
        "Context.synchronize, function_attribute, gpuarray. Run "
        "on a GPU (PyCUDA) for the rest, or do that step in NumPy.")
