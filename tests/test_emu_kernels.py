"""The CPU emulator runs ordinary CUDA C kernels correctly, with PyCUDA's calling conventions."""

from __future__ import annotations

import numpy as np
import pytest
from support.emu_samples import TILED_MATMUL

import tilelab.emu as cuda

BASICS = r"""
#include <cuda_runtime.h>
#include <math.h>

__device__ float scaled(float x, float s) { return x * s; }  // a __device__ helper

__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

__global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    int x = blockIdx.x * 32 + threadIdx.x;
    for (int j = 0; j < 32; j += 8) {
        int y = blockIdx.y * 32 + threadIdx.y + j;
        if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
    }
}

__global__ void transpose_shared(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[32][32];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void transpose_padded(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void block_sum(const float* x, float* out, int n)
{
    extern __shared__ float buf[];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

__global__ void histogram(const int* values, unsigned int* bins, int n, float* total)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[values[i]], 1u);
        atomicAdd(total, 1.0f);
    }
}

__global__ void axpy4(const float4* x, float4* y, float a, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i], w = y[i];
        y[i] = make_float4(scaled(v.x, a) + w.x, scaled(v.y, a) + w.y,
                           scaled(v.z, a) + w.z, fmaf(v.w, a, w.w));
    }
}

__global__ void where_am_i(int* out)
{
    int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int i = bx * blockDim.x * blockDim.y * blockDim.z + tx;
    out[6 * i + 0] = threadIdx.x; out[6 * i + 1] = threadIdx.y; out[6 * i + 2] = threadIdx.z;
    out[6 * i + 3] = blockIdx.x;  out[6 * i + 4] = blockIdx.y;  out[6 * i + 5] = blockIdx.z;
}

__global__ void hello(int n, double x)
{
    if (threadIdx.x < n) printf("thread %d of %d says %.2f\n", threadIdx.x, n, x);
}
"""


@pytest.fixture(scope="module")
def basics():
    return cuda.SourceModule(BASICS)


def test_naive_matmul_odd_shapes(basics, rng):
    M, N, K = 37, 53, 29
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.zeros((M, N), np.float32)
    basics.get_function("matmul_naive")(
        cuda.In(A), cuda.In(B), cuda.Out(C), np.int32(M), np.int32(N), np.int32(K),
        block=(16, 16, 1), grid=((N + 15) // 16, (M + 15) // 16))
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_correct(rng):
    M, N, K = 45, 38, 70
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.zeros((M, N), np.float32)
    f = cuda.SourceModule(TILED_MATMUL).get_function("matmul_tiled")
    f(cuda.In(A), cuda.In(B), cuda.Out(C), np.int32(M), np.int32(N), np.int32(K),
      block=(16, 16, 1), grid=((N + 15) // 16, (M + 15) // 16))
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel", ["transpose_naive", "transpose_shared", "transpose_padded"])
def test_transposes(basics, rng, kernel):
    rows, cols = 70, 45
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros((cols, rows), np.float32)
    basics.get_function(kernel)(cuda.In(a), cuda.Out(out), np.int32(rows), np.int32(cols),
                                block=(32, 8, 1), grid=((cols + 31) // 32, (rows + 31) // 32))
    np.testing.assert_array_equal(out, a.T)


def test_dynamic_shared_block_reduction(basics, rng):
    n, threads = 1000, 128
    blocks = (n + threads - 1) // threads
    x = rng.standard_normal(n).astype(np.float32)
    sums = np.zeros(blocks, np.float32)
    basics.get_function("block_sum")(cuda.In(x), cuda.Out(sums), np.int32(n),
                                     block=(threads, 1, 1), grid=(blocks, 1), shared=threads * 4)
    expect = np.add.reduceat(x.astype(np.float64), np.arange(0, n, threads))
    np.testing.assert_allclose(sums, expect, rtol=1e-4, atol=1e-4)


def test_dynamic_shared_too_small_is_reported(basics, rng):
    x = rng.standard_normal(256).astype(np.float32)
    with pytest.raises(cuda.OutOfBoundsAccess, match="shared=64"):
        basics.get_function("block_sum")(cuda.In(x), cuda.Out(np.zeros(2, np.float32)),
                                         np.int32(256), block=(128, 1, 1), grid=(2, 1),
                                         shared=64)


def test_atomics_histogram_and_float_sum(basics, rng):
    n = 5000
    values = rng.integers(0, 16, n).astype(np.int32)
    bins = cuda.mem_alloc(16 * 4)
    cuda.memcpy_htod(bins, np.zeros(16, np.uint32))
    total = np.zeros(1, np.float32)
    basics.get_function("histogram")(cuda.In(values), bins, np.int32(n), cuda.InOut(total),
                                     block=(256, 1, 1), grid=((n + 255) // 256, 1))
    out = np.empty(16, np.uint32)
    cuda.memcpy_dtoh(out, bins)
    np.testing.assert_array_equal(out, np.bincount(values, minlength=16))
    assert total[0] == n


def test_float4_and_device_helper(basics, rng):
    n = 4 * 50
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    expect = 2.5 * x.astype(np.float64) + y
    y_dev = cuda.to_device(y)
    basics.get_function("axpy4")(cuda.In(x), y_dev, np.float32(2.5), np.int32(n // 4),
                                 block=(64, 1, 1), grid=(1, 1))
    np.testing.assert_allclose(cuda.from_device(y_dev, n, np.float32), expect, rtol=1e-5,
                               atol=1e-5)


def test_3d_block_and_grid_indices(basics):
    block, grid = (4, 3, 2), (2, 3, 2)
    nthreads = 4 * 3 * 2 * 2 * 3 * 2
    out = np.full(6 * nthreads, -1, np.int32)
    basics.get_function("where_am_i")(cuda.Out(out), block=block, grid=grid)
    got = {tuple(r) for r in out.reshape(-1, 6)}
    expect = {(tx, ty, tz, bx, by, bz)
              for bz in range(2) for by in range(3) for bx in range(2)
              for tz in range(2) for ty in range(3) for tx in range(4)}
    assert got == expect


def test_printf_is_captured(basics, capsys):
    f = basics.get_function("hello")
    f(np.int32(3), np.float64(1.5), block=(8, 1, 1))
    printed = capsys.readouterr().out
    for t in range(3):
        assert f"thread {t} of 3 says 1.50" in printed
    assert "thread 3" not in printed
    assert f.last_report.stdout == printed


def test_printf_flood_is_capped(capsys):
    src = r"""__global__ void flood() {
        for (int i = 0; i < 20000; ++i) printf("%08d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", i);
    }"""
    f = cuda.SourceModule(src).get_function("flood")
    f(block=(4, 1, 1))
    assert f.last_report.stdout_truncated
    assert len(f.last_report.stdout) == 1 << 20
    assert "[printf: the output past 1 MiB was cut here." in capsys.readouterr().out


def test_no_extern_c_with_explicit_extern_c(rng):
    src = r"""
    template <typename T> __device__ T twice(T v) { return v + v; }
    extern "C" __global__ void double_it(float* x, int n) {
        int i = threadIdx.x;
        if (i < n) x[i] = twice(x[i]);
    }
    """
    x = rng.standard_normal(20).astype(np.float32)
    expect = 2 * x
    cuda.SourceModule(src, no_extern_c=True).get_function("double_it")(
        cuda.InOut(x), np.int32(20), block=(32, 1, 1))
    np.testing.assert_allclose(x, expect)


def test_options_defines_and_time_kernel(rng):
    src = "__global__ void fill(float* x) { x[threadIdx.x] = VALUE; }"
    x = np.zeros(4, np.float32)
    f = cuda.SourceModule(src, options=["-DVALUE=7.5f", "--use_fast_math"]).get_function("fill")
    seconds = f(cuda.Out(x), block=(4, 1, 1), time_kernel=True)
    assert isinstance(seconds, float) and seconds >= 0
    assert (x == 7.5).all()
    assert f.last_report.wall_seconds >= seconds


def test_device_allocation_api():
    a = cuda.mem_alloc(40)
    assert a.size == 40 and int(a) == int(a) and int(a) != int(cuda.mem_alloc(4))
    fresh = np.empty(10, np.float32)
    cuda.memcpy_dtoh(fresh, a)
    assert np.isnan(fresh).all()  # new device memory is poisoned
    ints = np.empty(10, np.int32)
    cuda.memcpy_dtoh(ints, a)
    assert (ints == np.iinfo(np.int32).max).all()
    a.free()
    with pytest.raises(cuda.LogicError):
        cuda.memcpy_dtoh(fresh, a)
    cuda.Context.synchronize()
    for n in (1, 3, 5, 4099):  # sizes that are no whole number of words hold the pattern too
        got = np.empty(n, np.uint8)
        cuda.memcpy_dtoh(got, cuda.mem_alloc(n))
        assert got.tobytes() == (b"\xff\xff\xff\x7f" * (n // 4 + 1))[:n]


def test_device_to_device_copies_and_32_bit_fills_as_pycuda_takes_them():
    """``memcpy_dtod(dest, src, size)`` and ``memset_d32(dest, value, count)``, with
    allocations or integer addresses (offsets into one) as PyCUDA takes them; what does not
    fit is refused as the driver refuses it, and nothing is written."""
    src, dst = cuda.to_device(np.arange(16, dtype=np.float32)), cuda.mem_alloc(64)
    cuda.memcpy_dtod(int(dst) + 8, int(src) + 16, 24)  # elements 4..9 to elements 2..7
    got = cuda.from_device(dst, 16, np.float32)
    assert got[2:8].tolist() == [4, 5, 6, 7, 8, 9] and np.isnan(got[:2]).all()
    cuda.memset_d32(int(dst) + 4, 0x7FC00001, 3)
    words = cuda.from_device(dst, 16, np.uint32)
    assert words[1:4].tolist() == [0x7FC00001] * 3
    assert cuda.from_device(dst, 16, np.float32)[4:8].tolist() == [6, 7, 8, 9]
    before = cuda.from_device(dst, 16, np.uint32)
    for bad in (lambda: cuda.memcpy_dtod(int(dst) + 40, src, 32),
                lambda: cuda.memcpy_dtod(dst, int(src) + 60, 8),
                lambda: cuda.memset_d32(int(dst) + 60, 0, 2),
                lambda: cuda.memset_d32(dst, 0, -1)):
        with pytest.raises(cuda.LogicError):
            bad()
    assert np.array_equal(cuda.from_device(dst, 16, np.uint32), before)


def test_basics_also_run_in_analysis_mode(rng, capsys):
    mod = cuda.SourceModule(BASICS, analysis=True)
    x = rng.standard_normal(256).astype(np.float32)
    sums = np.zeros(2, np.float32)
    mod.get_function("block_sum")(cuda.In(x), cuda.Out(sums), np.int32(256),
                                  block=(128, 1, 1), grid=(2, 1), shared=128 * 4)
    np.testing.assert_allclose(sums, x.reshape(2, -1).sum(axis=1, dtype=np.float64),
                               rtol=1e-4, atol=1e-4)
    a = rng.standard_normal((40, 33)).astype(np.float32)
    out = np.zeros((33, 40), np.float32)
    f = mod.get_function("transpose_padded")
    f(cuda.In(a), cuda.Out(out), np.int32(40), np.int32(33), block=(32, 8, 1), grid=(2, 2))
    np.testing.assert_array_equal(out, a.T)
    assert not f.last_report.analysis.has_races
    mod.get_function("hello")(np.int32(2), np.float64(0.25), block=(4, 1, 1))
    assert "thread 1 of 2 says 0.25" in capsys.readouterr().out
