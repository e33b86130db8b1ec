"""Errors the CPU emulator raises: each says what went wrong and what to do about it."""

from __future__ import annotations


class EmulatorError(RuntimeError):
    """Base class of every error the emulator raises."""


#: How :func:`tilelab.emu.compile.clean_errors` heads g++'s errors on the learner's kernel.
DID_NOT_COMPILE = "kernel.cu did not compile:\n"


class CompileError(EmulatorError):
    """The kernel source did not compile (or was rejected before compiling).

    ``msg`` is the cleaned-up message (g++'s errors against the learner's ``kernel.cu``
    lines), ``stderr`` the compiler's raw output, ``lines`` the learner's line numbers named.
    """

    def __init__(self, msg: str, stderr: str = "", lines: tuple[int, ...] = ()) -> None:
        super().__init__(msg)
        self.msg = msg
        self.stderr = stderr
        self.lines = tuple(lines)


class UnsupportedConstruct(CompileError):
    """The source uses a CUDA feature the CPU emulator cannot run."""

    def __init__(self, construct: str, line: int | None = None, hint: str = "") -> None:
        where = f" (kernel.cu line {line})" if line else ""
        msg = (
            f"{construct} is not supported by the CPU emulator{where}; "
            f"run this kernel on a GPU{hint}."
        )
        super().__init__(msg, lines=(line,) if line else ())
        self.construct = construct
        self.line = line


class LogicError(EmulatorError):
    """Misuse of the API, like PyCUDA's ``pycuda._driver.LogicError``."""


class LaunchError(EmulatorError):
    """The kernel launch failed, or the kernel failed while running."""


class OutOfBoundsAccess(LaunchError):
    """A kernel read or wrote outside a buffer (or a shared array)."""

    def __init__(self, msg: str, *, buffer: str = "", access: str = "", index: int | None = None,
                 line: int | None = None, block: tuple[int, ...] | None = None,
                 thread: tuple[int, ...] | None = None) -> None:
        super().__init__(msg)
        self.buffer = buffer
        self.access = access
        self.index = index
        self.line = line
        self.block = block
        self.thread = thread


class MisalignedAccess(LaunchError):
    """A load or store at an address that is not a multiple of its type's alignment (a
    float4 off 16 bytes): a GPU stops the kernel with "misaligned address"."""

    def __init__(self, msg: str, *, buffer: str = "", access: str = "",
                 offset: int | None = None, align: int = 0, type_name: str = "",
                 line: int | None = None, block: tuple[int, ...] | None = None,
                 thread: tuple[int, ...] | None = None) -> None:
        super().__init__(msg)
        self.buffer = buffer
        self.access = access
        self.offset = offset  # bytes from the start of the buffer or shared memory
        self.align = align
        self.type_name = type_name
        self.line = line
        self.block = block
        self.thread = thread


class BarrierDivergence(LaunchError):
    """A ``__syncthreads()`` was not reached by every thread of a block at the same line."""

    def __init__(self, msg: str, *, lines: tuple[int, ...] = (),
                 block: tuple[int, ...] | None = None) -> None:
        super().__init__(msg)
        self.lines = lines
        self.block = block


class KernelTimeout(LaunchError):
    """The kernel did not finish within the time limit."""


class LaunchStopped(LaunchError):
    """The launch was stopped before it ended because its caller no longer wanted its
    result (a check that had already failed at another shape)."""


class KernelCrash(LaunchError):
    """The kernel died: a signal, an abort, a failed ``assert``, a stack overflow."""

    def __init__(self, msg: str, *, line: int | None = None) -> None:
        super().__init__(msg)
        self.line = line
