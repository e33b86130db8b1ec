"""What a GPU would give each kernel: registers and shared memory as ptxas reports them.

A GPU refuses a launch whose block needs more registers than a multiprocessor has, and
nvcc refuses more than 48 KiB of static shared memory; the emulator asks the real compiler.
When ``nvcc`` is on the PATH (``$TILELAB_EMU_NVCC`` names another; ``0`` turns this off),
the learner's source is compiled for ``$TILELAB_EMU_ARCH`` (default ``sm_90``, the H100)
with ``--resource-usage`` in the background while g++ builds the emulated library; the
report is cached by content. Without nvcc the launch limits on registers are not checked
(``Function.num_regs`` stays 0) and ``resource_note`` says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .compile import COMPILE_SECONDS, base_caches

DEFAULT_ARCH = "sm_90"
REGS_PER_BLOCK = 65536  # sm_70 and later
REG_UNIT = 256  # registers are given to a warp in units of 256
MAX_STATIC_SHARED = 48 * 1024


@dataclass(frozen=True)
class KernelResources:
    """ptxas's report for one kernel."""

    registers: int
    shared: int  # static shared memory, bytes
    local: int  # stack frame, bytes

    def block_registers(self, threads: int) -> int:
        """Registers a block of ``threads`` threads takes (whole warps, 256-register units)."""
        per_warp = -(-self.registers * 32 // REG_UNIT) * REG_UNIT
        return -(-threads // 32) * per_warp

    def max_threads(self) -> int:
        """The largest block the register file allows (``MAX_THREADS_PER_BLOCK``)."""
        per_warp = -(-max(self.registers, 1) * 32 // REG_UNIT) * REG_UNIT
        return min(1024, REGS_PER_BLOCK // per_warp * 32)


def _nvcc() -> str | None:
    name = os.environ.get("TILELAB_EMU_NVCC", "nvcc")
    if name in ("", "0"):
        return None
    return shutil.which(name)


def parse_report(text: str) -> dict[str, KernelResources]:
    """Per-kernel registers, static shared memory and stack from ptxas's ``-v`` output."""
    out: dict[str, KernelResources] = {}
    name, local = None, 0
    for line in text.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            name, local = m.group(1), 0
        elif (m := re.search(r"(\d+) bytes stack frame", line)) and name:
            local = int(m.group(1))
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            smem = re.search(r"(\d+) bytes smem", line)
            out[name] = KernelResources(int(m.group(1)), int(smem.group(1)) if smem else 0,
                                        local)
            name = None
    return out


class ResourceReport:
    """ptxas's resources for a module's kernels, computed in the background (read by one
    thread at a time: launches of one kernel may run on several)."""

    def __init__(self, source: str, defines: tuple[str, ...], no_extern_c: bool,
                 arch: str | None, cache: Path) -> None:
        """``defines``: the nvcc options the source is built with (``-D``\\ s, and any
        other that changes the code: ``-maxrregcount=N`` sets the registers)."""
        self.arch = arch or os.environ.get("TILELAB_EMU_ARCH", DEFAULT_ARCH)
        self.kernels: dict[str, KernelResources] | None = None
        self.errors = ""
        self.note = ""
        self._proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._lock = threading.Lock()
        nvcc = _nvcc()
        if nvcc is None:
            self.note = ("nvcc was not found, so registers per thread and the launch limits "
                         "they set are not checked (install the CUDA toolkit to check them)")
            self.kernels = {}
            return
        text = source if no_extern_c else f'extern "C" {{\n{source}\n}}\n'
        key = hashlib.sha256(json.dumps([text, defines, self.arch, nvcc, 1]).encode())
        self._path = cache / f"ptxas-{key.hexdigest()[:40]}.json"
        for folder in (cache, *base_caches()):  # the read-only bases' reports too
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                self._load(json.loads((folder / self._path.name).read_text()))
                return
        self._tmp = tempfile.TemporaryDirectory(dir=cache)
        (Path(self._tmp.name) / "kernel.cu").write_text(text)
        try:
            self._proc = subprocess.Popen(
                [nvcc, "-cubin", f"-arch={self.arch}", "--resource-usage", *defines,
                 "-o", os.devnull, "kernel.cu"], cwd=self._tmp.name, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, env={**os.environ, "LC_ALL": "C"})
        except OSError as exc:
            self.note = f"nvcc could not be run ({exc}); launch limits are not checked"
            self.kernels = {}

    def _load(self, data: dict) -> None:
        self.kernels = {k: KernelResources(*v) for k, v in data["kernels"].items()}
        self.errors = data["errors"]

    def wait(self) -> dict[str, KernelResources]:
        """The per-kernel resources (empty when nvcc is missing or failed)."""
        with self._lock:
            return self.kernels if self.kernels is not None else self._collect()

    def _collect(self) -> dict[str, KernelResources]:
        assert self._proc is not None
        try:
            out, _ = self._proc.communicate(timeout=COMPILE_SECONDS)
        except subprocess.TimeoutExpired:  # beside g++, which has as long for the source
            self._proc.kill()
            self._proc.communicate()
            out = ""
            self.note = (f"nvcc took more than {COMPILE_SECONDS:g} s; launch limits are not "
                         "checked")
        kernels = parse_report(out)
        self.errors = "\n".join(ln for ln in out.splitlines() if "error" in ln)
        self.kernels = kernels
        if self._tmp is not None:
            self._tmp.cleanup()
        if self._proc.returncode == 0 or "too much shared data" in self.errors:
            with contextlib.suppress(OSError):
                tmp = self._path.with_suffix(".tmp")
                tmp.write_text(json.dumps({"kernels": {k: [v.registers, v.shared, v.local]
                                                       for k, v in kernels.items()},
                                           "errors": self.errors}))
                os.replace(tmp, self._path)
        elif not self.note:
            self.note = "nvcc did not compile this source, so launch limits are not checked"
        return kernels

    def get(self, symbol: str) -> KernelResources | None:
        """ptxas's resources for the kernel named ``symbol`` (mangled unless extern "C")."""
        return self.wait().get(symbol)

    def shared_error(self) -> str:
        """ptxas's complaint about too much static shared memory, if it made one."""
        self.wait()
        return next((ln.strip() for ln in self.errors.splitlines()
                     if "too much shared data" in ln), "")
