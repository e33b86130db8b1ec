"""``SourceModule`` and ``Function`` with PyCUDA's signatures, running on the CPU."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
import threading
import time
from collections.abc import Sequence

import numpy as np

from . import launch
from .args import plan_arguments
from .attributes import function_attribute as _FA
from .compile import build
from .compile import cache_dir as cache_dir_
from .errors import (
    CompileError,
    EmulatorError,
    LogicError,
    OutOfBoundsAccess,
    UnsupportedConstruct,
)
from .fastmath import float_options, warn_differences
from .faults import LaunchContext, raise_for, source_lines
from .function_api import FunctionAPI, check_registers
from .geometry import check_launch, timeout_seconds
from .kernels import launch_bound, param_name
from .lexer import mask
from .memory import DeviceAllocation
from .report import PRINTF_CUT, AnalysisReport, LaunchReport
from .resources import MAX_STATIC_SHARED, KernelResources, ResourceReport
from .translate import translate

_DEFINE = re.compile(r"-D[A-Za-z_]\w*(=[\w.+\-]*)?")
#: What g++ says of C++ that cannot live inside PyCUDA's extern "C" { } (nvcc refuses the
#: same: "this declaration may not have extern "C" linkage", "more than one instance of
#: overloaded function ... has "C" linkage"), and what to do about it.
C_LINKAGE_HINTS = (
    ("template with C linkage",
     'PyCUDA wraps the source in extern "C" { }, where templates cannot be (nvcc refuses them '
     "there too). Write the helper without a template (a plain __device__ function, with a "
     "#define or a const int for a compile-time value); outside a graded exercise you may "
     "instead pass no_extern_c=True and get the kernel by its mangled name (an explicit "
     "instantiation, e.g. template __global__ void k<64>(float*);)."),
    ("conflicting declaration of C function",
     'PyCUDA wraps the source in extern "C" { }, where two functions cannot share a name '
     "(overloading needs C++ linkage; nvcc refuses it there too): give each helper its own "
     "name."),
)

_FMAD = re.compile(r"--?fmad(?:=|$)(.*)")


def fmad_option(options: Sequence[str]) -> bool:
    """Whether nvcc given ``options`` contracts ``a * b + c`` into fused multiply-adds:
    ``--fmad=false`` (or ``-fmad false``) turns it off, the last word wins; on by default
    and with ``--use_fast_math``."""
    fmad, opts = True, list(options)
    for i, o in enumerate(opts):
        m = _FMAD.match(o)
        if m:
            value = m.group(1) or (opts[i + 1] if i + 1 < len(opts) and "=" not in o else "")
            fmad = value.strip().lower() not in ("false", "0", "no", "off")
        elif o.lstrip("-") == "use_fast_math":
            fmad = True
    return fmad


#: nvcc options that choose what is built, not how: ptxas's report is of one cubin for the
#: emulator's arch (each with the number of words that follow it when written apart)
_NOT_CODEGEN = {"-arch": 1, "--gpu-architecture": 1, "-code": 1, "--gpu-code": 1,
                "-gencode": 1, "--generate-code": 1, "-o": 1, "--output-file": 1, "-cubin": 0,
                "--cubin": 0, "-ptx": 0, "--ptx": 0, "-fatbin": 0, "--fatbin": 0, "-c": 0,
                "-keep": 0, "--keep": 0, "-keep-dir": 1, "--keep-dir": 1,
                "--resource-usage": 0, "-res-usage": 0}


def codegen_options(options: Sequence[str]) -> tuple[str, ...]:
    """The nvcc options of ``options`` that change the code ptxas makes, registers
    included (``-maxrregcount=32``, ``--use_fast_math``, ``-Xptxas ...``, ``-DN=4``), for the
    resource report; the ones that choose the output or the architecture left out."""
    out, skip = [], 0
    for o in options:
        if skip:
            skip -= 1
            continue
        name = o.split("=", 1)[0]
        if name in _NOT_CODEGEN:
            skip = _NOT_CODEGEN[name] if "=" not in o else 0
            continue
        out.append(o)
    return tuple(out)


#: an include of cooperative_groups (nvcc refuses its headers inside extern "C")
_CG_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]cooperative_groups", re.M)

class SourceModule:
    """Compile CUDA C ``source`` for the CPU emulator (PyCUDA's signature, plus ``analysis``).

    Like PyCUDA the source is wrapped in ``extern "C" { ... }`` unless ``no_extern_c``.
    ``-DNAME[=VALUE]``, ``--fmad``, ``-ftz``, ``--prec-div``, ``--prec-sqrt`` and
    ``--use_fast_math`` entries of ``options`` are honoured (``differences`` says where a
    GPU's results may still differ), and all of them reach ptxas's report of registers
    (``-maxrregcount``); the other arguments are accepted and ignored. ``analysis=True``
    instruments shared arrays for races and bank conflicts.
    """

    def __init__(self, source: str, options: Sequence[str] | None = None, nvcc: str = "nvcc",
                 keep: bool = False, no_extern_c: bool = False, arch: str | None = None,
                 code: str | None = None, cache_dir: str | None = None,
                 include_dirs: Sequence[str] = (), *, analysis: bool = False) -> None:
        self.source = source
        self.options = tuple(options or ())
        self.analysis = analysis
        self.no_extern_c = no_extern_c
        self.defines = defines = tuple(o for o in (options or ()) if _DEFINE.fullmatch(o))
        self.translation = translate(source, analysis=analysis, no_extern_c=no_extern_c,
                                     defines=defines)
        self.resources = ResourceReport(source, codegen_options(options or ()), no_extern_c,
                                        arch, cache_dir_())
        if not no_extern_c and (m := _CG_INCLUDE.search(source)):
            raise CompileError(
                f'line {source.count(chr(10), 0, m.start()) + 1}: cooperative_groups\' headers '
                'are C++ and cannot be compiled inside the extern "C" { } PyCUDA wraps the '
                "source in (nvcc refuses them there too): pass no_extern_c=True to "
                'SourceModule and declare each kernel extern "C" __global__.')
        floats = float_options(options or ())
        #: where a GPU built with these options may still give other results, and how much
        self.differences = floats.differences(source)
        warn_differences(floats.differences())  # of the options (the intrinsics: documented)
        head, _, rest = self.translation.code.partition("\n")
        try:
            self.library = build(f"{head}\n{floats.prelude_lines()}{rest}", analysis=analysis,
                                 defines=defines,
                                 source=source, lockstep=self.translation.lockstep,
                                 fmad=fmad_option(options or ()))
        except CompileError as exc:
            hint = next((h for marker, h in C_LINKAGE_HINTS if marker in exc.msg), None)
            if hint is None or no_extern_c:
                raise
            raise CompileError(exc.msg + "\n" + hint, exc.stderr, exc.lines) from None
        self._check_static_shared()
        self._globals: dict[str, DeviceAllocation] = {}
        for g in self.library.globals:
            alloc = DeviceAllocation(g["size"])
            init = bytes.fromhex(g["init"]) if g["init"] else bytes(g["size"])
            alloc.bytes_view()[:] = np.frombuffer(init, np.uint8)
            self._globals[g["name"]] = alloc

    def _check_static_shared(self) -> None:
        """nvcc's refusal of more than 48 KiB of static shared memory in one kernel."""
        if self.library.static_shared <= MAX_STATIC_SHARED:
            return
        said = self.resources.shared_error()
        if not said and (self.resources.kernels or len(self.library.kernels) > 1):
            return  # ptxas counted per kernel and had no complaint
        raise CompileError(
            f"kernel.cu declares {self.library.static_shared} bytes of static shared memory "
            f"(__shared__ arrays), more than the {MAX_STATIC_SHARED} bytes (48 KiB) nvcc "
            "allows a kernel"
            + (f" (ptxas: {said})" if said else "") + ". Declare the larger buffer as "
            "extern __shared__ T buf[]; and pass shared= at launch, after "
            "func.set_attribute(function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, n).")

    def global_bytes(self) -> list[np.ndarray]:
        """The bytes of each device global, in the library's order (launches update them)."""
        return [self._globals[g["name"]].bytes_view() for g in self.library.globals]

    @property
    def kernel_names(self) -> list[str]:
        """The names ``get_function`` finds: each kernel's symbol (mangled unless extern "C")."""
        return [k.get("symbol", k["name"]) for k in self.library.kernels]

    def get_function(self, name: str) -> Function:
        """The kernel called ``name``; ``LogicError`` listing the kernels if there is none."""
        found = self.library.kernel(name)
        if found is None:
            have = ", ".join(f"{k.get('symbol', k['name'])}" + (
                f" ({k['name']})" if k.get("symbol", k["name"]) != k["name"] else "")
                for k in self.library.kernels) or "none"
            why = ""
            if any(k["name"] == name for k in self.library.kernels):
                why = (" The module was compiled with no_extern_c=True, so (as with PyCUDA on "
                       "a GPU) kernels go by their C++ mangled names; pass the mangled name "
                       "listed, or declare the kernel extern \"C\".")
            raise LogicError(
                "cuModuleGetFunction failed: named symbol not found — no __global__ function "
                f"named {name!r} in this module; the __global__ functions found are: "
                f"{have}.{why}")
        return Function(self, name, *found)

    def get_global(self, name: str) -> tuple[DeviceAllocation, int]:
        """PyCUDA's ``(device pointer, size in bytes)`` of a ``__constant__``/``__device__``
        variable, for ``memcpy_htod``/``memcpy_dtoh``; its value lasts across launches."""
        if name not in self._globals:
            have = ", ".join(self._globals) or "none"
            raise LogicError(
                f"cuModuleGetGlobal failed: named symbol not found — no __constant__ or "
                f"__device__ variable named {name!r} at file scope in this module; the ones "
                f"found are: {have}.")
        alloc = self._globals[name]
        return alloc, alloc.size

    def get_texref(self, name: str) -> None:
        """Not available: textures are unsupported."""
        raise UnsupportedConstruct("textures (module.get_texref)")


class Function(FunctionAPI):
    """A kernel: call it like PyCUDA's ``Function``; ``last_report`` tells what happened."""

    def __init__(self, module: SourceModule, name: str, index: int, desc: dict) -> None:
        self.module = module
        self.name = name
        self._index = index
        self._desc = desc
        self._attrs: dict[int, int] = {}
        self.last_report: LaunchReport | None = None

    def resources(self) -> KernelResources | None:
        """ptxas's registers and shared memory for this kernel (None without nvcc)."""
        return self.module.resources.get(self._desc.get("symbol", self._desc["name"]))

    def param_names(self) -> tuple[str, ...]:
        """The kernel's parameter names as declared (``#i`` for an unnamed one)."""
        return tuple(param_name(p["text"], i) for i, p in enumerate(self._desc["params"]))

    @functools.cached_property
    def _launch_bound(self) -> int | None:
        for k in self.module.translation.kernels:
            if k.name == self._desc["name"]:
                return launch_bound(mask(self.module.source), k, self.module.defines)
        return None

    def launch_bound(self) -> int | None:
        """The maximum block size the kernel's ``__launch_bounds__`` sets, if any (read
        from the source once)."""
        return self._launch_bound

    @property
    def stateless(self) -> bool:
        """Whether launches of this kernel are independent of each other: its module holds
        no device globals (``__device__`` or ``__constant__`` variables), which a launch
        starts from as the one before left them."""
        return not self.module.library.globals

    @property
    def static_shared(self) -> int:
        res = self.resources()
        return res.shared if res else self.module.library.static_shared

    # PyCUDA's shortcuts for get_attribute
    shared_size_bytes = property(lambda self: self.get_attribute(_FA.SHARED_SIZE_BYTES))
    local_size_bytes = property(lambda self: self.get_attribute(_FA.LOCAL_SIZE_BYTES))
    num_regs = property(lambda self: self.get_attribute(_FA.NUM_REGS))
    max_threads_per_block = property(lambda self: self.get_attribute(_FA.MAX_THREADS_PER_BLOCK))

    def __repr__(self) -> str:
        return f"<emulated Function {self.name}>"

    def __call__(self, *args: object, block: Sequence[int] = (1, 1, 1),
                 grid: Sequence[int] = (1, 1), shared: int = 0, stream: object = None,
                 time_kernel: bool = False, timeout: float | None = None,
                 stop: threading.Event | None = None,
                 trace_block: int | None = None) -> float | None:
        """Launch on the CPU; returns the kernel's run time in seconds if ``time_kernel``.
        ``trace_block`` (an analysis build's launch): log every global access of that block
        (its linear index), per thread, into ``last_report.analysis.touch["trace"]``.
        ``timeout``: seconds (see :func:`~tilelab.emu.geometry.timeout_seconds`); setting
        ``stop`` (from another thread) ends the launch at once with
        :class:`~tilelab.emu.errors.LaunchStopped`."""
        t0 = time.perf_counter()
        lib = self.module.library
        b, g, shared = check_launch(block, grid, shared, self.static_shared,
                                    self.max_dynamic_shared())
        check_registers(self.resources(), b[0] * b[1] * b[2], self.name,
                        self.module.resources.arch, self.launch_bound())
        plan = plan_arguments(self._desc, args)
        limit = timeout_seconds(timeout)
        if trace_block is not None and not self.module.analysis:
            raise ValueError("only an analysis build (analysis=True) logs its accesses")
        outcome = launch.run(lib, self._index, plan, g, b, shared, limit,
                             self.module.global_bytes(), stop, trace_block)
        report = LaunchReport(self.name, g, b, shared,
                              outcome.child.stdout.decode("utf-8", errors="replace"),
                              outcome.child.stdout_truncated,
                              float(outcome.report.get("kernel_seconds", 0.0)),
                              time.perf_counter() - t0)
        if "analysis" not in outcome.report and "trace" in outcome.report:
            # a traced launch that failed: its log up to the failure (index_diff reads it)
            outcome.report["analysis"] = {"touch": {
                k: outcome.report[k] for k in ("trace", "trace_dropped")}}
        if "analysis" in outcome.report:
            data = outcome.report["analysis"]
            lines = source_lines(lib.path, AnalysisReport.code_addresses(data))
            report.analysis = AnalysisReport.from_json(self.name, data, lines,
                                                       self.param_names())
        self.last_report = report
        if report.stdout:
            sys.stdout.write(report.stdout)
            if report.stdout_truncated:
                sys.stdout.write(f"\n{PRINTF_CUT}\n")
            sys.stdout.flush()
        if outcome.report.get("kind") == "canary":
            self._locate(args, b, g, shared, limit)
        ctx = LaunchContext(self._desc, plan, lib.path, g, b, shared, limit)
        raise_for(outcome.report, outcome.child, ctx)
        return report.kernel_seconds if time_kernel else None

    def _locate(self, args: tuple, block: tuple[int, int, int], grid: tuple[int, int, int],
                shared: int, timeout: float) -> None:
        """A launch whose out-of-bounds write was seen only after it ended (a changed
        canary: no thread, no line) run again in the analysis build, which checks every
        global access as it is made: raise its fault, naming the thread, line and index.
        Returns where that build cannot be made or does not fault (the canary's error
        stands); not for a module with device globals (a second run would start from
        other values) nor an analysis build (it checked every access already)."""
        m = self.module
        if m.analysis or not self.stateless:
            return
        try:
            probe = SourceModule(m.source, list(m.options), no_extern_c=m.no_extern_c,
                                 analysis=True).get_function(self.name)
            with contextlib.redirect_stdout(io.StringIO()):  # its printf was shown once
                probe(*args, block=block, grid=grid, shared=shared, timeout=timeout)
        except OutOfBoundsAccess as exc:
            if exc.thread:
                raise exc from None
        except EmulatorError:
            return


def analyze(source: str, name: str, *args: object, block: Sequence[int] = (1, 1, 1),
            grid: Sequence[int] = (1, 1), shared: int = 0, timeout: float | None = None,
            **module_options: object) -> AnalysisReport:
    """Compile ``source`` in analysis mode, launch kernel ``name``, return its analysis."""
    mod = SourceModule(source, analysis=True, **module_options)
    func = mod.get_function(name)
    func(*args, block=block, grid=grid, shared=shared, timeout=timeout)
    return func.last_report.analysis  # set by every successful analysis-mode launch
