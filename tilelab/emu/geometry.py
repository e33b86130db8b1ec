"""Validate launch geometry and shared-memory size the way CUDA does."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .errors import LaunchError

MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_SHARED = 48 * 1024
MAX_SHARED = 227 * 1024
DEFAULT_TIMEOUT = 60.0


def _dims(value: Sequence[int], what: str) -> tuple[int, int, int]:
    try:
        dims = [int(v) for v in value]
    except TypeError as exc:
        raise TypeError(f"{what} must be a tuple of up to 3 ints, got {value!r}") from exc
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"{what} must be a tuple of 1 to 3 ints, got {value!r}")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def check_launch(block: Sequence[int], grid: Sequence[int], shared: int, static_shared: int,
                 max_dynamic: int | None = None
                 ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """Padded ``block`` and ``grid``, and ``shared``; ``LaunchError`` where CUDA would fail.

    ``max_dynamic`` is the kernel's ``MAX_DYNAMIC_SHARED_SIZE_BYTES`` (48 KiB minus its
    static shared memory unless raised with ``set_attribute``).
    """
    b, g = _dims(block, "block"), _dims(grid, "grid")
    shared = int(shared)
    bad = "cuLaunchKernel failed: invalid argument"
    if min(b) < 1 or min(g) < 1:
        raise LaunchError(f"{bad}: every block and grid dimension must be at least 1 "
                          f"(block={b}, grid={g}).")
    if any(x > m for x, m in zip(b, MAX_BLOCK, strict=True)):
        raise LaunchError(f"{bad}: block {b} exceeds the per-dimension limits {MAX_BLOCK}.")
    if b[0] * b[1] * b[2] > MAX_THREADS:
        raise LaunchError(f"{bad}: block {b} has {b[0] * b[1] * b[2]} threads; a block may have "
                          f"at most {MAX_THREADS}.")
    if any(x > m for x, m in zip(g, MAX_GRID, strict=True)):
        raise LaunchError(f"{bad}: grid {g} exceeds the limits {MAX_GRID}.")
    if shared < 0:
        raise LaunchError(f"{bad}: shared={shared} bytes is negative.")
    total = static_shared + shared
    if total > MAX_SHARED:
        raise LaunchError(
            "cuLaunchKernel failed: too many resources requested for launch: the kernel's "
            f"{static_shared} bytes of static shared memory plus shared={shared} bytes of "
            f"dynamic shared memory make {total} bytes, more than the {MAX_SHARED} bytes a "
            "block can have. Use smaller tiles or less dynamic shared memory.")
    limit = max(DEFAULT_SHARED - static_shared, 0) if max_dynamic is None else max_dynamic
    if shared > limit:
        raise LaunchError(
            f"{bad}: shared={shared} bytes of dynamic shared memory is more than this kernel "
            f"may use ({limit} bytes: without an opt-in a block gets {DEFAULT_SHARED} bytes, "
            f"its {static_shared} static bytes included). Opt in first, as on a GPU: "
            "func.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, "
            f"{shared}) (up to {MAX_SHARED} bytes minus the static ones).")
    return b, g, shared


def timeout_seconds(timeout: float | None) -> float:
    """``timeout``, else ``$TILELAB_EMU_TIMEOUT``, else 60 seconds."""
    if timeout is None:
        env = os.environ.get("TILELAB_EMU_TIMEOUT", "").strip()
        try:
            timeout = float(env) if env else DEFAULT_TIMEOUT
        except ValueError:
            timeout = DEFAULT_TIMEOUT
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    return float(timeout)
