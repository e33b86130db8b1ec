"""The road to cuBLAS: ladder kernels on the emulator, the traffic and occupancy models,
ptxas reports, and (on a GPU) cuBLAS through ctypes against float64 with TF32 off."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilelab.catalog import road as sgemm
from tilelab.catalog.problems import MATMUL
from tilelab.device.runtime import get_runtime
from tilelab.experiments import road as measured
from tilelab.grading.correctness import check_function, launch

REPO = Path(__file__).resolve().parents[1]


#: the shapes a configuration of one define's change is checked at on the emulator (the
#: steps themselves at every small shape): 1 x 1 x 1, odd, and tiles inside and at edges
#: at a K that is no multiple of 4 (step 9's unaligned interior path)
FEW_SHAPES = ((1, 1, 1), (37, 53, 29), (257, 300, 129))


@pytest.mark.slow
@pytest.mark.parametrize("key", list(sgemm.kernel_refs()))
def test_every_step_and_configuration_is_right_on_the_emulator(key, rng):
    ref = sgemm.kernel_refs()[key]
    rt = get_runtime("emu")
    fn = rt.SourceModule(sgemm.emulator_source(ref)).get_function(ref.name)
    for shape in sgemm.SMALL_SHAPES if key in sgemm.STEPS else FEW_SHAPES:
        result = check_function(rt, fn, MATMUL, ref.launch, shape, rng)
        assert result.ok, f"{key} {shape}: {result.message}"


@pytest.mark.parametrize("key", list(sgemm.CANDIDATES))
def test_step_9_is_right_where_interior_tiles_are_not_16_byte_aligned(key, rng):
    """K = N = 4 q + 1 with several interior tiles: the unchecked scalar path."""
    ref = sgemm.kernel_refs()[key]
    rt = get_runtime("emu")
    fn = rt.SourceModule(ref.source()).get_function(ref.name)
    shape = (2 * ref.launch.tile[1] + 3, 2 * ref.launch.tile[0] + 1, 37)
    inputs = MATMUL.make_inputs(shape, rng)
    got = launch(rt, fn, MATMUL, ref.launch, shape, inputs)
    np.testing.assert_allclose(got, MATMUL.reference(inputs), rtol=1e-4, atol=1e-4)


def test_step_9_chooses_the_fewest_waves_at_each_configuration_s_speed():
    """At equal speed per SM, the tile that leaves the fewest SMs idle in the last wave;
    at N = 4096 on 132 SMs every candidate fills its waves about alike, and the fastest wins."""
    same = {c: 40.0 for c in sgemm.CANDIDATES}
    # 3072 on 132 SMs: 288 tiles of 128 x 256 (3 rounds for 2.2 of work), 1152 of 64 x 128
    # (9 rounds for 8.7)
    assert sgemm.choose(3072, 3072, 3072, 132, same) == "shapes_64x128x16"
    fast_big = {**same, "shapes": 50.0}
    assert sgemm.choose(4096, 4096, 4096, 132, fast_big) == "shapes"
    with pytest.raises(ValueError, match="no rate"):
        sgemm.choose(1024, 1024, 1024, 132, {"shapes": 1.0})
    t = sgemm.predicted_ms("shapes", 4096, 4096, 4096, 132, 50.0)
    assert t == pytest.approx(4 * 2 * 128 * 256 * 4096 / (50e12 / 132) * 1e3)


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
    rows, gpu = measured.ptxas_rows(REPO / "book" / "data")
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
    """A pair in one file differs in one define (or in the tile, BM and BN together); a
    pair across two steps' files keeps the block tile, the threads and the shared operands
    per FMA. A pair that is only a comparison says so (one_change False)."""
    refs = sgemm.kernel_refs()
    assert sgemm.ABLATIONS
    for ab in sgemm.ABLATIONS:
        if not ab.one_change:
            continue
        ra, rb = refs[ab.without], refs[ab.with_]
        a, b = dict(ra.defines), dict(rb.defines)
        changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        if ra.file == rb.file:
            assert len(changed) == 1 or changed == {"BM", "BN"}, (ab.key, changed)
            continue
        assert ra.launch.tile == rb.launch.tile, ab.key
        assert math.prod(ra.launch.block) == math.prod(rb.launch.block), ab.key
        ta, tb = sgemm.traffic(ab.without), sgemm.traffic(ab.with_)
        assert ta.shared_operands_per_fma == tb.shared_operands_per_fma, ab.key


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


@pytest.mark.parametrize(("swizzle", "degree"), [(1, 1.0), (0, 4.0)])
def test_step_7_s_swizzle_spreads_rows_of_128_bytes_over_the_banks(rng, swizzle, degree):
    """With BK = 32 a row of A's tile is 128 bytes. A load of A is a uniform one (the four
    lanes of a row of lanes read alike), served a half-warp, four rows, at a time: the four
    rows sit in the same banks unless swizzled (the emulator's degree of the loads of As)."""
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


def test_the_scoreboard_credits_a_step_to_ablations_only_along_a_chain_of_one_changes(
        monkeypatch):
    """Steps 1 to 6, 8 and 9 are reached from their start by one-change pairs; step 7's
    pair from step 6 is a comparison, so its gain is credited in part; take one link of
    step 1's chain away and step 1 is credited in part too."""
    got = {s.key: sgemm.attribution(s) for s in sgemm.SCOREBOARD}
    assert got["swizzle"] == "ablations in part"
    assert all(got[k] == "ablations" for k in ("regblock_1d", "regblock", "vec4", "warptile",
                                                "dbuf", "async", "ahead"))
    assert got["shapes"].startswith("ablations")
    monkeypatch.setattr(sgemm, "ABLATIONS",
                        tuple(ab for ab in sgemm.ABLATIONS if ab.key != "tile_1d"))
    step1 = next(s for s in sgemm.SCOREBOARD if s.key == "regblock_1d")
    assert sgemm.attribution(step1) == "ablations in part"
