"""PyCUDA's ``Function`` methods beyond the call: prepared calls and function attributes,
and the launch limits ptxas's register count sets."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from .attributes import SETTABLE, function_attribute
from .errors import LaunchError, LogicError
from .geometry import DEFAULT_SHARED, MAX_SHARED
from .resources import REGS_PER_BLOCK, KernelResources


def check_registers(res: KernelResources | None, threads: int, name: str, arch: str,
                    bound: int | None = None) -> None:
    """``LogicError`` (PyCUDA's for CUDA_ERROR_INVALID_VALUE, where setting the block shape
    fails) when a block of ``threads`` threads has more than the kernel's
    ``__launch_bounds__`` allows; ``LaunchError`` (a GPU's 'too many resources requested for
    launch') when it needs more registers than a multiprocessor has."""
    if bound is not None and threads > bound:
        raise LogicError(
            f"cuFuncSetBlockShape failed: invalid argument: kernel '{name}' is compiled with "
            f"__launch_bounds__({bound}), so a GPU runs blocks of at most {bound} threads, "
            f"and this block has {threads}. Launch smaller blocks or raise the bound.")
    if res is None or res.block_registers(threads) <= REGS_PER_BLOCK:
        return
    raise LaunchError(
        "cuLaunchKernel failed: too many resources requested for launch: ptxas gives kernel "
        f"'{name}' {res.registers} registers per thread for {arch}, so a block of {threads} "
        f"threads needs {res.block_registers(threads)} registers, more than the "
        f"{REGS_PER_BLOCK} of a multiprocessor; a GPU refuses this launch. Use at most "
        f"{res.max_threads()} threads per block, or fewer registers per thread (a smaller "
        "per-thread tile, or __launch_bounds__(threads) so the compiler fits them).")


def _dtype(code: str) -> np.dtype:
    try:
        return np.dtype(code)
    except TypeError as exc:
        raise LogicError(f"prepare(): {code!r} is not a struct-module type code (use e.g. "
                         "'P' for a pointer, 'i' for int, 'f' for float)") from exc


class FunctionAPI:
    """Mixed into ``Function``: needs ``__call__``, ``name``, ``resources`` and ``static``."""

    name: str
    _arg_types: list[str] | None = None
    _attrs: dict[int, int]
    __call__: Callable[..., float | None]

    def resources(self) -> KernelResources | None:  # overridden
        return None

    def launch_bound(self) -> int | None:  # overridden
        return None

    @property
    def static_shared(self) -> int:  # overridden
        return 0

    # ---- attributes ----
    def get_attribute(self, attr: int) -> int:
        """``func.get_attribute(drv.function_attribute.X)``."""
        a = function_attribute(int(attr))
        res = self.resources()
        values = {
            function_attribute.MAX_THREADS_PER_BLOCK:
                min(res.max_threads() if res else 1024, self.launch_bound() or 1024),
            function_attribute.SHARED_SIZE_BYTES: self.static_shared,
            function_attribute.CONST_SIZE_BYTES: 0,
            function_attribute.LOCAL_SIZE_BYTES: res.local if res else 0,
            function_attribute.NUM_REGS: res.registers if res else 0,
            function_attribute.PTX_VERSION: 90,
            function_attribute.BINARY_VERSION: 90,
            function_attribute.CACHE_MODE_CA: 0,
            function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES:
                max(DEFAULT_SHARED - self.static_shared, 0),
            function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT: -1,
        }
        return self._attrs.get(a, values[a])

    def set_attribute(self, attr: int, value: int) -> None:
        """``func.set_attribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, n)``: the opt-in to more
        than 48 KiB of shared memory per block (checked at launch, as on a GPU)."""
        a = function_attribute(int(attr))
        if a not in SETTABLE:
            raise LogicError(f"cuFuncSetAttribute failed: invalid value ({a.name} is read-only)")
        value = int(value)
        if a == function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES and not (
                0 <= value <= MAX_SHARED - self.static_shared):
            raise LogicError(
                f"cuFuncSetAttribute failed: invalid value ({value} bytes of dynamic shared "
                f"memory; this kernel may have at most {MAX_SHARED - self.static_shared}: "
                f"{MAX_SHARED} minus its {self.static_shared} static bytes)")
        self._attrs[a] = value

    def set_cache_config(self, config: int) -> None:
        """Accepted; the emulator has no L1/shared split to configure."""

    def max_dynamic_shared(self) -> int:
        """The launch limit on ``shared=``: 48 KiB minus static, or what was opted in to."""
        return self.get_attribute(function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES)

    # ---- prepared calls ----
    def prepare(self, arg_types: str | Sequence[object], block: Sequence[int] | None = None,
                shared: int | None = None, texrefs: Sequence[object] = ()) -> FunctionAPI:
        """``func.prepare("PPi")``: the struct-module type code of each argument."""
        if block is not None or shared is not None:
            raise LogicError("prepare(block=..., shared=...) is PyCUDA's old interface; pass "
                             "block to prepared_call(grid, block, *args, shared_size=...)")
        codes = list(arg_types) if isinstance(arg_types, str) else [
            "P" if t in ("P", np.intp, np.uintp) else np.dtype(t).char for t in arg_types]
        for c in codes:
            if c != "P":
                _dtype(c)
        self._arg_types = codes
        return self

    def _prepared_args(self, args: tuple) -> list[object]:
        if self._arg_types is None:
            raise LogicError(f"call {self.name}.prepare(arg_types) before prepared_call")
        if len(args) != len(self._arg_types):
            raise TypeError(f"prepared_call of '{self.name}': prepare() named "
                            f"{len(self._arg_types)} arguments, got {len(args)}")
        out: list[object] = []
        for code, a in zip(self._arg_types, args, strict=True):
            if code == "P":
                out.append(np.uintp(int(a)) if isinstance(a, (int, np.integer)) else a)
            else:
                out.append(_dtype(code).type(a))
        return out

    def prepared_call(self, grid: Sequence[int], block: Sequence[int], *args: object,
                      shared_size: int = 0) -> None:
        """Launch with arguments converted as ``prepare`` said."""
        self(*self._prepared_args(args), grid=grid, block=block, shared=shared_size)

    def prepared_async_call(self, grid: Sequence[int], block: Sequence[int], stream: object,
                            *args: object, shared_size: int = 0) -> None:
        """As ``prepared_call`` (launches are synchronous here)."""
        self.prepared_call(grid, block, *args, shared_size=shared_size)

    def prepared_timed_call(self, grid: Sequence[int], block: Sequence[int], *args: object,
                            shared_size: int = 0) -> Callable[[], float]:
        """As ``prepared_call``; returns a function giving the emulation's seconds."""
        t0 = time.perf_counter()
        self.prepared_call(grid, block, *args, shared_size=shared_size)
        elapsed = time.perf_counter() - t0
        return lambda: elapsed
