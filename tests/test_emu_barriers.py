"""Missing and divergent barriers, and uninitialised shared memory, never go unnoticed."""

from __future__ import annotations

import numpy as np
import pytest
from support.emu_samples import TILED_MATMUL, line_of, without_barrier

import tilelab.emu as cuda


def _tiled(source: str, rng, M=48, N=40, K=64):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.zeros((M, N), np.float32)
    f = cuda.SourceModule(source).get_function("matmul_tiled")
    f(cuda.In(A), cuda.In(B), cuda.Out(C), np.int32(M), np.int32(N), np.int32(K),
      block=(16, 16, 1), grid=((N + 15) // 16, (M + 15) // 16))
    return C, A.astype(np.float64) @ B


@pytest.mark.parametrize("which", [1, 2])
def test_missing_barrier_is_wrong_on_every_run(rng, which):
    source = without_barrier(TILED_MATMUL, which)
    for _ in range(4):
        C, expect = _tiled(source, rng)
        assert not np.allclose(C, expect, rtol=1e-3, atol=1e-3, equal_nan=False)
        if which == 1:  # threads read tile elements nobody has written yet: poison
            assert np.isnan(C).any()


def test_both_barriers_is_right_on_every_run(rng):
    for _ in range(2):
        C, expect = _tiled(TILED_MATMUL, rng)
        np.testing.assert_allclose(C, expect, rtol=1e-4, atol=1e-4)


DIVERGENT = r"""
__global__ void half_barrier(float* out)
{
    if (threadIdx.x < 16) {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}

__global__ void early_exit(float* out, int n)
{
    __shared__ float s[64];
    if (threadIdx.x >= n) return;
    s[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % n];
}

__global__ void if_else_barriers(float* out)
{
    if (threadIdx.x % 2) { __syncthreads(); } else { __syncthreads(); }
    out[threadIdx.x] = 3.0f;
}

__global__ void counted(int* out)
{
    int c = __syncthreads_count(threadIdx.x % 3 == 0);
    int any = __syncthreads_or(threadIdx.x == 5);
    int all = __syncthreads_and(threadIdx.x < 100);
    out[threadIdx.x] = c * 100 + any * 10 + all;
}
"""


@pytest.fixture(scope="module")
def divergent():
    return cuda.SourceModule(DIVERGENT)


def test_barrier_inside_if_is_divergence(divergent):
    out = np.zeros(32, np.float32)
    with pytest.raises(cuda.BarrierDivergence) as info:
        divergent.get_function("half_barrier")(cuda.Out(out), block=(32, 1, 1))
    msg = str(info.value)
    assert "half_barrier" in msg and "line 5" in msg
    assert info.value.lines == (line_of(DIVERGENT, "__syncthreads();"),)
    assert (out == 0).all()  # nothing copied back from a failed launch


def test_early_return_before_barrier_is_divergence(divergent):
    out = np.zeros(32, np.float32)
    with pytest.raises(cuda.BarrierDivergence, match=r"early_exit.*exited"):
        divergent.get_function("early_exit")(cuda.Out(out), np.int32(20), block=(32, 1, 1))
    divergent.get_function("early_exit")(cuda.Out(out), np.int32(32), block=(32, 1, 1))
    assert (out == 2.0).all()


def test_different_barrier_calls_are_divergence(divergent):
    with pytest.raises(cuda.BarrierDivergence, match="different __syncthreads"):
        divergent.get_function("if_else_barriers")(cuda.Out(np.zeros(8, np.float32)),
                                                   block=(8, 1, 1))


def test_syncthreads_count_or_and(divergent):
    out = np.zeros(64, np.int32)
    divergent.get_function("counted")(cuda.Out(out), block=(64, 1, 1))
    assert (out == 22 * 100 + 10 + 1).all()


POISON = r"""
__global__ void read_uninitialised(float* out, int* iout)
{
    __shared__ float s[64];
    __shared__ int si[64];
    extern __shared__ double d[];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    out[2 * i] = s[t];                   // never written in this block: poison
    out[2 * i + 1] = (float)d[t];
    iout[i] = si[t];
    __syncthreads();
    s[t] = 1.0f; si[t] = 7; d[t] = 2.0;  // what the next block would see without re-poisoning
}
"""


def test_shared_memory_is_poisoned_at_every_block_start():
    blocks, threads = 4, 64
    out = np.zeros(2 * blocks * threads, np.float32)
    iout = np.zeros(blocks * threads, np.int32)
    f = cuda.SourceModule(POISON).get_function("read_uninitialised")
    f(cuda.Out(out), cuda.Out(iout), block=(threads, 1, 1), grid=(blocks, 1),
      shared=threads * 8)
    assert np.isnan(out).all()
    assert (iout == np.iinfo(np.int32).max).all()
