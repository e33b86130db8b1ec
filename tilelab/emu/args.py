"""Check kernel arguments against the parameter descriptors and plan the buffers to map."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .memory import ArgumentHandler, DeviceAllocation, as_allocation


@dataclass
class BufferPlan:
    """One device buffer of a launch: its bytes at launch and where results go."""

    initial: np.ndarray  # uint8
    elem: int
    align: int
    sink: np.ndarray | None  # uint8 view the results are copied into (None: discard)
    params: list[int] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return int(self.initial.size)


@dataclass
class ArgPlan:
    """Scalars' bytes per parameter, buffers, and (buffer, byte offset) per pointer parameter."""

    scalars: dict[int, bytes] = field(default_factory=dict)
    pointers: dict[int, tuple[int, int]] = field(default_factory=dict)
    buffers: list[BufferPlan] = field(default_factory=list)


def numpy_type(p: dict) -> str:
    """The NumPy scalar type matching a scalar parameter, e.g. ``np.int32``."""
    if p["is_floating"]:
        return {4: "np.float32", 8: "np.float64"}.get(p["size"], "np.float64")
    if p["size"] in (1, 2, 4, 8):
        return f"np.{'int' if p['is_signed'] else 'uint'}{8 * p['size']}"
    return f"a {p['size']}-byte NumPy structured scalar"


def _describe(p: dict) -> str:
    if p["is_floating"]:
        return f"a {p['size']}-byte floating-point value"
    return f"a {p['size']}-byte {'signed' if p['is_signed'] else 'unsigned'} integer"


def _label(i: int, p: dict) -> str:
    return f"parameter #{i} (0-based) `{p['text'] or '?'}`"


def plan_arguments(kernel: dict, args: tuple) -> ArgPlan:
    """Validate ``args`` for ``kernel`` (its descriptor) like PyCUDA, with clearer messages."""
    params = kernel["params"]
    if len(args) != len(params):
        sig = ", ".join(p["text"] for p in params)
        raise TypeError(f"kernel '{kernel['name']}({sig})' takes {len(params)} arguments, "
                        f"got {len(args)}")
    plan = ArgPlan()
    by_alloc: dict[int, int] = {}
    for i, (p, a) in enumerate(zip(params, args, strict=True)):
        if isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
            hint = (f"wrap it: {numpy_type(p)}({a!r})" if not p["is_pointer"] else
                    "pass a DeviceAllocation or cuda.In/Out/InOut(array)")
            raise TypeError(f"invalid type on parameter #{i} (0-based): a plain Python "
                            f"{type(a).__name__} for `{p['text']}`; {hint}")
        if p["is_pointer"]:
            _plan_pointer(plan, by_alloc, i, p, a)
        else:
            plan.scalars[i] = _scalar_bytes(i, p, a)
    return plan


def _plan_pointer(plan: ArgPlan, by_alloc: dict[int, int], i: int, p: dict, a: object) -> None:
    elem, align = max(p["pointee_size"], 1), max(p["pointee_align"], 1)
    if isinstance(a, ArgumentHandler):
        sink = a.array.reshape(-1).view(np.uint8) if a.copy_out else None
        plan.buffers.append(BufferPlan(a.initial_bytes(), elem, align, sink, [i]))
        plan.pointers[i] = (len(plan.buffers) - 1, 0)
        return
    if isinstance(a, np.ndarray):
        raise TypeError(f"{_label(i, p)} needs device memory, got a NumPy array: wrap it as "
                        "cuda.In(a), cuda.Out(a) or cuda.InOut(a), or copy it with "
                        "cuda.to_device(a)")
    ok = isinstance(a, DeviceAllocation) or hasattr(a, "gpudata") or (
        isinstance(a, np.integer) and a.dtype.itemsize == 8)
    if not ok:
        raise TypeError(f"invalid type on parameter #{i} (0-based): {type(a).__name__} for "
                        f"`{p['text']}`, which needs device memory (a DeviceAllocation, an "
                        "object with .gpudata, or cuda.In/Out/InOut(array))")
    alloc, offset = as_allocation(a)
    data = alloc.bytes_view()
    if id(alloc) not in by_alloc:
        by_alloc[id(alloc)] = len(plan.buffers)
        plan.buffers.append(BufferPlan(data, elem, align, data, []))
    b = by_alloc[id(alloc)]
    plan.buffers[b].params.append(i)
    plan.pointers[i] = (b, offset)


def _scalar_bytes(i: int, p: dict, a: object) -> bytes:
    if isinstance(a, (ArgumentHandler, DeviceAllocation)) or hasattr(a, "gpudata"):
        raise TypeError(f"{_label(i, p)} is {_describe(p)}, not a pointer, but got device "
                        f"memory; pass {numpy_type(p)}(value)")
    if not isinstance(a, np.generic):
        raise TypeError(f"invalid type on parameter #{i} (0-based): {type(a).__name__} for "
                        f"`{p['text']}`; pass {numpy_type(p)}(value)")
    dt = a.dtype
    if dt.kind == "V":
        ok = dt.itemsize == p["size"] and not p["is_floating"]
    else:
        ok = dt.itemsize == p["size"] and (dt.kind == "f") == bool(p["is_floating"]) \
            and dt.kind in "biuf"
    if not ok:
        raise TypeError(f"{_label(i, p)} is {_describe(p)}, but got numpy.{dt.name} "
                        f"({dt.itemsize} bytes); pass {numpy_type(p)}(value)")
    return a.tobytes()
