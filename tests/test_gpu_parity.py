"""The same kernels give the same results on PyCUDA and on the CPU emulator (needs a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelab.catalog.reference import KERNELS
from tilelab.device.runtime import get_runtime
from tilelab.grading.correctness import launch

pytestmark = pytest.mark.gpu

REDUCE = r"""
__global__ void block_sum(const float* x, float* out, int n)
{
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = buf[0];
}
"""

HISTOGRAM = r"""
__global__ void histogram(const int* x, unsigned int* bins, int n)
{
    __shared__ unsigned int local[64];
    if (threadIdx.x < 64) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[x[i] & 63], 1u);
    __syncthreads();
    if (threadIdx.x < 64) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
"""


@pytest.mark.parametrize("key,shape", [
    ("naive", (37, 53, 29)), ("tiled16", (100, 30, 70)), ("tiled32", (65, 33, 129)),
    ("tiled32_at_padded", (64, 96, 40)), ("transpose_shared", (100, 37)),
    ("transpose_padded", (33, 65)), ("copy", (31, 300)),
])
def test_reference_kernels_agree(key, shape, rng):
    k = KERNELS[key]
    inputs = k.problem.make_inputs(shape, rng)
    results = {}
    for name in ("gpu", "emu"):
        rt = get_runtime(name)
        fn = rt.SourceModule(k.source()).get_function(k.name)
        results[name] = launch(rt, fn, k.problem, k.launch, shape, inputs)
    np.testing.assert_allclose(results["gpu"], results["emu"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results["gpu"], k.problem.reference(inputs), rtol=1e-4, atol=1e-4)


def test_dynamic_shared_memory_reduction_agrees(rng):
    n, threads = 1000, 128
    x = rng.standard_normal(n).astype(np.float32)
    blocks = (n + threads - 1) // threads
    out = {}
    for name in ("gpu", "emu"):
        rt = get_runtime(name)
        fn = rt.SourceModule(REDUCE).get_function("block_sum")
        res = np.zeros(blocks, np.float32)
        fn(rt.In(x), rt.Out(res), np.int32(n), block=(threads, 1, 1), grid=(blocks, 1),
           shared=threads * 4)
        out[name] = res
    expected = np.add.reduceat(x.astype(np.float64), np.arange(0, n, threads))
    np.testing.assert_allclose(out["gpu"], out["emu"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["gpu"], expected, rtol=1e-4, atol=1e-4)


def test_atomics_histogram_agrees(rng):
    n = 10_000
    x = rng.integers(0, 1 << 20, n).astype(np.int32)
    out = {}
    for name in ("gpu", "emu"):
        rt = get_runtime(name)
        fn = rt.SourceModule(HISTOGRAM).get_function("histogram")
        bins = np.zeros(64, np.uint32)
        fn(rt.In(x), rt.InOut(bins), np.int32(n), block=(128, 1, 1), grid=(8, 1))
        out[name] = bins
    np.testing.assert_array_equal(out["gpu"], out["emu"])
    np.testing.assert_array_equal(out["gpu"], np.bincount(x & 63, minlength=64))
