"""Choose the backend that runs kernels: PyCUDA on a GPU, or the CPU emulator.

``TILELAB_BACKEND`` overrides the automatic choice: ``gpu`` (fail if none), ``emu``
(always the emulator) or ``auto`` (the default: a GPU when PyCUDA finds one).
"""

from __future__ import annotations

import functools
from pathlib import Path

from tilelab import settings

ENV_VAR = settings.BACKEND.name
CHOICES = ("auto", "gpu", "emu")


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
    """Whether PyCUDA can see a CUDA GPU, and why not when it cannot."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return False, f"PyCUDA is not installed ({install_gpu_hint()})"
    except Exception as exc:  # a broken install reports many things
        return False, f"PyCUDA failed to import: {exc}"
    try:
        cuda.init()
        count = cuda.Device.count()
    except Exception as exc:
        return False, f"no CUDA driver or device: {exc}"
    if count == 0:
        return False, "the CUDA driver sees no device"
    return True, cuda.Device(0).name()


def active() -> str:
    """The backend kernels run on now: ``"gpu"`` or ``"emu"``."""
    choice = requested()
    if choice == "emu":
        return "emu"
    ok, why = gpu_probe()
    if choice == "gpu" and not ok:
        raise BackendError(
            f"{ENV_VAR}=gpu but no GPU is usable: {why}. "
            f"Unset {ENV_VAR} (or set it to emu) to run on the CPU emulator."
        )
    return "gpu" if ok else "emu"
