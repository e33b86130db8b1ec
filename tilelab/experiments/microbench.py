"""Helpers shared by the microbenchmark experiments (divergence, waves, latency,
shared_bw)."""

from __future__ import annotations

NO_FLUSH = (
    "CUDA events around each launch; 5 warm-up launches; median of 20 runs; the launches "
    "of one table interleaved launch by launch; no L2 flush (the kernel reads no input)"
)


def device_attr(name: str) -> int:
    """One attribute of the current device (PyCUDA's ``device_attribute`` names)."""
    import pycuda.driver as cuda

    return cuda.Context.get_device().get_attribute(getattr(cuda.device_attribute, name))
