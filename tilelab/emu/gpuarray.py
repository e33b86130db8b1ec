"""The basics of ``pycuda.gpuarray`` on the emulator: device arrays to pass to kernels.

``to_gpu``, ``empty``, ``zeros``, ``empty_like``, ``zeros_like`` and ``GPUArray.get/set/fill``
work; a ``GPUArray`` passes as a kernel argument (its ``gpudata``). Arithmetic and the
reductions of PyCUDA's GPUArray do not exist here: the error says what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .memory import DeviceAllocation, memcpy_dtoh, memcpy_htod


class GPUArray:
    """An array in emulated device memory (shape, dtype, C order)."""

    def __init__(self, shape: int | Sequence[int], dtype: object,
                 gpudata: DeviceAllocation | None = None) -> None:
        self.shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        self.gpudata = gpudata if gpudata is not None else DeviceAllocation(self.nbytes)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<emulated GPUArray shape={self.shape} dtype={self.dtype}>"

    @property
    def ptr(self) -> int:
        """The (fake) device address, as PyCUDA's ``GPUArray.ptr``."""
        return int(self.gpudata)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def get(self, ary: np.ndarray | None = None) -> np.ndarray:
        """Copy to a host array (a new one unless ``ary`` is given)."""
        out = np.empty(self.shape, self.dtype) if ary is None else ary
        if out.nbytes:
            memcpy_dtoh(out, self.gpudata)
        return out

    def set(self, ary: np.ndarray) -> None:
        """Copy a host array of the same size into this one."""
        a = np.ascontiguousarray(ary, dtype=self.dtype)
        if a.size != self.size:
            raise ValueError(f"set(): the array has {a.size} elements, this GPUArray {self.size}")
        if a.nbytes:
            memcpy_htod(self.gpudata, a)

    def fill(self, value: object) -> GPUArray:
        """Set every element to ``value``."""
        self.set(np.full(self.shape, value, self.dtype))
        return self

    def __getattr__(self, name: str) -> object:
        raise NotImplementedError(
            f"GPUArray.{name} is not available on the CPU emulator, which has only the "
            "basics of pycuda.gpuarray (to_gpu, empty, zeros, get, set, fill). Do the "
            "computation in NumPy on a.get() (or write it as a kernel), then to_gpu() it back.")

    def _arith(self, *_: object) -> GPUArray:
        raise NotImplementedError(
            "arithmetic on GPUArrays is not available on the CPU emulator; compute on "
            "a.get() with NumPy (or in a kernel) and to_gpu() the result.")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
    __truediv__ = __rtruediv__ = __neg__ = __pow__ = _arith


def to_gpu(ary: np.ndarray) -> GPUArray:
    """A device copy of a host array."""
    a = np.ascontiguousarray(ary)
    out = GPUArray(a.shape, a.dtype)
    out.set(a)
    return out


def empty(shape: int | Sequence[int], dtype: object = np.float64) -> GPUArray:
    """An uninitialised device array (its bytes hold the emulator's poison pattern)."""
    return GPUArray(shape, dtype)


def zeros(shape: int | Sequence[int], dtype: object = np.float64) -> GPUArray:
    """A device array of zeros."""
    return GPUArray(shape, dtype).fill(0)


def empty_like(other: GPUArray) -> GPUArray:
    """An uninitialised array of ``other``'s shape and dtype."""
    return GPUArray(other.shape, other.dtype)


def zeros_like(other: GPUArray) -> GPUArray:
    """Zeros of ``other``'s shape and dtype."""
    return zeros(other.shape, other.dtype)
