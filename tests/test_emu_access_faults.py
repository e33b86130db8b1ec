"""Accesses a GPU stops at, stopped by the emulator at the same line and thread: loads and
stores off their type's alignment ("misaligned address" on a GPU), and global accesses
outside their buffer, before its start or in the bytes after its end (an illegal address,
or compute-sanitizer's memcheck), each told with the index and the buffer's extent."""

from __future__ import annotations

import numpy as np
import pytest
from support.emu_samples import line_of

import tilelab.emu as cuda

WIDE = r"""
__global__ void rows_vec4(const float* A, float* out, int K)
{
    int r = blockIdx.x, q = threadIdx.x;
    if (4 * q + 3 < K) {
        float4 v = reinterpret_cast<const float4*>(&A[r * K])[q];   // row load
        out[r * K + 4 * q] = v.x + v.y + v.z + v.w;
    }
}

__global__ void carved_double(const float* x, float* out)
{
    extern __shared__ char smem[];
    double* sums = reinterpret_cast<double*>(smem + 100);
    int t = threadIdx.x;
    smem[t] = 1;
    sums[t] = x[t];                                                 // carved store
    __syncthreads();
    out[t] = (float)sums[(t + 1) % blockDim.x] + smem[t];
}

__global__ void padded_tile_vec4(const float* x, float* out, int pad)
{
    __shared__ float tile[8][36];
    int t = threadIdx.x, w = 32 + pad;
    for (int j = t; j < 8 * w; j += blockDim.x) (&tile[0][0])[j] = x[j];
    __syncthreads();
    int r = t / 8, c = (t % 8) * 4;
    float4 v = *reinterpret_cast<const float4*>(&tile[0][0] + r * w + c);   // tile load
    out[t] = v.x + v.y + v.z + v.w;
}

__global__ void copy_vec2(const float2* p, float* out)
{
    int i = threadIdx.x;
    float2 v = p[i];                                                // pointer load
    out[2 * i] = v.x;
    out[2 * i + 1] = v.y;
}
"""

BOUNDS = r"""
__global__ void halo(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i - 2] + x[i];                              // before the start
}

__global__ void store_past(float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) c[i] = 1.0f;                                        // one past the end
}

__global__ void read_tail(const float* x, float* y, int n)
{
    int i = threadIdx.x;
    if (i < n) y[i] = x[i + 1];                                     // tail read
}
"""


@pytest.fixture(scope="module", params=[False, True], ids=["graded", "analysis"])
def wide(request):
    return cuda.SourceModule(WIDE, analysis=request.param)


@pytest.fixture(scope="module")
def bounds():
    return cuda.SourceModule(BOUNDS), cuda.SourceModule(BOUNDS, analysis=True)


def _rows(wide, k: int) -> np.ndarray:
    a = np.arange(4 * k, dtype=np.float32)
    out = np.zeros(4 * k, np.float32)
    wide.get_function("rows_vec4")(cuda.In(a), cuda.Out(out), np.int32(k), block=(32, 1, 1),
                                   grid=(4, 1))
    return out


def test_float4_rows_at_an_odd_row_length_stop_at_the_load(wide):
    """K = 33: row r starts r * 132 bytes in, off 16 in rows 1 to 3; the GPU stops with
    "misaligned address". The error names the line, a thread of such a row, the byte
    offset and the test that fixes it."""
    assert _rows(wide, 32)[4] == 4 + 5 + 6 + 7  # aligned rows: no fault
    with pytest.raises(cuda.MisalignedAccess) as info:
        _rows(wide, 33)
    e = info.value
    assert e.line == line_of(WIDE, "row load") and e.block[0] in (1, 2, 3)
    assert (e.buffer, e.access, e.align, e.type_name) == ("A", "read", 16, "float4")
    assert e.offset == e.block[0] * 33 * 4 + 16 * e.thread[0] and e.offset % 16
    text = str(e)
    assert '"misaligned address"' in text and f"line {e.line}" in text
    assert f"thread {tuple(e.thread)}".replace(" ", "") in text.replace(" ", "")
    assert "`if (K % 4 == 0)`" in text and "multiple of 4" in text


def test_a_double_carved_after_100_chars_stops_at_its_store(wide):
    with pytest.raises(cuda.MisalignedAccess) as info:
        wide.get_function("carved_double")(cuda.In(np.ones(64, np.float32)),
                                           cuda.Out(np.zeros(64, np.float32)),
                                           block=(64, 1, 1), shared=100 + 64 * 8)
    e = info.value
    assert e.line == line_of(WIDE, "carved store") and e.access == "write"
    assert e.buffer == "dynamic_shared" and e.offset % 8 == 4 and e.align == 8
    assert "round up" in str(e) and "(offset + 7) / 8 * 8" in str(e)


@pytest.mark.parametrize("pad", [1, 4])
def test_float4_reads_of_a_tile_padded_by_one_float_stop(wide, pad):
    """Rows 36 floats apart keep float4 reads aligned; 33 apart, every odd row is off."""
    x = np.arange(8 * 36, dtype=np.float32)
    out = np.zeros(64, np.float32)
    run = lambda: wide.get_function("padded_tile_vec4")(  # noqa: E731
        cuda.In(x), cuda.Out(out), np.int32(pad), block=(64, 1, 1))
    if pad == 4:
        run()
        w = x[:8 * 36].reshape(8, 36)[:, :32].reshape(64, 4).sum(1)
        assert np.array_equal(out, w)
        return
    with pytest.raises(cuda.MisalignedAccess) as info:
        run()
    e = info.value
    assert e.line == line_of(WIDE, "tile load") and e.buffer == "shared"
    assert e.offset % 16 and (e.offset // (33 * 4)) % 2 == 1  # in an odd row
    assert "pad by a multiple of 4 floats" in str(e)


def test_a_pointer_passed_4_bytes_into_its_allocation_misaligns_float2(wide):
    buf = cuda.mem_alloc(4 + 64 * 8)
    with pytest.raises(cuda.MisalignedAccess) as info:
        wide.get_function("copy_vec2")(np.uintp(int(buf) + 4), cuda.Out(np.zeros(64, np.float32)),
                                       block=(32, 1, 1))
    e = info.value
    assert e.line == line_of(WIDE, "pointer load") and e.buffer == "p"
    assert "points 4 bytes into its allocation" in str(e)
    out = np.zeros(64, np.float32)
    data = np.arange(66, dtype=np.float32)
    cuda.memcpy_htod(buf, data[:(4 + 64 * 8) // 4])
    wide.get_function("copy_vec2")(np.uintp(int(buf) + 8), cuda.Out(out), block=(32, 1, 1))
    assert np.array_equal(out, data[2:66])


def test_a_read_before_a_buffers_start_is_stopped_by_the_analysed_build(bounds):
    """x[i - 2] at i < 2 reads the slack before the buffer, which the graded build cannot
    see (its NaN shows only in the result); the analysed build checks every access."""
    graded, analysed = bounds
    args = (cuda.In(np.ones(101, np.float32)), cuda.Out(np.zeros(101, np.float32)),
            np.int32(101))
    y = np.zeros(101, np.float32)
    graded.get_function("halo")(args[0], cuda.Out(y), args[2], block=(64, 1, 1), grid=(2, 1))
    assert np.isnan(y[:2]).all() and (y[2:] == 2).all()
    with pytest.raises(cuda.OutOfBoundsAccess) as info:
        analysed.get_function("halo")(*args, block=(64, 1, 1), grid=(2, 1))
    e = info.value
    assert (e.buffer, e.access, e.index) == ("x", "read", -2)
    assert e.line == line_of(BOUNDS, "before the start")
    assert e.block == (0, 0, 0) and e.thread == (0, 0, 0)
    text = str(e)
    assert "2 element(s) before the start" in text and "holds 101 elements" in text
    assert "if (i >= 2)" in text


def test_a_write_one_past_the_end_names_its_thread_and_line_in_the_graded_build(bounds):
    """c[101] of 101 floats lands in the bytes between the data and the guard region: a
    changed canary after the kernel ended, which the graded build's launch runs again in
    the analysed build to find the thread and line (once 'thread and line unknown')."""
    graded, _ = bounds
    with pytest.raises(cuda.OutOfBoundsAccess) as info:
        graded.get_function("store_past")(cuda.Out(np.zeros(101, np.float32)), np.int32(101),
                                          block=(64, 1, 1), grid=(2, 1))
    e = info.value
    assert (e.buffer, e.access, e.index) == ("c", "write", 101)
    assert e.line == line_of(BOUNDS, "one past the end")
    assert e.block == (1, 0, 0) and e.thread == (37, 0, 0)
    assert "unknown" not in str(e) and "1 element(s) past the end" in str(e)


def test_a_read_just_past_the_end_is_stopped_by_the_analysed_build(bounds):
    _, analysed = bounds
    with pytest.raises(cuda.OutOfBoundsAccess) as info:
        analysed.get_function("read_tail")(cuda.In(np.ones(101, np.float32)),
                                           cuda.Out(np.zeros(101, np.float32)), np.int32(101),
                                           block=(128, 1, 1))
    e = info.value
    assert (e.buffer, e.access, e.index, e.thread) == ("x", "read", 101, (100, 0, 0))
    assert e.line == line_of(BOUNDS, "tail read")


def test_a_halo_read_before_the_start_is_the_checks_diagnosis():
    """The stencil's left halo without its `left >= 0` test: block 0 reads x[-2] and x[-1],
    which the graded build lets through (a NaN in y[0] and y[1]); the check's diagnosis is
    the analysed build's stop at that read (its line, thread, index and x's extent), not a
    guess from the wrong values."""
    from tilelab.catalog import exercises
    from tilelab.grading.pipeline import evaluate

    source = exercises.get("stencil").reference.source().replace(
        "(left >= 0 && left < n) ? x[left]", "(left < n) ? x[left]")
    v = evaluate("stencil", source, "emu", speed=False)
    assert not v.correct
    text = " ".join(v.messages)
    line = line_of(source, "x[left]")
    assert "out of bounds" in text and f"line {line}" in text, text
    assert "before the start of `const float* x`" in text and "if (i >= 2)" in text, text
    assert "stale" not in text, text
