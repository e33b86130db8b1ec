"""The parts of ``pycuda.driver`` the harness uses, over the emulator; a kernel's fault
is raised as PyCUDA raises it (a LaunchError naming CUDA's error), and poisons the
context as a GPU's fault does."""

from __future__ import annotations

import pickle

import tilelab.emu as emu

In, Out, InOut = emu.In, emu.Out, emu.InOut
mem_alloc, memcpy_htod, memcpy_dtoh = emu.mem_alloc, emu.memcpy_htod, emu.memcpy_dtoh
function_attribute = emu.function_attribute
_dead = False


class Error(Exception):
    pass


class CompileError(Error):
    def __init__(self, msg, command_line, stdout=None, stderr=None):
        super().__init__(msg)
        self.stderr = stderr


class LaunchError(Error):
    pass


class LogicError(Error):
    pass


def _words(exc: Exception) -> str:
    if isinstance(exc, emu.OutOfBoundsAccess):
        return "an illegal memory access was encountered"
    if "misaligned" in str(exc).lower():
        return "misaligned address"
    if isinstance(exc, emu.KernelCrash) and "assertion" in str(exc):
        return "device-side assert triggered"
    return "unspecified launch failure"


class _Function:
    def __init__(self, f):
        self._f = f

    def set_attribute(self, attr, value):
        self._f.set_attribute(attr, value)

    def __call__(self, *args, **kw):
        global _dead
        if _dead:
            raise LaunchError("cuLaunchKernel failed: unspecified launch failure")
        try:
            self._f(*args, **kw)
        except emu.LogicError as exc:
            raise LogicError(f"cuModuleGetFunction failed: named symbol not found ({exc})") \
                from None
        except emu.LaunchError as exc:
            if "too many resources" in str(exc) or "invalid argument" in str(exc):
                raise LaunchError(f"cuLaunchKernel failed: {exc}") from None
            _dead = True
            raise LaunchError(f"cuMemcpyDtoH failed: {_words(exc)}") from None


class _Module:
    def __init__(self, mod):
        self._mod = mod

    def get_function(self, name):
        try:
            return _Function(self._mod.get_function(name))
        except emu.LogicError as exc:
            raise LogicError(f"cuModuleGetFunction failed: named symbol not found ({exc})") \
                from None


def module_from_buffer(buf):
    source, options, no_extern_c = pickle.loads(buf)
    return _Module(emu.SourceModule(source, options=list(options), no_extern_c=no_extern_c))


def init():
    pass


class Context:
    @staticmethod
    def synchronize():
        if _dead:
            raise LaunchError("cuCtxSynchronize failed: unspecified launch failure")

    def pop(self):
        pass


class Device:
    def __init__(self, n):
        self.n = n

    def make_context(self):
        return Context()
