"""``counters.json``: hardware counters of the course's kernels, read by Nsight Compute.

The ``counters`` experiment runs this module as a child under ``ncu``: the child launches
each kernel once, and ncu counts, per launch, the shared-memory and L1 data-path
wavefronts, global load requests and sectors, instructions, DRAM bytes and the SM clock.
:mod:`tilelab.experiments.perfmodel` predicts the same counts from each kernel's geometry;
this file is its check. Clocks are left alone (``--clock-control none``).
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np

from tilelab.catalog import road
from tilelab.catalog.problems import MATMUL
from tilelab.catalog.reference import KERNELS, KernelRef
from tilelab.device.bench import prepared_launch
from tilelab.device.runtime import get_runtime
from tilelab.experiments import compile_cache
from tilelab.experiments.cublas import Cublas
from tilelab.experiments.datafile import write
from tilelab.grading.counters import find_ncu
from tilelab.grading.counters import parse as ncu_csv

METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.max",
    "smsp__inst_executed.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "l1tex__data_pipe_lsu_wavefronts.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "lts__t_sectors.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
    "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
)
#: Why a warp did not issue, in cycles per issued instruction of its scheduler (ncu's
#: warp-state sampling; "selected" is the issuing cycle itself). Chapter 6 compares the
#: road's last steps with cuBLAS by these.
STALLS = tuple(
    f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"
    for s in ("selected", "not_selected", "dispatch_stall", "wait", "short_scoreboard",
              "long_scoreboard", "barrier", "no_instruction", "mio_throttle",
              "math_pipe_throttle", "branch_resolving")
)
# (kernel key, size): matmul at N=1024, the transpose family at N=2048, the steps of the
# road to cuBLAS (tilelab.experiments.road) at N=4096, the size its chapter quotes
CASES = (
    ("naive", 1024), ("naive_xrow", 1024), ("tiled16", 1024), ("tiled32", 1024),
    ("tiled32_padded", 1024), ("tiled32_at", 1024), ("tiled32_at_padded", 1024),
    ("copy", 2048), ("transpose_naive", 2048), ("transpose_reads", 2048),
    ("transpose_shared", 2048),
    ("transpose_padded", 2048),
    ("regblock_1d", 4096), ("regblock", 4096), ("vec4", 4096), ("warptile", 4096),
    ("dbuf", 4096), ("dbuf_128x256x16_w64x64", 4096), ("async", 4096),
    ("swizzle", 4096), ("swizzle_plain", 4096), ("ahead", 4096), ("ahead_inorder", 4096),
    ("cublas", 4096),
)


def kernel(key: str) -> KernelRef:
    """A case's kernel: one of the catalogue's, or a step or configuration of the road."""
    return KERNELS[key] if key in KERNELS else road.kernel_refs()[key]


def child(cases: tuple[tuple[str, int], ...] = CASES) -> None:
    """Launch each case once (the process ncu profiles)."""
    rt = get_runtime("gpu")
    rng = np.random.default_rng(0)
    keep: list = []
    for key, n in cases:
        if key == "cublas":  # the library's own kernel(s), on the same kind of inputs
            inputs = MATMUL.make_inputs((n, n, n), rng)
            a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
            c = rt.mem_alloc(n * n * 4)
            blas = Cublas()
            blas.sgemm(a, b, c, n, n, n)
            rt.synchronize()
            blas.close()
            continue
        k = kernel(key)
        shape = (n, n, n) if k.problem is MATMUL else (n, n)
        fn = rt.SourceModule(k.source()).get_function(k.name)
        prepared_launch(rt, fn, k.problem, k.launch, shape, k.problem.make_inputs(shape, rng),
                        keep)()
        rt.synchronize()


def available(ncu: str, wanted: tuple[str, ...]) -> list[str]:
    """The metrics of ``wanted`` this GPU's ncu knows (by base name, before the rollup)."""
    p = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=300)
    names = {line.split()[0] for line in p.stdout.splitlines() if line.strip()}
    return [m for m in wanted if m.rsplit(".", 2)[0] in names or m.split(".")[0] in names]


def column(metric: str) -> str:
    """The data file's column for an ncu metric: dots become underscores, so the book's
    expressions (``counters[kernel=tiled32].l1tex__..._sum``) can name it."""
    return metric.replace(".", "_")


def parse(text: str) -> list[dict[str, float]]:
    """ncu's ``--csv`` details page: one dict of metric values per profiled launch, keyed by
    :func:`column` (the grader's reader, :func:`tilelab.grading.counters.parse`)."""
    return [{column(m): v for m, v in launch.items()} for launch in ncu_csv(text)]


def kernel_names(text: str) -> list[str]:
    """The name of the kernel of each launch in ncu's ``--csv`` details, in launch order
    (cuBLAS's name says which of its kernels it chose: tile, stages, warps)."""
    start = text.find('"ID"')
    names: dict[int, str] = {}
    for row in csv.DictReader(io.StringIO(text[start:] if start >= 0 else "")):
        try:
            names.setdefault(int(row["ID"]), row.get("Kernel Name") or "")
        except (KeyError, ValueError, TypeError):
            continue
    return [names[i] for i in sorted(names)]


def profile(child: list[str], metrics: list[str], launches: int | None,
            timeout: float = 840) -> tuple[list[dict[str, float]], list[str]]:
    """Run ``python -m <child...>`` under ncu (clocks left alone) and read, per launch it
    made, the ``metrics`` (by :func:`column`) and the kernel's name; raise where ncu
    profiled another number of launches than ``launches`` (None: any number, at least
    one)."""
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError("this experiment needs Nsight Compute's ncu on PATH")
    p = subprocess.run(
        [ncu, "--clock-control", "none", "--csv", "--print-units", "base",
         "--metrics", ",".join(metrics), sys.executable, "-m", *child],
        capture_output=True, text=True, timeout=timeout,
    )
    counted = parse(p.stdout) if '"ID"' in p.stdout else []
    if len(counted) != launches if launches is not None else not counted:
        raise RuntimeError(f"ncu profiled {len(counted)} launches, expected {launches}:\n"
                           + (p.stdout + p.stderr)[-3000:])
    return counted, kernel_names(p.stdout)


def run(rt, out: Path) -> Path:
    """Profile every case under ncu and write ``counters.json``."""
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError("the counters experiment needs Nsight Compute's ncu on PATH")
    metrics = (available(ncu, METRICS) or list(METRICS)) + list(STALLS)
    compile_cache.warm([kernel(key).source() for key, _ in CASES if key != "cublas"])
    launches, names = profile(["tilelab.experiments.counters"], metrics, len(CASES))
    rows = [{"kernel": key, "n": n, "ncu_kernel": name, **vals}
            for (key, n), vals, name in zip(CASES, launches, names, strict=True)]
    return write(
        out, "counters", "Hardware counters of each kernel (Nsight Compute)",
        "One launch of each kernel (matmul at N=1024, transposes at N=2048, the steps of "
        "the road to cuBLAS and cuBLAS's SGEMM at N=4096) under ncu; "
        "the smsp__average_warps_issue_stalled_* columns are cycles a warp spent in that "
        "state per instruction its scheduler issued; "
        "counts summed over the whole GPU; sm__cycles_elapsed.avg.per_second is the SM clock "
        "during the launch.",
        {"kernel": "", "n": "", "ncu_kernel": "", **{column(m): "" for m in metrics}},
        rows,
        method="ncu --clock-control none --csv --print-units base --metrics ...; one "
        "launch per kernel, each replayed by ncu as often as its metrics need",
        kernels={key: kernel(key).source() for key, _ in CASES if key != "cublas"},
    )


if __name__ == "__main__":
    child()
