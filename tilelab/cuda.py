"""PyCUDA-shaped names for notebooks: ``from tilelab.cuda import SourceModule, In, Out``.

The backend is chosen on first use (a GPU through PyCUDA when one is usable, the CPU
emulator otherwise; ``TILELAB_BACKEND`` overrides). ``describe()`` says which.
"""

from __future__ import annotations

from typing import Any

from tilelab.runtime import get_runtime

_FORWARDED = {
    "SourceModule",
    "In",
    "Out",
    "InOut",
    "mem_alloc",
    "memcpy_htod",
    "memcpy_dtoh",
    "to_device",
    "from_device",
    "synchronize",
    "describe",
}


def backend_name() -> str:
    """``"gpu"`` or ``"emu"``."""
    return get_runtime().name


def __dir__() -> list[str]:
    return sorted([*_FORWARDED, "backend_name"])


def __getattr__(name: str) -> Any:
    if name in _FORWARDED:
        return getattr(get_runtime(), name)
    raise AttributeError(f"module 'tilelab.cuda' has no attribute {name!r}")
