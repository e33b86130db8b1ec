"""The road to cuBLAS: ladder kernels on the emulator, the traffic and occupancy models,
ptxas reports, and (on a GPU) cuBLAS through ctypes against float64 with TF32 off."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tilelab.catalog.problems import MATMUL
from tilelab.device.runtime import get_runtime
from tilelab.experiments import road as sgemm
from tilelab.grading.correctness import check_function, launch

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("key", list(sgemm.kernel_refs()))
def test_every_step_and_configuration_is_right_on_the_emulator(key, rng):
    ref = sgemm.kernel_refs()[key]
    rt = get_runtime("emu")
    fn = rt.SourceModule(sgemm.emulator_source(ref)).get_function(ref.name)
    for shape in sgemm.SMALL_SHAPES:
        result = check_function(rt, fn, MATMUL, ref.launch, shape, rng)
        assert result.ok, f"{key} {shape}: {result.message}"


def test_wide_loads_fall_back_when_rows_are_not_16_byte_aligned(rng):
    """K = 29 and N = 53: no float4 may touch A or B; the scalar path must be exact."""
    ref = sgemm.kernel_refs()["dbuf"]
    rt = get_runtime("emu")
    fn = rt.SourceModule(ref.source()).get_function(ref.name)
    shape = (131, 53, 29)
    inputs = MATMUL.make_inputs(shape, rng)
    got = launch(rt, fn, MATMUL, ref.launch, shape, inputs)
    np.testing.assert_allclose(got, MATMUL.reference(inputs), rtol=1e-4, atol=1e-4)


def test_the_traffic_model_follows_the_tiles():
    assert sgemm.traffic("naive").global_bytes_per_fma == 8.0
    assert sgemm.traffic("tiled32").shared_operands_per_fma == 2.0
    assert sgemm.traffic("regblock_1d").shared_operands_per_fma == pytest.approx(9 / 8)
    # 8x8 per thread: 16 operands for 64 FMAs; float4 makes that 4 load instructions
    assert sgemm.traffic("regblock").fma_per_shared_load == 4.0
    assert sgemm.traffic("vec4").fma_per_shared_load == 16.0
    assert sgemm.traffic("warptile").fma_per_shared_load == 16.0
    # 128x128 tiles read 1/64 of a float per FMA from global memory
    assert sgemm.traffic("dbuf").global_bytes_per_fma == pytest.approx(4 * 256 / 128**2)
    # an 8x16 micro-tile: 24 operands for 128 FMAs
    assert sgemm.traffic("dbuf_128x128x16_w64x64").shared_operands_per_fma == pytest.approx(
        24 / 128)


def test_occupancy_formula():
    h100 = {"max_threads_per_sm": 2048, "regs_per_sm": 65536, "shared_per_sm_bytes": 233472}
    assert sgemm.blocks_per_sm(256, 128, 32768, h100) == 2  # registers: 2 x 32768
    assert sgemm.blocks_per_sm(256, 129, 0, h100) == 1  # one register more: 136 per thread
    assert sgemm.blocks_per_sm(1024, 31, 8192, h100) == 2  # threads
    assert sgemm.blocks_per_sm(128, 32, 100_000, h100) == 2  # shared memory


def test_fp32_peak_of_an_h100():
    assert sgemm.fp32_peak_tflops(132, 1_980_000, (9, 0)) == pytest.approx(66.9, abs=0.05)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_ptxas_rows_without_a_gpu():
    rows, gpu = sgemm.ptxas_rows(REPO / "book" / "data")
    by = {r["kernel"]: r for r in rows}
    assert set(by) == set(sgemm.kernel_refs())
    assert all(r["registers"] > 0 and 0 < r["occupancy"] <= 1 for r in rows)
    assert by["dbuf"]["shared_bytes"] == 2 * by["warptile"]["shared_bytes"]  # two copies
    assert by["dbuf"]["registers"] <= 128  # __launch_bounds__(256, 2)
    assert by["dbuf"]["spill_bytes"] == 0
    assert gpu.startswith("NVIDIA")  # the limits come from the course's measured GPU


@pytest.mark.gpu
def test_cublas_is_fp32_and_row_major(rng):
    import pycuda.autoinit  # noqa: F401

    from tilelab.experiments.cublas import FP32_TOLERANCE, Cublas, relative_error

    rt = get_runtime("gpu")
    m, n, k = 300, 200, 2048  # rectangular: a transposed call would fail the check
    inputs = MATMUL.make_inputs((m, n, k), rng)
    a, b = rt.to_device(inputs["A"]), rt.to_device(inputs["B"])
    c = rt.mem_alloc(m * n * 4)
    blas = Cublas()
    try:
        assert blas.math_mode == "CUBLAS_DEFAULT_MATH"
        blas.sgemm(a, b, c, m, n, k)
        got = rt.from_device(c, (m, n), np.float32)
    finally:
        blas.close()
    assert relative_error(got, MATMUL.reference(inputs)) < FP32_TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("key", list(sgemm.kernel_refs()))
def test_every_step_is_right_on_the_gpu(key, rng):
    ref = sgemm.kernel_refs()[key]
    rt = get_runtime("gpu")
    fn = rt.SourceModule(ref.source()).get_function(ref.name)
    for shape in (*sgemm.SMALL_SHAPES, (1000, 1030, 516)):
        result = check_function(rt, fn, MATMUL, ref.launch, shape, rng)
        assert result.ok, f"{key} {shape}: {result.message}"


@pytest.mark.parametrize("key", ["async", "swizzle"])
def test_the_emulator_reads_the_portable_branch_of_steps_6_and_7_on_the_same_lines(key):
    ref = sgemm.kernel_refs()[key]
    gpu, emu_src = ref.source().split("\n"), sgemm.emulator_source(ref).split("\n")
    assert len(gpu) == len(emu_src)
    assert any("cp.async" in line for line in gpu)
    assert not any("asm" in line for line in emu_src)
    # everything outside the blanked branches is untouched, line for line
    kept = [i for i, line in enumerate(emu_src) if line]
    assert all(emu_src[i] == gpu[i] or emu_src[i] == "#if 1" for i in kept)
    assert sum(a != b for a, b in zip(gpu, emu_src, strict=True)) > 8


def test_every_ablation_changes_one_thing_of_one_kernel():
    """A pair in one file differs in one define; a pair across two steps' files keeps the
    block tile, the threads and the outputs per thread."""
    refs = sgemm.kernel_refs()
    for name, _what, without, with_ in sgemm.ABLATIONS:
        ra, rb = refs[without], refs[with_]
        a, b = dict(ra.defines), dict(rb.defines)
        changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        if ra.file == rb.file:
            assert len(changed) == 1, (name, changed)
            continue
        assert all(a[k] == b[k] for k in ("BM", "BN", "BK")), name
        assert ra.launch.block == rb.launch.block, name
        ta, tb = sgemm.traffic(without), sgemm.traffic(with_)
        assert ta.shared_operands_per_fma == tb.shared_operands_per_fma, name


def test_the_counters_experiment_names_each_launch_s_kernel():
    """cuBLAS's row of counters.json says which kernel the library chose, from ncu's CSV."""
    from tilelab.experiments import counters

    head = ('"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit",'
            '"Metric Value"\n')
    rows = [f'"{i}","7","{name}","s","{m}","","{v}"\n' for i, name in
            enumerate(["matmul_ahead", "sm80_xmma_gemm_tilesize256x128x8"])
            for m, v in (("sm__cycles_elapsed.max", "6,084,000"), ("smsp__inst_executed.sum", "9"))]
    text = "==PROF== Connected\n" + head + "".join(rows)
    assert counters.kernel_names(text) == ["matmul_ahead", "sm80_xmma_gemm_tilesize256x128x8"]
    assert [r["sm__cycles_elapsed_max"] for r in counters.parse(text)] == [6084000.0] * 2


def test_step_8_hands_its_copies_over_with_one_barrier_per_tile(rng):
    """Loading the next tile's first operands right after the tile's barrier is race-free
    on the emulator; without that barrier the same kernel races (the check sees it)."""
    from tilelab import emu

    ref = sgemm.kernel_refs()["ahead_256x128x8"]
    shape = (256, 128, 24)  # three tiles along K: both copies refilled
    barrier = "__syncthreads();  // copy p ^ 1 is complete, and nobody reads copy p any more"
    src = ref.source()
    assert src.count(barrier) == 2  # one in step 8's order, one in step 5's
    races = []
    for text in (src, src.replace(barrier, ";", 1)):
        fn = emu.SourceModule(text, analysis=True).get_function(ref.name)
        launch(get_runtime("emu"), fn, MATMUL, ref.launch, shape, MATMUL.make_inputs(shape, rng))
        races.append(len(fn.last_report.analysis.races))
    assert races[0] == 0
    assert races[1] > 0


@pytest.mark.parametrize(("swizzle", "degree"), [(1, 1.0), (0, 2.0)])
def test_step_7_s_swizzle_spreads_rows_of_128_bytes_over_the_banks(rng, swizzle, degree):
    """With BK = 32 a row of A's tile is 128 bytes: the two rows a quarter-warp reads sit
    in the same banks unless swizzled (the emulator's degree of the loads of As)."""
    from dataclasses import replace

    from tilelab import emu

    base = sgemm.kernel_refs()["swizzle"]
    d = {**dict(base.defines), "BM": "64", "BN": "128", "BK": "32", "WM": "32", "WN": "64",
         "TM": "4", "TN": "16", "SWIZZLE": str(swizzle), "PAD": "0"}
    ref = replace(base, launch=replace(base.launch, tile=(128, 64)), defines=tuple(d.items()))
    fn = emu.SourceModule(sgemm.emulator_source(ref), analysis=True).get_function(ref.name)
    shape = (64, 128, 64)
    inputs = MATMUL.make_inputs(shape, rng)
    got = launch(get_runtime("emu"), fn, MATMUL, ref.launch, shape, inputs)
    np.testing.assert_allclose(got, MATMUL.reference(inputs), rtol=1e-4, atol=1e-4)
    reads = [b for b in fn.last_report.analysis.bank_lines
             if b.array == "As" and b.kind == "read"]
    assert reads and max(b.avg_degree for b in reads) == degree
