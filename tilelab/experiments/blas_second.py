"""cuBLAS's SGEMM through a second binding, in a process of its own: PyTorch's ``torch.mm``
(TF32 off), else CuPy's ``matmul``, timed the way the bench times (the L2 flushed, the GPU
given a lead, CUDA events, a sample whose launch was queued after the lead ran out timed
again, the median). :mod:`tilelab.experiments.cublas_check` holds the ctypes binding that
the book's tables use against it.

The child imports no PyCUDA and nothing of the course's GPU runtime: the binding makes its
own context (the primary one), as a program that calls cuBLAS through it would.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: GPU busy time before each timed launch, and the late-sample rule (as the bench's)
LEAD_MS = 0.5
WARMUP = 3


class NoBinding(RuntimeError):
    """Neither PyTorch nor CuPy could run cuBLAS here; the message says why."""


def _torch() -> tuple[str, Callable[[int], Callable[[], None]], Callable[[], None], Any]:
    import torch

    if not torch.cuda.is_available():
        raise NoBinding("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2 // 4, 1 << 20), dtype=torch.float32, device="cuda")
    clock_hz = 2.0e9  # an upper bound of the SM clock: the lead lasts at least LEAD_MS

    def make(n: int) -> Callable[[], None]:
        g = torch.Generator(device="cuda").manual_seed(n)
        a = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
        b = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
        c = torch.empty(n, n, device="cuda")
        return lambda: torch.mm(a, b, out=c)

    def lead() -> None:
        flush.zero_()
        torch.cuda._sleep(int(LEAD_MS * 1e-3 * clock_hz))

    version = f"torch {torch.__version__} (torch.mm, allow_tf32 off)"
    return version, make, lead, torch.cuda


def _cupy() -> tuple[str, Callable[[int], Callable[[], None]], Callable[[], None], Any]:
    import cupy

    l2 = cupy.cuda.Device(0).attributes["L2CacheSize"]
    flush = cupy.empty(max(2 * l2 // 4, 1 << 20), dtype=cupy.float32)

    def make(n: int) -> Callable[[], None]:
        rng = cupy.random.default_rng(n)
        a = rng.uniform(-1, 1, (n, n), dtype=cupy.float32)
        b = rng.uniform(-1, 1, (n, n), dtype=cupy.float32)
        c = cupy.empty((n, n), dtype=cupy.float32)
        return lambda: cupy.matmul(a, b, out=c)

    def lead() -> None:  # memsets queued until the GPU has LEAD_MS of them ahead
        for _ in range(12):
            flush.fill(0)

    return f"cupy {cupy.__version__} (cupy.matmul)", make, lead, cupy.cuda


def _binding():
    problems = []
    for load in (_torch, _cupy):
        try:
            return load()
        except Exception as exc:  # an absent or broken binding: try the next one
            problems.append(f"{load.__name__[1:]}: {exc}")
    raise NoBinding("no second cuBLAS binding: " + "; ".join(problems))


def child(sizes: Sequence[int], repeat: int) -> dict[str, Any]:
    """Time cuBLAS's SGEMM at each N x N x N through the binding: medians by N."""
    version, make, lead, cuda = _binding()
    out: dict[str, Any] = {"binding": version, "ms": {}, "redone": {}}
    for n in sizes:
        run = make(n)
        for _ in range(WARMUP):
            run()
        start, end = _events(cuda)
        samples, redone = [], 0
        while len(samples) < (repeat if n <= 4096 else max(repeat // 2, 10)):
            lead()
            t0 = time.perf_counter()
            start.record()
            run()
            submitted = (time.perf_counter() - t0) * 1e3
            end.record()
            end.synchronize()
            if submitted > LEAD_MS:
                redone += 1
                if redone > 4 * repeat:
                    raise RuntimeError("the host held the second binding's launches up")
                continue
            samples.append(_elapsed(cuda, start, end))
        out["ms"][str(n)] = statistics.median(samples)
        out["redone"][str(n)] = redone
    return out


def _events(cuda):
    if hasattr(cuda, "Event") and hasattr(cuda.Event, "elapsed_time"):  # torch.cuda
        return cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    return cuda.Event(), cuda.Event()


def _elapsed(cuda, start, end) -> float:
    if hasattr(start, "elapsed_time"):
        return float(start.elapsed_time(end))
    return float(cuda.get_elapsed_time(start, end))


def measure(sizes: Sequence[int], repeat: int = 30, timeout: float = 300) -> dict[str, Any]:
    """The second binding's medians at ``sizes``, from a child process (its own context)."""
    p = subprocess.run([sys.executable, "-m", __name__, str(repeat), *map(str, sizes)],
                       capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise NoBinding(f"the second binding's child failed (rc {p.returncode}):\n"
                        + (p.stdout + p.stderr)[-2000:])
    got = json.loads(lines[-1])
    got["ms"] = {int(k): v for k, v in got["ms"].items()}
    got["redone"] = {int(k): v for k, v in got["redone"].items()}
    return got


if __name__ == "__main__":
    print(json.dumps(child([int(a) for a in sys.argv[2:]], int(sys.argv[1]))))
