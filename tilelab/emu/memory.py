"""Emulated device memory with PyCUDA's names: allocations, copies and argument wrappers.

Device bytes live in the parent process; new memory is poisoned with the 0x7FFFFFFF pattern
(NaN as float or double, INT_MAX as int), as uninitialised device memory might hold.
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from .errors import LogicError

#: The poison pattern: NaN as a float, INT_MAX as an int (little-endian bytes ff ff ff 7f).
POISON_WORD = 0x7FFFFFFF
_BASE = 0x7F0000000000
_next_address = itertools.count(0)
_live: weakref.WeakValueDictionary[int, DeviceAllocation] = weakref.WeakValueDictionary()


def poisoned(nbytes: int) -> np.ndarray:
    """``nbytes`` bytes of the poison pattern (filled a 32-bit word at a time: a thousand
    times faster than repeating the 4 bytes)."""
    words = np.full((nbytes + 3) // 4, POISON_WORD, dtype="<u4").view(np.uint8)
    return words if len(words) == nbytes else words[:nbytes]


class DeviceAllocation:
    """An emulated ``cudaMalloc`` buffer: ``int(alloc)`` is a fake, stable device address."""

    def __init__(self, nbytes: int) -> None:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("cannot allocate a negative number of bytes")
        self.size = nbytes
        self.data: np.ndarray | None = poisoned(nbytes)
        slot = next(_next_address)
        self._address = _BASE + slot * (1 << 32)
        _live[self._address] = self

    def __int__(self) -> int:
        return self._address

    __index__ = __int__

    def __repr__(self) -> str:
        state = "freed" if self.data is None else f"{self.size} bytes"
        return f"<emulated DeviceAllocation {self._address:#x}, {state}>"

    def free(self) -> None:
        """Release the memory; using the allocation afterwards raises ``LogicError``."""
        self.data = None
        _live.pop(self._address, None)

    def bytes_view(self) -> np.ndarray:
        """The allocation's bytes (a uint8 array); ``LogicError`` once freed."""
        if self.data is None:
            raise LogicError(f"device memory at {self._address:#x} was freed (alloc.free())")
        return self.data


def resolve_address(address: int) -> tuple[DeviceAllocation, int]:
    """The allocation holding fake device address ``address``, and the offset into it."""
    slot_base = address - (address - _BASE) % (1 << 32)
    alloc = _live.get(slot_base)
    offset = address - slot_base
    if alloc is None or offset > alloc.size:
        raise LogicError(f"{address:#x} is not the address of live emulated device memory")
    return alloc, offset


def as_allocation(dest: object) -> tuple[DeviceAllocation, int]:
    """Accept an allocation, an object with ``gpudata``, or an integer device address."""
    dest = getattr(dest, "gpudata", dest)
    if isinstance(dest, DeviceAllocation):
        return dest, 0
    if isinstance(dest, (int, np.integer)):
        return resolve_address(int(dest))
    raise TypeError(f"expected emulated device memory, got {type(dest).__name__}")


def _host_bytes(arr: object) -> np.ndarray:
    a = np.asarray(arr)
    if not a.flags.c_contiguous:
        raise ValueError("host arrays must be C-contiguous; use np.ascontiguousarray(a)")
    return a.reshape(-1).view(np.uint8)


def mem_alloc(nbytes: int) -> DeviceAllocation:
    """``cuda.mem_alloc``: a poisoned device buffer of ``nbytes`` bytes."""
    return DeviceAllocation(nbytes)


def memcpy_htod(dest: object, src: object) -> None:
    """Copy a host array (all of it) to device memory."""
    alloc, off = as_allocation(dest)
    data = _host_bytes(src)
    buf = alloc.bytes_view()
    if off + data.size > buf.size:
        raise LogicError(f"cuMemcpyHtoD failed: invalid argument ({data.size} bytes do not fit "
                         f"in the {buf.size - off} bytes of the allocation)")
    buf[off:off + data.size] = data


def memcpy_dtoh(dest: np.ndarray, src: object) -> None:
    """Copy device memory into a host array (as many bytes as the array holds)."""
    alloc, off = as_allocation(src)
    if not isinstance(dest, np.ndarray) or not dest.flags.c_contiguous or not dest.flags.writeable:
        raise ValueError("memcpy_dtoh needs a writeable, C-contiguous NumPy array")
    out = dest.reshape(-1).view(np.uint8)
    buf = alloc.bytes_view()
    if off + out.size > buf.size:
        raise LogicError(f"cuMemcpyDtoH failed: invalid argument ({out.size} bytes asked for, "
                         f"the allocation holds {buf.size - off})")
    out[:] = buf[off:off + out.size]


def memcpy_dtod(dest: object, src: object, size: int) -> None:
    """Copy ``size`` bytes from device memory to device memory (PyCUDA's names: an
    allocation or an integer address, an offset into one, for each)."""
    into, at = as_allocation(dest)
    source, start = as_allocation(src)
    size = int(size)
    buf, data = into.bytes_view(), source.bytes_view()
    if size < 0 or at + size > buf.size or start + size > data.size:
        raise LogicError(f"cuMemcpyDtoD failed: invalid argument ({size} bytes do not fit in "
                         f"the {buf.size - at} bytes of the destination or the "
                         f"{data.size - start} of the source)")
    buf[at:at + size] = data[start:start + size]


def memset_d32(dest: object, value: int, count: int) -> None:
    """Fill ``count`` 32-bit words of device memory with ``value``."""
    into, at = as_allocation(dest)
    buf = into.bytes_view()
    count = int(count)
    if count < 0 or at + 4 * count > buf.size:
        raise LogicError(f"cuMemsetD32 failed: invalid argument ({count} words do not fit in "
                         f"the {buf.size - at} bytes of the allocation)")
    buf[at:at + 4 * count] = np.full(count, int(value) & 0xFFFFFFFF, "<u4").view(np.uint8)


def memcpy_htod_async(dest: object, src: object, stream: object = None) -> None:
    """As ``memcpy_htod`` (copies are synchronous here)."""
    memcpy_htod(dest, src)


def memcpy_dtoh_async(dest: np.ndarray, src: object, stream: object = None) -> None:
    """As ``memcpy_dtoh`` (copies are synchronous here)."""
    memcpy_dtoh(dest, src)


def pagelocked_empty(shape: int | tuple[int, ...], dtype: object, order: str = "C",
                     mem_flags: int = 0) -> np.ndarray:
    """``cuda.pagelocked_empty``: an ordinary host array here (nothing to pin)."""
    return np.empty(shape, dtype, order=order)


def pagelocked_zeros(shape: int | tuple[int, ...], dtype: object, order: str = "C",
                     mem_flags: int = 0) -> np.ndarray:
    """``cuda.pagelocked_zeros``: an ordinary host array of zeros here."""
    return np.zeros(shape, dtype, order=order)


def to_device(arr: np.ndarray) -> DeviceAllocation:
    """``cuda.to_device``: allocate and copy a host array."""
    alloc = DeviceAllocation(np.asarray(arr).nbytes)
    memcpy_htod(alloc, arr)
    return alloc


def from_device(src: object, shape: tuple[int, ...] | int, dtype: object) -> np.ndarray:
    """``cuda.from_device``: a new host array copied from device memory."""
    out = np.empty(shape, dtype)
    memcpy_dtoh(out, src)
    return out


class ArgumentHandler:
    """Base of ``In``/``Out``/``InOut``: a host array the launch copies in and/or out."""

    copy_in = False
    copy_out = False

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{type(self).__name__}() needs a NumPy array")
        if not array.flags.c_contiguous:
            raise ValueError(f"{type(self).__name__}() needs a C-contiguous array; "
                             "use np.ascontiguousarray(a)")
        if self.copy_out and not array.flags.writeable:
            raise ValueError(f"{type(self).__name__}() needs a writeable array")
        self.array = array

    def initial_bytes(self) -> np.ndarray:
        """What device memory holds at launch: the array, or poison for ``Out``."""
        if self.copy_in:
            return self.array.reshape(-1).view(np.uint8)
        return poisoned(self.array.nbytes)


class In(ArgumentHandler):
    """Copy the array to the device before the launch."""

    copy_in = True


class Out(ArgumentHandler):
    """Copy device memory (poisoned at launch) back into the array after the launch."""

    copy_out = True


class InOut(ArgumentHandler):
    """Copy the array in before and back out after the launch."""

    copy_in = True
    copy_out = True


class Context:
    """PyCUDA's context, reduced to what the emulator needs: launches are synchronous."""

    @staticmethod
    def synchronize() -> None:
        """Nothing to wait for: every emulated launch has finished when it returns."""
