"""``SourceModule`` and ``Function`` with PyCUDA's signatures, running on the CPU."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence

from . import launch
from .args import plan_arguments
from .compile import build
from .errors import CompileError, LogicError, UnsupportedConstruct
from .faults import LaunchContext, raise_for
from .geometry import check_launch, timeout_seconds
from .report import AnalysisReport, LaunchReport
from .translate import translate

#: nvcc refuses more static __shared__ memory than this per kernel (ptxas: 0xc000 max).
STATIC_SHARED_LIMIT = 48 * 1024
_DEFINE = re.compile(r"-D[A-Za-z_]\w*(=[\w.+\-]*)?")


class SourceModule:
    """Compile CUDA C ``source`` for the CPU emulator (PyCUDA's signature, plus ``analysis``).

    Like PyCUDA the source is wrapped in ``extern "C" { ... }`` unless ``no_extern_c``.
    ``-DNAME[=VALUE]`` entries of ``options`` are honoured; the other arguments are accepted
    and ignored. ``analysis=True`` instruments shared arrays for races and bank conflicts.
    """

    def __init__(self, source: str, options: Sequence[str] | None = None, nvcc: str = "nvcc",
                 keep: bool = False, no_extern_c: bool = False, arch: str | None = None,
                 code: str | None = None, cache_dir: str | None = None,
                 include_dirs: Sequence[str] = (), *, analysis: bool = False) -> None:
        self.source = source
        self.analysis = analysis
        self.no_extern_c = no_extern_c
        self.translation = translate(source, analysis=analysis, no_extern_c=no_extern_c)
        defines = tuple(o for o in (options or ()) if _DEFINE.fullmatch(o))
        self.library = build(self.translation.code, analysis=analysis, defines=defines,
                             source=source)
        if not analysis and self.library.static_shared > STATIC_SHARED_LIMIT:
            raise CompileError(
                f"ptxas error: the kernel uses {self.library.static_shared} bytes of static "
                f"__shared__ memory, more than the {STATIC_SHARED_LIMIT} bytes (48 KiB) nvcc "
                "allows static shared arrays; nvcc refuses this source too. Use smaller tiles, "
                "or extern __shared__ (dynamic) memory with the opt-in for more.")

    @property
    def kernel_names(self) -> list[str]:
        """The ``__global__`` functions this module defines."""
        return [k["name"] for k in self.library.kernels]

    def get_function(self, name: str) -> Function:
        """The kernel called ``name``; ``LogicError`` listing the kernels if there is none."""
        found = self.library.kernel(name)
        if found is None:
            have = ", ".join(self.kernel_names) or "none"
            raise LogicError(
                "cuModuleGetFunction failed: named symbol not found — no __global__ function "
                f"named {name!r} in this module; the __global__ functions found are: {have}.")
        return Function(self, name, *found)

    def get_global(self, name: str) -> None:
        """Not available: the emulator has no module globals to copy to."""
        raise UnsupportedConstruct("module.get_global (device globals from the host)")

    def get_texref(self, name: str) -> None:
        """Not available: textures are unsupported."""
        raise UnsupportedConstruct("textures (module.get_texref)")


class Function:
    """A kernel: call it like PyCUDA's ``Function``; ``last_report`` tells what happened."""

    def __init__(self, module: SourceModule, name: str, index: int, desc: dict) -> None:
        self.module = module
        self.name = name
        self._index = index
        self._desc = desc
        self.last_report: LaunchReport | None = None
        self.shared_size_bytes = module.library.static_shared
        self.local_size_bytes = 0
        self.num_regs = 0
        self.max_threads_per_block = 1024

    def __repr__(self) -> str:
        return f"<emulated Function {self.name}>"

    def __call__(self, *args: object, block: Sequence[int] = (1, 1, 1),
                 grid: Sequence[int] = (1, 1), shared: int = 0, stream: object = None,
                 time_kernel: bool = False, timeout: float | None = None) -> float | None:
        """Launch on the CPU; returns the kernel's run time in seconds if ``time_kernel``."""
        t0 = time.perf_counter()
        lib = self.module.library
        b, g, shared = check_launch(block, grid, shared, lib.static_shared)
        plan = plan_arguments(self._desc, args)
        limit = timeout_seconds(timeout)
        outcome = launch.run(lib, self._index, plan, g, b, shared, limit)
        report = LaunchReport(self.name, g, b, shared,
                              outcome.child.stdout.decode("utf-8", errors="replace"),
                              outcome.child.stdout_truncated,
                              float(outcome.report.get("kernel_seconds", 0.0)),
                              time.perf_counter() - t0)
        if "analysis" in outcome.report:
            params = next((k.names for k in self.module.translation.kernels
                           if k.name == self.name), ())
            report.analysis = AnalysisReport.from_json(self.name, outcome.report["analysis"],
                                                       params)
        self.last_report = report
        if report.stdout:
            sys.stdout.write(report.stdout)
            if report.stdout_truncated:
                sys.stdout.write("\n[printf output truncated]\n")
            sys.stdout.flush()
        ctx = LaunchContext(self._desc, plan, lib.path, g, b, shared, limit)
        raise_for(outcome.report, outcome.child, ctx)
        return report.kernel_seconds if time_kernel else None


def analyze(source: str, name: str, *args: object, block: Sequence[int] = (1, 1, 1),
            grid: Sequence[int] = (1, 1), shared: int = 0, timeout: float | None = None,
            **module_options: object) -> AnalysisReport:
    """Compile ``source`` in analysis mode, launch kernel ``name``, return its analysis."""
    mod = SourceModule(source, analysis=True, **module_options)
    func = mod.get_function(name)
    func(*args, block=block, grid=grid, shared=shared, timeout=timeout)
    return func.last_report.analysis  # set by every successful analysis-mode launch
