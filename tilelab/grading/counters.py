"""A lesson's evidence on a GPU: the GPU's own hardware counters, read by Nsight Compute.

``ncu`` profiles one launch of the nvcc build that is timed, at the exercise's speed shape,
run as ``python -m tilelab.grading.worker --launch-once --at speed`` inside the grading
sandbox. From its counts come the figures a lesson is graded by: shared-memory wavefronts
per request (bank conflicts: 1 when conflict-free, 32 for a column of a 32 x 32 tile),
global sectors per request (coalescing: 4 for 32 consecutive floats, 32 for a column
walk), the global load requests per multiply-add (tile reuse) and, for data movement, the
sector bytes per byte the problem must move (or per multiply-add). Whole-kernel sums
cannot be diluted cheaply:
the accesses it would take to pull an average under a gate cost more time than the speed
gate allows, and sectors per byte moved only grow with extra loads.

Where the driver lets only administrators read counters (``ERR_NVGPUCTRPERM``), the grader
says so before grading, with what to do; it never falls back to the emulator's count.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.catalog.exercises import Exercise
from tilelab.device.rounds import REPEAT, WARMUP
from tilelab.grading.sidecar import Sidecar
from tilelab.isolation import gpulock

#: figure -> ncu metric (the nvprof metrics shared_load_transactions_per_request,
#: gld_transactions_per_request... are these ratios in Nsight Compute)
METRICS = {
    "shared_ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "shared_ld_requests": "smsp__inst_executed_op_shared_ld.sum",
    "shared_st_requests": "smsp__inst_executed_op_shared_st.sum",
    "global_ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
}
SECTOR = 32  # bytes
COALESCED = 4  # sectors a warp's 32 consecutive floats touch
#: at most this many sector bytes per byte a data-movement problem must move (a strided
#: walk of floats: 8; wide loads change sectors per request, not this)
MAX_BYTES_RATIO = 2.0
#: a matrix product: global-load sector bytes per multiply-add. The naive kernel, coalesced,
#: moves 5 (per warp and k: one sector of A, four of B, for 32 multiply-adds); with
#: threadIdx.x along rows, 33; tiles of 32 reuse each value: 0.25
MAX_BYTES_PER_MAD = 12.0
#: at least this many: no tile is reused
NO_REUSE_BYTES_PER_MAD = 2.0
#: at most this many wavefronts per shared request in a padding exercise (an unpadded
#: column read: 32; a padded one: about 1.07 on an H100)
MAX_WAVEFRONTS = 1.5
RESTRICTED_CODE = "ERR_NVGPUCTRPERM"
RESTRICTED = (
    "the GPU's performance counters are restricted to administrators on this machine "
    f"({RESTRICTED_CODE}: the NVIDIA driver's NVreg_RestrictProfilingToAdminUsers=1), so "
    "the lessons (bank conflicts, coalescing, tile reuse) cannot be graded from them. "
    "Either allow them (as root: echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
    "> /etc/modprobe.d/nvidia-profiling.conf, then reload the nvidia module or reboot), or "
    "grade with {flag}=1 to grade every lesson as not measured (no speed points for it)."
)


class CountersUnavailable(RuntimeError):
    """The GPU's counters cannot be read here; the message says why and what to do."""


def find_ncu() -> str | None:
    """Nsight Compute's command line, from PATH or the CUDA toolkit folder."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_ROOT"), "/usr/local/cuda"):
        if root and os.path.exists(p := os.path.join(root, "bin", "ncu")):
            return p
    return None


def restricted(params: str, euid: int) -> bool:
    """Whether the driver's parameters (``/proc/driver/nvidia/params``) keep counters from
    this user."""
    return euid != 0 and any(
        line.replace(" ", "") == "RmProfilingAdminOnly:1" for line in params.splitlines())


def problem(flag: str, params_file: Path = Path("/proc/driver/nvidia/params"),
            euid: int | None = None) -> str | None:
    """Why the counters cannot be read here (None when they can): said before grading."""
    if find_ncu() is None:
        return ("Nsight Compute's ncu is not installed (it comes with the CUDA toolkit), so "
                "the lessons cannot be graded from the GPU's counters; install it, or grade "
                f"with {flag}=1 to grade every lesson as not measured.")
    try:
        params = params_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None  # no such file: ncu itself will tell
    euid = os.geteuid() if euid is None else euid
    return RESTRICTED.format(flag=flag) if restricted(params, euid) else None


def preflight() -> None:
    """Before grading on a GPU: raise :class:`CountersUnavailable`, saying what to do, when
    the counters cannot be read here and the instructor has not chosen to grade lessons as
    not measured (``TILELAB_LESSON_WITHOUT_COUNTERS=1``)."""
    flag = settings.LESSON_WITHOUT_COUNTERS
    why = problem(flag.name)
    if why is not None and not flag.get():
        raise CountersUnavailable(why)


def parse(text: str) -> list[dict[str, float]]:
    """ncu's ``--csv --print-units base`` details: one dict of metric values (by ncu's
    metric name) per profiled launch."""
    start = text.find('"ID"')
    if start < 0:
        raise RuntimeError("ncu printed no CSV table:\n" + text[-2000:])
    launches: dict[int, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError, AttributeError):
            continue
        launches.setdefault(int(row["ID"]), {})[row["Metric Name"]] = value
    return [launches[i] for i in sorted(launches)]


#: the counted run launches the kernel as a graded run does (once at every graded shape,
#: then a speed run's warm-up and timed launches, each on new inputs), and ncu counts one
#: of the timed ones drawn at random: a kernel that keeps state between launches cannot
#: show the counters one behaviour and the timer another without the draw catching it
LAUNCHES = WARMUP + REPEAT
#: the launches ncu profiles in the counted run: :func:`warm_up`'s, then the counted one
PROFILED = 2
#: an empty kernel of one thread, in PTX: the driver loads it as it is (no compiler), on
#: any GPU from Volta on
WARM_UP_KERNEL = "tilelab_profiler_warm_up"
WARM_UP_PTX = f"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry {WARM_UP_KERNEL}()
{{
    ret;
}}
""".encode()


def command(ncu: str, ex: Exercise, source_path: str, counted: int,
            lock: str = gpulock.ALONE, wait: bool = False,
            sections: str | None = None, kill: bool = False) -> list[str]:
    """ncu over speed-shape launch ``counted`` (0-based, of :data:`LAUNCHES`) of the kernel
    in ``source_path``, after its launches at the exercise's graded shapes. ncu profiles
    only what the worker brackets with the profiler's start and stop (``--profile-from-start
    off``): :func:`warm_up`'s launch, then the counted one (:func:`profiled`). The counted
    launch holds a shared GPU's one profiler and its lock as ``lock`` says, the others share
    the GPU (:mod:`tilelab.isolation.gpulock`); ncu leaves
    the GPU's clocks as they are (``--clock-control none``: the figures are counts, and a
    clock locked for the profiler would slow another task's timed launches), profiles
    the worker alone (not the compiler it may start) and, with ``kill``, ends it once the
    counted launch is read (``--kill on``: its teardown, about 0.1 s on an H200, is then no
    part of a check; only where teardowns take no lock, :func:`gpulock.start_mode`, since a
    killed process's teardown holds none) and, with ``wait``, the worker waits for go
    (:mod:`tilelab.grading.sidecar`). ``sections``: an empty folder for ncu's section
    files, so that it reads none as it starts (the metrics are named here; its stock
    sections and their rules cost a check about 0.3 s on an H200)."""
    skip = len(ex.shapes) + counted
    return [ncu, "--csv", "--print-units", "base", "--clock-control", "none",
            "--target-processes", "application-only", *(["--kill", "on"] if kill else []),
            *(["--section-folder", sections] if sections else []),
            "--profile-from-start", "off", "--launch-count", str(PROFILED),
            "--metrics", ",".join(METRICS.values()), sys.executable,
            "-m", "tilelab.grading.worker", "--launch-once", "--at", "speed", "--launches",
            str(LAUNCHES), "--exercise", ex.id, "--source", source_path, "--lock", lock,
            "--counted", str(skip), *(["--wait"] if wait else [])]


@contextlib.contextmanager
def profiled() -> Iterator[None]:
    """In the counted process: the launches of the ``with`` block are profiled (CUDA's
    profiler started and stopped around them; ncu profiles nothing else)."""
    import pycuda.driver as cuda

    cuda.start_profiler()
    try:
        yield
    finally:
        cuda.stop_profiler()


def warm_up() -> None:
    """In the counted process, once CUDA has started: one profiled launch of an empty
    kernel of one thread. Nsight Compute sets itself up at the first launch it profiles
    (about 0.7 s on an H200, whatever the kernel); done here, that set-up holds this GPU's
    one profiler and its lock as the rest of a CUDA start does
    (:func:`gpulock.starting`), not the lock of the counted launch, which holds the GPU
    away from every timed round (0.75 s without the warm-up, 0.14 s after it, naive at
    its speed shape; the counts are the same). ``tilelab bench start_load``'s ncu
    processes make it, beside the speed runs it measures."""
    import pycuda.driver as cuda

    fn = cuda.module_from_buffer(WARM_UP_PTX).get_function(WARM_UP_KERNEL)
    with gpulock.profiler(), gpulock.starting(), profiled():
        fn(block=(1, 1, 1), grid=(1, 1))
        cuda.Context.synchronize()


def draw() -> int:
    """The speed-shape launch ncu counts: one of the timed ones (after the warm-up)."""
    return WARMUP + secrets.randbelow(REPEAT)


class Counting:
    """ncu over one launch, started now in the background (a process group of its own),
    before the grader has the source to give it: its worker starts CUDA, then waits for
    :meth:`go` (:mod:`tilelab.grading.sidecar`), and the grader's sanitizer and speed run
    go on meanwhile. :meth:`result` waits for its counts, :meth:`stop` ends it unread. Its
    counted launch holds the GPU's one profiler and the lock :func:`gpulock.counted_mode`
    names: never beside a timed round."""

    def __init__(self, exercise_id: str, timeout: float = 300) -> None:
        self.timeout = timeout
        self.sidecar: Sidecar | None = None
        self.problem: str | None = None
        self.given = False
        self.marks: dict[str, float] = {}  # "ncu_<step>": seconds (Sidecar.timeline)
        self._tmp = tempfile.TemporaryDirectory(prefix="tilelab-ncu-")
        self.source = os.path.join(self._tmp.name, "kernel.cu")
        sections = os.path.join(self._tmp.name, "sections")  # empty (:func:`command`)
        os.mkdir(sections)
        ncu = find_ncu()
        if ncu is None:
            self.problem = problem(settings.LESSON_WITHOUT_COUNTERS.name) or "ncu is not installed"
            return
        try:
            self.sidecar = Sidecar(
                command(ncu, exercises.get(exercise_id), self.source, draw(),
                        gpulock.counted_mode(), wait=True, sections=sections,
                        kill=gpulock.start_mode() == gpulock.NONE),
                self._tmp.name, "ncu")
        except OSError as exc:  # not executable, say: the lesson is not measured, and why
            self.problem = f"ncu ({ncu}) could not be started: {exc}"

    def go(self, source: str) -> None:
        """Give the worker the (validated) source: it makes its launches."""
        Path(self.source).write_text(source, encoding="utf-8")
        self.given = True
        if self.sidecar is not None:
            self.sidecar.go()

    def result(self) -> dict[str, float]:
        """The counts (by figure name, :data:`METRICS`); raise :class:`CountersUnavailable`
        when ncu could not read them."""
        flag = settings.LESSON_WITHOUT_COUNTERS.name
        try:
            if self.sidecar is None:
                raise CountersUnavailable(self.problem)
            if not self.given:
                raise CountersUnavailable("ncu was never given the source")
            if not self.sidecar.wait(self.timeout):
                raise CountersUnavailable(f"ncu took longer than {self.timeout:g} s")
            stdout, stderr = self.sidecar.output()
            self.marks = self.sidecar.timeline("ncu", [stdout, stderr])
        finally:
            self.stop()
        out = stdout + stderr
        if RESTRICTED_CODE in out:
            raise CountersUnavailable(RESTRICTED.format(flag=flag))
        try:
            launches = parse(stdout)
        except RuntimeError:  # ncu ran but read nothing (another profiler holds the GPU, say)
            raise CountersUnavailable("ncu read no counters:\n" + out[-1500:]) from None
        if len(launches) != PROFILED:  # the warm-up's, then the counted launch's
            raise CountersUnavailable(f"ncu profiled {len(launches)} launches, expected "
                                      f"{PROFILED}:\n" + out[-1500:])
        names = {v: k for k, v in METRICS.items()}
        return {names[m]: v for m, v in launches[-1].items() if m in names}

    def stop(self) -> None:
        """End ncu and its worker (whatever they were doing) and remove their files."""
        if self.sidecar is not None:
            self.sidecar.stop()
            self.sidecar = None
        self._tmp.cleanup()


def measure(exercise_id: str, source: str, timeout: float = 300) -> dict[str, float]:
    """The counts of one launch of ``source`` (by figure name, :data:`METRICS`); raise
    :class:`CountersUnavailable` when ncu cannot read them."""
    counting = Counting(exercise_id, timeout)
    counting.go(source)
    return counting.result()


def _per(a: float, b: float) -> float:
    return a / b if b else 0.0


def figures(ex: Exercise, counts: dict[str, float]) -> dict[str, Any]:
    """The lesson's figures from one launch's counts at the speed shape (JSON-ready)."""
    c = {k: counts.get(k, 0.0) for k in METRICS}
    shape = ex.speed_shape
    out: dict[str, Any] = {
        "source": "ncu",
        "shape": list(shape),
        "counts": c,
        "shared_wavefronts_per_load": _per(c["shared_ld_wavefronts"], c["shared_ld_requests"]),
        "shared_wavefronts_per_store": _per(c["shared_st_wavefronts"], c["shared_st_requests"]),
        "sectors_per_load_request": _per(c["global_ld_sectors"], c["global_ld_requests"]),
        "sectors_per_store_request": _per(c["global_st_sectors"], c["global_st_requests"]),
    }
    mads = ex.problem.flops(shape) / 2
    if mads:
        out["loads_per_multiply_add"] = c["global_ld_requests"] * 32 / mads
        out["load_sector_bytes_per_multiply_add"] = c["global_ld_sectors"] * SECTOR / mads
    else:
        out["sector_bytes_per_byte_moved"] = _per(
            (c["global_ld_sectors"] + c["global_st_sectors"]) * SECTOR,
            ex.problem.bytes_moved(shape))
    return out


def skipped_lesson(ex: Exercise, f: dict[str, Any]) -> str | None:
    """Why the GPU's counters say this kernel skips the exercise's lesson (None when they do
    not): global traffic beyond what coalesced accesses move, no tile reused, no padded
    tile, bank conflicts. Traffic is judged by bytes, so wide loads are not mistaken for
    strided ones; sectors per request are named beside it."""
    walk = (f"(loads: {f['sectors_per_load_request']:.1f} sectors per request, stores: "
            f"{f['sectors_per_store_request']:.1f}; 32 consecutive floats: {COALESCED})")
    ratio = f.get("sector_bytes_per_byte_moved")
    if ratio is not None and ratio > MAX_BYTES_RATIO:
        return (f"the GPU's counters show it moves {ratio:.1f} times the bytes the problem "
                f"needs through L1 {walk}: its global accesses are not coalesced")
    per_mad = f.get("load_sector_bytes_per_multiply_add")
    if per_mad is not None and per_mad > MAX_BYTES_PER_MAD:
        return (f"the GPU's counters show its global loads move {per_mad:.1f} bytes per "
                f"multiply-add {walk}: a warp's threads do not read consecutive addresses")
    counts = f.get("counts") or {}
    if ex.needs_shared and not (counts.get("shared_ld_requests")
                                and counts.get("shared_st_requests")):
        return "the GPU's counters show no shared-memory load and store (the lesson is the tile)"
    if ex.reuses_tiles and per_mad is not None and per_mad >= NO_REUSE_BYTES_PER_MAD:
        return (f"the GPU's counters show its global loads move {per_mad:.1f} bytes per "
                "multiply-add, as an untiled kernel does: no tile is reused")
    if ex.max_bank_degree is not None:
        counts = f["counts"]
        if not counts["shared_ld_requests"] and not counts["shared_st_requests"]:
            return "the GPU's counters show no shared-memory access (the lesson is the padded tile)"
        worst = max(f["shared_wavefronts_per_load"], f["shared_wavefronts_per_store"])
        if worst > MAX_WAVEFRONTS:
            return (f"the GPU's counters show {worst:.2f} shared-memory wavefronts per request "
                    f"(conflict-free: 1; gate <= {MAX_WAVEFRONTS:g}): bank conflicts")
    return None


def describe(f: dict[str, Any], emulated: dict[str, Any] | None,
             bank_degree: float | None) -> str:
    """The counters beside the emulator's prediction, for the learner's feedback."""
    shape = " x ".join(map(str, f["shape"]))
    got = (f"the GPU's counters (Nsight Compute, your nvcc build at {shape}): "
           f"{f['shared_wavefronts_per_load']:.2f} / {f['shared_wavefronts_per_store']:.2f} "
           "shared wavefronts per load / store request, "
           f"{f['sectors_per_load_request']:.2f} / {f['sectors_per_store_request']:.2f} "
           "global sectors per load / store request")
    if "loads_per_multiply_add" in f:
        got += (f", {f['loads_per_multiply_add']:.3g} global loads and "
                f"{f['load_sector_bytes_per_multiply_add']:.3g} sector bytes per multiply-add")
    if emulated:
        got += (f"; the emulator predicted {emulated.get('sectors_per_load_request', 0):.2f} / "
                f"{emulated.get('sectors_per_store_request', 0):.2f} sectors per request")
        if bank_degree is not None:
            got += f" and a worst bank-conflict degree of {bank_degree:.2f}"
    return got
