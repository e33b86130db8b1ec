"""Where a measurement came from: GPU, driver, CUDA, PyCUDA, date and command."""

from __future__ import annotations

import datetime as _dt
import platform
import re
import shlex
import shutil
import subprocess
import sys
from typing import Any

import numpy as np

import tilelab


def _version(cmd: list[str], pattern: str) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(pattern, out)
    return m.group(1) if m else None


BOOK_DATA = "book/data"


def reader_command(argv: list[str]) -> str:
    """The command as a reader runs it to regenerate the book's data: ``tilelab`` and the
    arguments given, with the output folder written as ``book/data`` (the data files' home
    in the repository), not the scratch folder a GPU machine may have written to."""
    args: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in ("--out", "--write"):
            skip = i + 1 < len(argv)
        elif not arg.startswith(("--out=", "--write=")):
            args.append(arg)
    if args[:1] == ["calibrate"]:  # its gates file is the instructor's, named as the CLI's default
        args += ["--write", "autograder/gates.json"]
    if args[:1] in (["bench"], ["calibrate"]):
        args += ["--out", BOOK_DATA]
    return " ".join(["tilelab", *map(shlex.quote, args)])


def collect(method: str = "", gpu: bool = True) -> dict[str, Any]:
    """Provenance of a measurement made now, by this process."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "command": reader_command(sys.argv[1:]),
        "tilelab": tilelab.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host_cpu": platform.machine(),
        "method": method,
    }
    if gpu:
        import pycuda
        import pycuda.driver as cuda

        dev = cuda.Context.get_device()
        major, minor = dev.compute_capability()
        drv = cuda.get_driver_version()
        info.update(
            {
                "gpu": dev.name(),
                "compute_capability": f"{major}.{minor}",
                "cuda_driver": f"{drv // 1000}.{(drv % 1000) // 10}",
                "driver": _version(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    r"([\d.]+)",
                ),
                "nvcc": _version(["nvcc", "--version"], r"release ([\d.]+)"),
                "pycuda": pycuda.VERSION_TEXT,
            }
        )
    else:
        info.update(
            {
                "gpu": None,
                # static experiments only compile (nvcc, cuobjdump); the others emulate
                "backend": "compiler only" if method.startswith("static") else "CPU emulator",
                "compiler": _version(["g++", "--version"], r"(\d+\.\d+\.\d+)"),
                "nvcc": _version(["nvcc", "--version"], r"release ([\d.]+)"),
            }
        )
    return info
