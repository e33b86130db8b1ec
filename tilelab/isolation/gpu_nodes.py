"""The one GPU a sandbox may touch: the grader's own.

A grader with several GPUs in view (a Dask worker of a multi-GPU machine sees every GPU,
its own first in ``CUDA_VISIBLE_DEVICES``) must not hand them all to a submission: code
in a notebook can set ``CUDA_VISIBLE_DEVICES`` itself before CUDA starts, pick another
worker's GPU, and slow that worker's speed measurements. An environment variable is no
wall, so the sandbox gets the device node of the grader's GPU only (``/dev/nvidiaN``, and
the shared control nodes); the CUDA driver cannot open a GPU whose node is absent.

The grader's GPU is the first ``CUDA_VISIBLE_DEVICES`` names (an index in PCI bus order,
as ``nvidia-smi`` counts, or a ``GPU-`` UUID), or GPU 0 where the variable is unset (set
empty, it leaves the sandbox no GPU, as it leaves CUDA none); its node's minor number
comes from ``/proc/driver/nvidia/gpus/<bus id>/information``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = "/proc/driver/nvidia/gpus"
_NODE = re.compile(r"/dev/nvidia(\d+)$")


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver names it."""

    index: int  # nvidia-smi's index (PCI bus order)
    uuid: str  # GPU-...
    bus_id: str  # 0000:18:00.0, as /proc/driver/nvidia/gpus names it
    minor: int  # N of /dev/nvidiaN


def parse_smi(text: str) -> list[tuple[int, str, str]]:
    """``nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader`` ->
    (index, uuid, bus id with a 4-digit domain, lower case)."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        domain, _, rest = parts[2].lower().partition(":")
        out.append((int(parts[0]), parts[1], f"{domain[-4:]}:{rest}"))
    return out


def minor_number(bus_id: str, proc: str | Path = PROC) -> int | None:
    """The device minor of the GPU at ``bus_id`` (its ``/dev/nvidiaN``), or None."""
    try:
        text = (Path(proc) / bus_id / "information").read_text()
    except OSError:
        return None
    found = re.search(r"^Device Minor:\s*(\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def nvidia_smi(*args: str, timeout: float = 60) -> str:
    """What ``nvidia-smi args`` prints; "" where there is no driver or it fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        return subprocess.run([smi, *args], capture_output=True, text=True, timeout=timeout,
                              check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def listing(proc: str | Path = PROC) -> list[Gpu]:
    """Every GPU of this machine; empty where ``nvidia-smi`` cannot say."""
    text = nvidia_smi("--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader")
    gpus = []
    for index, uuid, bus in parse_smi(text):
        minor = minor_number(bus, proc)
        if minor is not None:
            gpus.append(Gpu(index, uuid, bus, minor))
    return gpus


def pick(visible: str | None, gpus: Sequence[Gpu]) -> Gpu | None:
    """The GPU that ``CUDA_VISIBLE_DEVICES=visible`` makes device 0; None where it names
    none of ``gpus`` (a MIG instance, a typo)."""
    first = "0" if visible is None else visible.split(",")[0].strip()
    for gpu in gpus:
        if (first.isdigit() and int(first) == gpu.index) or (
            first.startswith("GPU-") and gpu.uuid.startswith(first)
        ):
            return gpu
    return None


def only(nodes: Sequence[str], gpu: Gpu) -> list[str]:
    """``nodes`` without the GPU nodes of every other GPU (control nodes are kept)."""
    return [n for n in nodes if not (m := _NODE.match(n)) or int(m.group(1)) == gpu.minor]


@functools.cache
def own_gpu(visible: str | None) -> Gpu | None:
    """The grader's GPU for ``CUDA_VISIBLE_DEVICES=visible`` (None where it cannot be told)."""
    return pick(visible, listing())


@functools.cache
def _warn_unknown(visible: str | None, count: int) -> None:
    warnings.warn(
        f"tilelab: cannot tell which of this machine's {count} GPUs "
        f"CUDA_VISIBLE_DEVICES={visible!r} names (nvidia-smi and /proc/driver/nvidia must "
        "say); every GPU's node is bound into the sandboxes, so a submission could use "
        "another grader's GPU: give each grader one GPU, by index or GPU- UUID",
        RuntimeWarning, stacklevel=3,
    )


def sandbox_gpu(nodes: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The device nodes to bind into a sandbox and its ``CUDA_VISIBLE_DEVICES``: only the
    grader's own GPU where it can be told, every node otherwise (with a warning where
    there are several)."""
    count = sum(bool(_NODE.match(n)) for n in nodes)
    if not count:
        return list(nodes), {}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():  # set empty: CUDA shows no GPU
        return [n for n in nodes if not _NODE.match(n)], {}
    gpu = own_gpu(visible)
    if gpu is None:
        if count > 1:
            _warn_unknown(visible, count)
        return list(nodes), {}
    return only(nodes, gpu), {"CUDA_VISIBLE_DEVICES": gpu.uuid}
