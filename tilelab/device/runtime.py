"""The runtime facade: PyCUDA's objects on a GPU, the CPU emulator's otherwise.

Both backends expose the same call signatures (``SourceModule(src).get_function(name)``,
``fn(*args, block=..., grid=..., shared=...)``, ``In``/``Out``/``InOut``, ``mem_alloc``,
``memcpy_htod``/``memcpy_dtoh``/``memcpy_dtod``, ``memset_d32``), so a notebook, the
grader and the benchmarks run one code path; ``rt.driver`` is ``pycuda.driver`` or the
emulator's stand-in for it (events, streams, function attributes) and ``rt.gpuarray``
``pycuda.gpuarray`` or its basics.
``get_runtime(backend)`` gives the runtime of a backend :func:`tilelab.device.backend.resolve`
decided; what a backend's builds and launches raise is part of its runtime
(:attr:`Runtime.compile_errors`, :attr:`~Runtime.kernel_faults`, :attr:`~Runtime.launch_errors`).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilelab import emu
from tilelab.device import backend
from tilelab.device.backend import Backend
from tilelab.emu.compile import base_caches


@dataclass(frozen=True)
class Runtime:
    """One backend's entry points, with PyCUDA's names."""

    name: Backend
    SourceModule: Any
    In: Any
    Out: Any
    InOut: Any
    mem_alloc: Any
    memcpy_htod: Any
    memcpy_dtoh: Any
    memcpy_dtod: Any
    memset_d32: Any
    device_name: str
    _synchronize: Any
    driver: Any = None  # pycuda.driver, or the emulator's stand-in (Event, Stream, ...)
    gpuarray: Any = None  # pycuda.gpuarray, or the emulator's basics of it
    #: what a failed build raises
    compile_errors: tuple[type[BaseException], ...] = ()
    #: what a launch raises for a fault of the kernel's own (an illegal address, a launch it
    #: cannot run): never for the grader's (a wrong argument type, a bad copy)
    kernel_faults: tuple[type[BaseException], ...] = ()
    #: what a launch (and its copies) may raise
    launch_errors: tuple[type[BaseException], ...] = ()
    #: on a GPU, the compiler run ahead of the module's load (nvcc into PyCUDA's cache,
    #: with nothing held: see :func:`tilelab.grading.steps.build`); None on the emulator
    compile_ahead: Any = None

    def to_device(self, array: np.ndarray) -> Any:
        """Allocate device memory and copy a contiguous host array into it."""
        array = np.ascontiguousarray(array)
        dev = self.mem_alloc(max(array.nbytes, 1))
        if array.nbytes:
            self.memcpy_htod(dev, array)
        return dev

    def from_device(self, dev: Any, shape: tuple[int, ...] | int, dtype: Any) -> np.ndarray:
        """Copy a device buffer back into a new host array of this shape and dtype."""
        out = np.empty(shape, dtype=dtype)
        if out.nbytes:
            self.memcpy_dtoh(out, dev)
        return out

    def synchronize(self) -> None:
        """Wait for all launched work (a no-op on the emulator)."""
        self._synchronize()

    def describe(self) -> str:
        """One line saying where kernels run, for notebooks and reports."""
        if self.name is Backend.GPU:
            return f"GPU backend: {self.device_name} (PyCUDA)"
        _, why = backend.gpu_probe()
        return (
            f"CPU emulator backend ({self.device_name}); no GPU in use: {why}. "
            f"Set {backend.ENV_VAR}=gpu to require one."
        )


#: PyCUDA's builds under a read-only base cache (``$TILELAB_CACHE_BASE``, made once per
#: class run): a grading sandbox starts with them instead of running nvcc again
PYCUDA_CACHE = "pycuda"


def seed_pycuda_cache() -> None:
    """Make the PyCUDA cache folder ``$PYCUDA_CACHE_DIR`` names (PyCUDA makes only its
    default one), and link the base caches' PyCUDA builds into it (PyCUDA writes on every
    miss, so it cannot use a read-only cache itself). Several processes of one sandbox
    seed it at once (the grading worker and its GPU tools): a build another one linked
    meanwhile is left as it is, and a copy lands whole or not at all."""
    bases = [b for b in base_caches(PYCUDA_CACHE) if b.is_dir()]
    if bases:
        os.environ.setdefault("PYCUDA_CACHE_DIR",
                              os.path.join(tempfile.gettempdir(), "tilelab-pycuda"))
    if not os.environ.get("PYCUDA_CACHE_DIR"):
        return
    target = Path(os.environ["PYCUDA_CACHE_DIR"])
    target.mkdir(parents=True, exist_ok=True)
    for base in bases:
        for built in base.iterdir():
            if built.is_file():
                _seed(built, target / built.name)


def _seed(built: Path, into: Path) -> None:
    """``into`` a link to ``built`` (read in place: it costs nothing), else a copy of it;
    nothing where ``into`` is there already."""
    try:
        os.symlink(built, into)
        return
    except FileExistsError:  # here before, or seeded by another process meanwhile
        return
    except OSError:
        pass
    part = into.with_name(f".{into.name}.{os.getpid()}")
    shutil.copyfile(built, part)
    try:
        os.link(part, into)  # never over a build that is there already
    except FileExistsError:
        pass
    finally:
        part.unlink()


def start_driver() -> None:
    """The CUDA driver's start (``cuInit``: no context, no GPU memory; in a process that a
    profiler or sanitizer watches, their own start too, most of it), which a shared GPU's
    lock need not cover: :func:`get_runtime` then makes the context. Where
    :func:`backend.begin_driver_start` began it on a thread, that start is waited for."""
    backend.driver_started()
    import pycuda.driver as cuda

    cuda.init()


def _gpu_runtime() -> Runtime:
    seed_pycuda_cache()
    import pycuda.autoinit  # noqa: F401  (creates the context)
    import pycuda.driver as cuda
    import pycuda.gpuarray as gpuarray
    from pycuda.compiler import SourceModule
    from pycuda.compiler import compile as nvcc

    return Runtime(
        name=Backend.GPU,
        SourceModule=SourceModule,
        In=cuda.In,
        Out=cuda.Out,
        InOut=cuda.InOut,
        mem_alloc=cuda.mem_alloc,
        memcpy_htod=cuda.memcpy_htod,
        memcpy_dtoh=cuda.memcpy_dtoh,
        memcpy_dtod=cuda.memcpy_dtod,
        memset_d32=cuda.memset_d32,
        device_name=cuda.Context.get_device().name(),
        _synchronize=cuda.Context.synchronize,
        driver=cuda,
        gpuarray=gpuarray,
        compile_errors=(cuda.CompileError,),
        kernel_faults=(cuda.LaunchError,),
        launch_errors=(cuda.Error, TypeError, ValueError),
        compile_ahead=nvcc,
    )


def _emu_runtime() -> Runtime:
    return Runtime(
        name=Backend.EMU,
        SourceModule=emu.SourceModule,
        In=emu.In,
        Out=emu.Out,
        InOut=emu.InOut,
        mem_alloc=emu.mem_alloc,
        memcpy_htod=emu.memcpy_htod,
        memcpy_dtoh=emu.memcpy_dtoh,
        memcpy_dtod=emu.memcpy_dtod,
        memset_d32=emu.memset_d32,
        device_name="kernels run on the CPU",
        _synchronize=emu.Context.synchronize,
        driver=emu,
        gpuarray=emu.gpuarray,
        compile_errors=(emu.CompileError,),
        kernel_faults=(emu.EmulatorError,),
        launch_errors=(emu.EmulatorError, TypeError, ValueError),
    )


@functools.cache
def get_runtime(chosen: Backend | str) -> Runtime:
    """The runtime of the backend ``chosen`` (a :class:`Backend`, or its name)."""
    if chosen not in tuple(Backend):
        raise backend.BackendError(f"unknown backend {chosen!r}; use 'gpu' or 'emu'")
    return _gpu_runtime() if chosen == Backend.GPU else _emu_runtime()
