"""Choose the backend that runs kernels: PyCUDA on a GPU, or the CPU emulator.

:func:`resolve` decides it once, at each entry point (the command line, a notebook's
calls, the grading worker, a class run), and the :class:`Backend` it gives is passed
down from there. ``TILELAB_BACKEND`` overrides the automatic choice: ``gpu`` (fail if
none), ``emu`` (always the emulator) or ``auto`` (the default: a GPU when PyCUDA finds
one); a name given on the command line (``--backend``) wins over it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import enum
import functools
import importlib.util
import sys
import threading
from pathlib import Path

from tilelab import settings

ENV_VAR = settings.BACKEND.name


class Backend(enum.StrEnum):
    """Where kernels run. Its value is the name a user writes (``--backend``,
    ``TILELAB_BACKEND``) and a verdict records."""

    GPU = "gpu"
    EMU = "emu"


class BackendError(RuntimeError):
    """The requested backend cannot be used here."""


def requested() -> str:
    """The backend asked for through ``TILELAB_BACKEND`` (``auto`` when unset)."""
    try:
        return settings.BACKEND.get()
    except settings.SettingsError as exc:
        raise BackendError(str(exc)) from None


def install_gpu_hint() -> str:
    """How to add PyCUDA where the course was installed from: a checkout of the course
    (its requirements-gpu.txt beside the package) or a wheel (Colab, pip)."""
    if (Path(__file__).resolve().parents[2] / "requirements-gpu.txt").is_file():
        return "pip install -r requirements-gpu.txt"
    return 'pip install "tilelab[gpu]"'


@functools.cache
def gpu_probe() -> tuple[bool, str]:
    """Whether PyCUDA is installed and the CUDA driver sees a GPU (the device's name), and
    why not when it cannot. Asked of the driver itself, without loading PyCUDA (NumPy and
    its driver module take longer to load than the driver takes to answer): a grade that
    only chooses its backend here starts its worker that much sooner."""
    if importlib.util.find_spec("pycuda") is None:
        return False, f"PyCUDA is not installed ({install_gpu_hint()})"
    return driver_device()


def _driver_library() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")


def driver_device() -> tuple[bool, str]:
    """Whether the CUDA driver (``libcuda``) sees a device, and its first device's name
    (or why not)."""
    try:
        lib = _driver_library()
    except OSError as exc:
        return False, f"no CUDA driver or device: {exc}"
    count, device = ctypes.c_int(0), ctypes.c_int(0)
    name = ctypes.create_string_buffer(256)
    for call, args in (("cuInit", (0,)), ("cuDeviceGetCount", (ctypes.byref(count),))):
        if (rc := getattr(lib, call)(*args)) != 0:
            return False, f"no CUDA driver or device: {call} failed (CUDA error {rc})"
    if count.value == 0:
        return False, "the CUDA driver sees no device"
    if lib.cuDeviceGet(ctypes.byref(device), 0) != 0 or \
            lib.cuDeviceGetName(name, len(name), device) != 0:
        return False, "no CUDA driver or device: the driver could not name device 0"
    return True, name.value.decode(errors="replace")


_STARTING: threading.Thread | None = None


def begin_driver_start() -> None:
    """Start the CUDA driver (``cuInit``) on a thread of its own, so that it overlaps what
    this process imports next: ctypes lets go of the GIL for the call (on an H200, under
    Nsight Compute, a grading worker's ``cuInit`` takes about 0.3 s and its imports about
    0.6 s). :func:`driver_started` waits for it, as ``tilelab.device.runtime.start_driver``
    does. Where no driver loads or it fails, nothing: PyCUDA's own start says why."""
    global _STARTING
    if _STARTING is None:
        _STARTING = threading.Thread(target=_cu_init, name="tilelab-cuInit", daemon=True)
        _STARTING.start()
        atexit.register(_STARTING.join)  # never leave the driver mid-start at the exit


def _cu_init() -> None:
    with contextlib.suppress(OSError, AttributeError):
        _driver_library().cuInit(0)


def driver_started() -> None:
    """Wait for :func:`begin_driver_start`'s thread, where one was begun."""
    if _STARTING is not None:
        _STARTING.join()


def resolve(name: Backend | str | None = None) -> Backend:
    """The backend ``name`` names (``"gpu"`` or ``"emu"``: as asked, whether or not a GPU
    is here); where None (or ``"auto"``), the one ``TILELAB_BACKEND`` asks for, else a GPU
    where PyCUDA finds one and the emulator otherwise. Called once at each entry point;
    what it gives is passed down."""
    if isinstance(name, Backend):
        return name
    if name is not None and name != "auto":
        try:
            return Backend(name)
        except ValueError:
            raise BackendError(f"unknown backend {name!r}; use 'gpu' or 'emu'") from None
    choice = requested()
    if choice == Backend.EMU:
        return Backend.EMU
    ok, why = gpu_probe()
    if choice == Backend.GPU and not ok:
        raise BackendError(
            f"{ENV_VAR}=gpu but no GPU is usable: {why}. "
            f"Unset {ENV_VAR} (or set it to emu) to run on the CPU emulator."
        )
    return Backend.GPU if ok else Backend.EMU
