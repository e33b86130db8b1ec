"""Where a measurement came from: the code (git revision, dirty or not, a digest of the
package's source and of each kernel measured), the GPU (its name, clocks and power limit),
the host CPU, driver, CUDA, PyCUDA, date and command."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

import tilelab

PACKAGE = Path(tilelab.__file__).resolve().parent
#: the revision and dirty flag where the checkout has no .git (a GPU machine gets a copy of
#: the working tree): set by whoever starts the run, from the checkout it came from
REVISION_ENV, DIRTY_ENV = "TILELAB_REVISION", "TILELAB_DIRTY"


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

#: nvidia-smi's fields recorded for the GPU at the end of a run (the clocks it ran at)
SMI_FIELDS = ("clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit",
              "power.max_limit", "temperature.gpu", "pstate")


def _git(*args: str) -> str | None:
    if not shutil.which("git"):
        return None
    try:
        p = subprocess.run(["git", "-C", str(PACKAGE.parent), *args], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def revision() -> dict[str, Any]:
    """The code's git revision and whether the checkout had uncommitted changes to tracked
    files (``dirty``; None where neither git nor the environment says)."""
    rev = os.environ.get(REVISION_ENV) or _git("rev-parse", "HEAD")
    dirty_env = os.environ.get(DIRTY_ENV)
    if dirty_env is not None:
        dirty: bool | None = dirty_env.strip().lower() in ("1", "true", "yes")
    else:
        status = _git("status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    return {"revision": rev, "dirty": dirty, "code_digest": code_digest()}


def code_digest(root: Path = PACKAGE) -> str:
    """A digest of the package's Python, CUDA and C++ sources (paths and contents): the
    code that made a measurement, whether or not git was there to name its revision."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".cu", ".h")
                       and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def kernel_digest(source: str) -> str:
    """A digest of a kernel's source as the compiler sees it: its comments and its
    whitespace left out, so an edited comment keeps a measurement valid, a changed
    instruction or define does not."""
    code = " ".join(_COMMENT.sub(" ", source).split())
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def kernel_digests(sources: Mapping[str, str]) -> dict[str, str]:
    """``{kernel key: kernel_digest(source)}``, in key order."""
    return {k: kernel_digest(sources[k]) for k in sorted(sources)}


def host_cpu() -> str:
    """The host CPU's model name and how many logical CPUs this process sees."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} logical CPUs)"


def gpu_state() -> dict[str, Any]:
    """The GPU's clocks, power limit, temperature and performance state now, as
    ``nvidia-smi`` reports them (MHz, W, °C; empty where it is not installed)."""
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        p = subprocess.run(["nvidia-smi", "--id=0", f"--query-gpu={','.join(SMI_FIELDS)}",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in p.stdout.strip().splitlines()[0].split(",")] if (
        p.returncode == 0 and p.stdout.strip()) else []
    out: dict[str, Any] = {}
    for name, value in zip(SMI_FIELDS, values, strict=False):
        try:
            out[name.replace(".", "_")] = float(value)
        except ValueError:
            out[name.replace(".", "_")] = value
    return out


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


def collect(method: str = "", gpu: bool = True,
            kernels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Provenance of a measurement made now, by this process (``kernels``: the source of
    each kernel it measured, by key, recorded as :func:`kernel_digest`)."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "command": reader_command(sys.argv[1:]),
        "tilelab": tilelab.__version__,
        **revision(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host_cpu": host_cpu(),
        "method": method,
    }
    if kernels:
        info["kernels"] = kernel_digests(kernels)
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
                "sm_count": dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT),
                "memory_gib": round(dev.total_memory() / 2**30, 1),
                **gpu_state(),
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
