"""The emulator's global-traffic counters, exact for every shipped kernel.

Each expected count is worked out by hand from the kernel's indexing, for shapes that are
multiples of the tiles (so every warp's addresses start on a 128-byte line):
a warp of 32 lanes reading 32 consecutive floats touches 4 sectors of 32 bytes; 16 rows
with one float each touch 16; a warp of a 16x16 block covers 2 rows of 16 threads.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilelab import emu
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, kernel_file, slow_but_right
from tilelab.emu.traffic import Totals
from tilelab.grading import traffic
from tilelab.grading.sandbox import grade_source

M, N, K = 64, 96, 128  # rectangular, multiples of 32
ROWS, COLS = 64, 96


def analyse(source: str, name: str, args: list, block: tuple, grid: tuple):
    return emu.analyze(source, name, *args, block=block, grid=grid, timeout=120)


def analyse_ref(key: str, shape: tuple):
    ref = KERNELS[key]
    sizes = ref.problem.sizes(shape)
    inputs = ref.problem.make_inputs(shape, np.random.default_rng(1))
    bufs = {n: emu.to_device(v) for n, v in inputs.items()}
    bufs[ref.problem.output] = emu.mem_alloc(4 * int(np.prod(ref.problem.output_shape(shape))))
    args = [bufs[a] if a in bufs else np.int32(sizes[a]) for a in ref.problem.arg_order]
    return analyse(ref.source(), ref.name, args, ref.launch.block, ref.launch.grid(sizes))


def counts(report) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(param, kind) -> (requests, sectors, lanes), summed over lines."""
    out: dict[tuple[str, str], tuple[int, int, int]] = {}
    for t in report.traffic:
        r, s, lanes = out.get((t.param, t.kind), (0, 0, 0))
        out[(t.param, t.kind)] = (r + t.requests, s + t.sectors, lanes + t.lanes)
    return out


WARPS = M * N // 32  # one thread per element of C


def matmul_expected(a: int, b: int, c: int, loads_per_thread: int) -> dict:
    """Requests and lanes follow from the loop; ``a, b, c``: sectors per request."""
    req = WARPS * loads_per_thread
    return {("A", "read"): (req, a * req, 32 * req), ("B", "read"): (req, b * req, 32 * req),
            ("C", "write"): (WARPS, c * WARPS, 32 * WARPS)}


MATMUL_CASES = {
    # 16x16 block, x along columns: a warp is 2 rows x 16 columns. A: 2 rows -> 2 sectors;
    # B: 16 consecutive floats (64 B) -> 2; C: 2 rows x 64 B -> 4. One load of each per k.
    "naive": matmul_expected(2, 2, 4, K),
    # x along rows: a warp is 16 rows x 2 columns. A: 16 rows -> 16; B: 2 floats -> 1;
    # C: 16 rows x 8 B -> 16.
    "naive_xrow": matmul_expected(16, 1, 16, K),
    # TILE 16: 2 rows x 16 floats per warp for A's and B's tile loads: 4 sectors; K/16 tiles.
    "tiled16": matmul_expected(4, 4, 4, K // 16),
    # TILE 32: a warp is one row of 32 threads: 4 sectors per load; K/32 tiles.
    "tiled32": matmul_expected(4, 4, 4, K // 32),
    "tiled32_padded": matmul_expected(4, 4, 4, K // 32),
    "tiled32_at": matmul_expected(4, 4, 4, K // 32),
    "tiled32_at_padded": matmul_expected(4, 4, 4, K // 32),
}


@pytest.mark.slow
@pytest.mark.parametrize("key", list(MATMUL_CASES))
def test_matmul_kernels_counted_by_hand(key):
    report = analyse_ref(key, (M, N, K))
    assert counts(report) == MATMUL_CASES[key]


def transpose_expected(out_sectors: int, in_param: str = "in") -> dict:
    # 32x8 threads per 32x32 tile, 4 elements per thread: a warp is 32 consecutive x
    req = ROWS * COLS // 32
    return {(in_param, "read"): (req, 4 * req, 32 * req),
            ("out", "write"): (req, out_sectors * req, 32 * req)}


TRANSPOSE_CASES = {
    "copy": transpose_expected(4),
    # out[x * rows + y]: 32 lanes, each a row of out apart -> 32 sectors per store
    "transpose_naive": transpose_expected(32),
    "transpose_shared": transpose_expected(4),
    "transpose_padded": transpose_expected(4),
}


@pytest.mark.slow
@pytest.mark.parametrize("key", list(TRANSPOSE_CASES))
def test_transpose_kernels_counted_by_hand(key):
    assert counts(analyse_ref(key, (ROWS, COLS))) == TRANSPOSE_CASES[key]


def test_other_shipped_kernels_counted_by_hand():
    n, threads = 1024, 256
    a = emu.to_device(np.ones(n, np.float32))
    b = emu.to_device(np.ones(n, np.float32))
    c = emu.mem_alloc(4 * n)
    req = n // 32  # one coalesced request per warp and array: 4 sectors
    for name in ("add_global", "add_shared"):
        report = analyse(kernel_file("elementwise.cu"), name, [a, b, c, np.int32(n)],
                         (threads, 1, 1), (n // threads, 1))
        assert counts(report) == {("a", "read"): (req, 4 * req, n),
                                  ("b", "read"): (req, 4 * req, n),
                                  ("c", "write"): (req, 4 * req, n)}, name
    out = emu.mem_alloc(4 * 2 * 128)
    for file, name, args in (("bank_stride.cu", "bank_stride", [np.int32(2), np.int32(4)]),
                             ("fma_peak.cu", "fma_peak",
                              [np.float32(1.0), np.float32(0.5), np.int32(3)])):
        report = analyse(kernel_file(file), name, [out, *args], (128, 1, 1), (2, 1))
        assert counts(report) == {("out", "write"): (8, 32, 256)}, name  # 8 warps, 1 store


def test_loads_per_multiply_add():
    naive = traffic.summary(analyse_ref("naive", (M, N, K)), KERNELS["naive"].problem,
                            (M, N, K))
    tiled = traffic.summary(analyse_ref("tiled32", (M, N, K)), KERNELS["tiled32"].problem,
                            (M, N, K))
    assert naive["loads_per_multiply_add"] == 2.0  # one A and one B per multiply-add
    assert tiled["loads_per_multiply_add"] == 2 / 32  # each loaded value used 32 times
    assert naive["load_bytes_per_multiply_add"] == 8.0
    assert tiled["sectors_per_load_request"] == 4.0
    assert tiled["shared_wavefronts"] > 0 and naive["shared_wavefronts"] == 0


def test_loads_through_other_pointers_count_for_their_parameter():
    src = """
    __global__ void k(const float* in, float* out, int n) {
        const float* p = in + 1;          // a local pointer into in's buffer
        int i = threadIdx.x;
        if (i + 1 < n) out[i] = p[i] + *in;
        if (i == 0) out[n - 1] = n;
    }"""
    a, o = emu.to_device(np.arange(32, dtype=np.float32)), emu.mem_alloc(4 * 32)
    report = analyse(src, "k", [a, o, np.int32(32)], (32, 1, 1), (1, 1))
    # line 5, 31 lanes: p[i] reads bytes 4..127 of in (4 sectors), *in one float (1 sector);
    # out[i] 31 consecutive floats (4 sectors); line 6: one lane, one store
    assert counts(report) == {("in", "read"): (2, 5, 62), ("out", "write"): (2, 5, 32)}
    assert {(t.line, t.param, t.kind) for t in report.traffic} == {
        (5, "in", "read"), (5, "out", "write"), (6, "out", "write")}


def test_parameters_sharing_a_buffer_are_told_apart():
    src = """
    __global__ void k(const float* lo, const float* hi, float* out) {
        int i = threadIdx.x;
        out[i] = lo[i] + hi[i];
    }"""
    buf, o = emu.to_device(np.arange(64, dtype=np.float32)), emu.mem_alloc(4 * 32)
    hi = np.uintp(int(buf) + 4 * 32)  # the second half of the same allocation
    report = analyse(src, "k", [buf, hi, o], (32, 1, 1), (1, 1))
    assert counts(report) == {("lo", "read"): (1, 4, 32), ("hi", "read"): (1, 4, 32),
                              ("out", "write"): (1, 4, 32)}


def test_vector_accesses_are_one_request_of_their_width():
    src = """
    __global__ void k(const float* in, float* out) {
        int i = threadIdx.x;
        float4 v = reinterpret_cast<const float4*>(in)[i];
        out[i] = v.x + v.y + v.z + v.w;
    }
    __global__ void k2(const float4* in, float4* out) { out[threadIdx.x] = in[threadIdx.x]; }"""
    a, o = emu.to_device(np.arange(128, dtype=np.float32)), emu.mem_alloc(4 * 128)
    # 32 lanes x 16 bytes, consecutive: 512 bytes in 16 sectors, one request
    report = analyse(src, "k", [a, o], (32, 1, 1), (1, 1))
    assert counts(report) == {("in", "read"): (1, 16, 32), ("out", "write"): (1, 4, 32)}
    assert next(t.bytes for t in report.traffic if t.param == "in") == 512
    report = analyse(src, "k2", [a, o], (32, 1, 1), (1, 1))
    assert counts(report) == {("in", "read"): (1, 16, 32), ("out", "write"): (1, 16, 32)}


@pytest.mark.slow
def test_learner_sees_an_uncoalesced_naive_kernel():
    v = grade_source("naive", slow_but_right("naive"), backend_name="emu")
    assert v.correct
    text = "\n".join(v.messages)
    assert "your loads of A (line" in text and "16 sectors per request" in text
    assert "threadIdx.x walks a column" in text
    assert v.traffic["sectors_per_load_request"] > 4


@pytest.mark.slow
def test_learner_sees_a_tiled_kernel_that_reuses_nothing():
    v = grade_source("tiled", slow_but_right("tiled"), backend_name="emu")
    assert v.correct
    assert "reads global memory 2 times per multiply-add, as the naive one does" in (
        "\n".join(v.messages))
    ok = grade_source("tiled", KERNELS["tiled32"].source(), backend_name="emu")
    assert not any("no tile is reused" in m for m in ok.messages)
    assert ok.traffic["loads_per_multiply_add"] == 2 / 32


@pytest.mark.slow
def test_check_json_carries_the_traffic(tmp_path, capsys):
    from tilelab.cli import main

    path = tmp_path / "k.cu"
    ex = exercises.get("transpose_shared")
    path.write_text(slow_but_right(ex.id))  # the naive transpose under the exercise's name
    main(["check", ex.id, str(path), "--json", "--backend", "emu"])
    verdict = json.loads(capsys.readouterr().out)
    lines = {(x["param"], x["kind"]): x for x in verdict["traffic"]["lines"]}
    assert lines[("out", "write")]["sectors_per_request"] == 32.0
    assert any("your stores to out" in m for m in verdict["messages"])


def test_totals_add_up():
    report = analyse_ref("naive", (32, 32, 32))
    t = Totals.of(report.traffic)
    assert t.load_requests == sum(x.requests for x in report.traffic if x.kind == "read")
