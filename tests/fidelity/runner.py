"""Run generated cases on a backend with PyCUDA's interface: the CPU emulator
(``tilelab.emu``) or PyCUDA on a GPU (``pycuda.driver``), the same arguments, the same launch.

Outputs are passed with their initial bytes (``InOut``), so an element a kernel leaves
unwritten reads the same on both sides; a ``ptr`` argument is device memory passed as its
address plus an offset, as a gpuarray view is.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .corpus import Case, Module
from .outcome import Outcome, from_emulator, from_pycuda

#: Seconds one emulated launch may take (a generated kernel takes milliseconds).
EMU_TIMEOUT = 20.0


def kernel_args(drv: Any, case: Case) -> tuple[list[Any], Callable[[], dict[int, np.ndarray]]]:
    """The launch arguments of ``case`` for driver ``drv``, and a function reading its
    outputs back after the launch."""
    args: list[Any] = []
    hosts: dict[int, np.ndarray] = {}
    ptrs: dict[int, tuple[Any, np.ndarray]] = {}
    for i, a in enumerate(case.args):
        if a.role == "scalar":
            args.append(a.value[()])
        elif a.role == "in":
            args.append(drv.In(a.value.copy()))
        elif a.role == "out":
            hosts[i] = a.value.copy()
            args.append(drv.InOut(hosts[i]))
        else:  # ptr: raw device memory, passed offset bytes in
            data = np.ascontiguousarray(a.value).view(np.uint8).copy()
            alloc = drv.mem_alloc(max(data.nbytes, 1))
            drv.memcpy_htod(alloc, data)
            ptrs[i] = (alloc, data)
            args.append(np.uintp(int(alloc) + a.offset))

    def read() -> dict[int, np.ndarray]:
        outs = dict(hosts)
        for i, (alloc, data) in ptrs.items():
            if case.args[i].out:
                back = np.empty_like(data)
                drv.memcpy_dtoh(back, alloc)
                outs[i] = back.view(case.args[i].value.dtype)
        return outs

    return args, read


def set_attributes(drv: Any, func: Any, case: Case) -> None:
    for name, value in case.attrs:
        func.set_attribute(getattr(drv.function_attribute, name), int(value))


# ---- the emulator ---------------------------------------------------------------------------
def emu_build(module: Module) -> tuple[Any, Outcome | None]:
    """``(SourceModule, None)``, or ``(None, refusal)`` when the emulator refuses the source."""
    import tilelab.emu as emu

    try:
        return emu.SourceModule(module.source, options=list(module.options),
                                no_extern_c=module.no_extern_c), None
    except Exception as exc:  # the outcome is the refusal
        return None, from_emulator(exc)


def emu_launch(mod: Any, case: Case) -> Outcome:
    """One case on an emulated module."""
    import tilelab.emu as emu

    t0 = time.perf_counter()
    sink = io.StringIO()
    try:
        func = mod.get_function(case.symbol)
        set_attributes(emu, func, case)
        args, read = kernel_args(emu, case)
        with contextlib.redirect_stdout(sink):
            func(*args, block=case.block, grid=case.grid, shared=case.shared,
                 timeout=EMU_TIMEOUT)
        out = Outcome("ok", outputs=read())
        report = func.last_report
        out.stdout = report.stdout if report else ""
    except Exception as exc:  # the outcome is the error
        out = from_emulator(exc)
    out.seconds = time.perf_counter() - t0
    return out


def emu_run(module: Module) -> dict[str, Outcome]:
    """Every case of ``module`` on the emulator; a module that does not build is built again
    case by case, so one refused kernel refuses only itself."""
    mod, refusal = emu_build(module)
    if refusal is not None:
        if len(module.cases) == 1:
            return {module.cases[0].id: refusal}
        out: dict[str, Outcome] = {}
        for c in module.cases:
            out.update(emu_run(Module(module.options, module.no_extern_c, [c])))
        return out
    return {c.id: emu_launch(mod, c) for c in module.cases}


# ---- PyCUDA on a GPU ---------------------------------------------------------------------------
@contextlib.contextmanager
def captured_fd1() -> Iterator[Callable[[], str]]:
    """What the process writes on file descriptor 1 meanwhile (CUDA's printf goes there, at
    the synchronising call after the kernel)."""
    libc = ctypes.CDLL(None)
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        text: list[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            text.append(tmp.read().decode("utf-8", errors="replace"))


def gpu_launch(drv: Any, mod: Any, case: Case) -> Outcome:
    """One case on a loaded PyCUDA module; the context is synchronised before the outputs
    are read, so a fault is this case's."""
    t0 = time.perf_counter()
    out = Outcome("ok")
    with captured_fd1() as text:
        try:
            func = mod.get_function(case.symbol)
            set_attributes(drv, func, case)
            args, read = kernel_args(drv, case)
            func(*args, block=case.block, grid=case.grid, shared=case.shared)
            drv.Context.synchronize()
            out.outputs = read()
        except Exception as exc:  # the outcome is the error
            out = from_pycuda(exc)
    out.stdout = text()
    out.seconds = time.perf_counter() - t0
    return out
