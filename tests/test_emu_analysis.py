"""Analysis mode finds shared-memory races and measures bank conflicts like the hardware."""

from __future__ import annotations

import numpy as np
import pytest
from support.emu_samples import TILED_MATMUL, line_of, without_barrier

import tilelab.emu as cuda


def _analyse_tiled(source: str, rng, n: int = 32) -> cuda.AnalysisReport:
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    return cuda.analyze(source, "matmul_tiled", cuda.In(A), cuda.In(B), cuda.Out(C),
                        np.int32(n), np.int32(n), np.int32(n), block=(16, 16, 1),
                        grid=(n // 16, n // 16))


def test_tiled_matmul_with_both_barriers_has_no_race(rng):
    report = _analyse_tiled(TILED_MATMUL, rng)
    assert not report.has_races and report.races == []
    use = line_of(TILED_MATMUL, "use the tiles")
    assert report.line(use, "As").count > 0
    assert report.average_degree == pytest.approx(1.0)
    assert "Races: none found." in report.summary()


@pytest.mark.parametrize("which", [1, 2])
def test_tiled_matmul_missing_barrier_has_race(rng, which):
    source = without_barrier(TILED_MATMUL, which)
    report = _analyse_tiled(source, rng)
    assert report.has_races
    store = {"As": line_of(source, "store A tile"), "Bs": line_of(source, "store B tile")}
    use = line_of(source, "use the tiles")
    arrays = {r.array for r in report.races}
    assert arrays == {"As", "Bs"}
    for race in report.races:
        assert sorted(race.lines) == sorted([store[race.array], use])
        assert set(race.kinds) == {"read", "write"}
        assert race.threads[0] != race.threads[1]
        assert len(race.index) == 2 and all(0 <= i < 16 for i in race.index)
        assert race.count >= 1
    text = report.summary()
    assert "RACES" in text and f"line {use}" in text


BANKS = r"""
__global__ void column(float* out)      // a warp walks down a column of [32][32]
{
    __shared__ float s[32][32];
    int t = threadIdx.x;
    for (int j = 0; j < 32; ++j) s[t][j] = t + j;
    __syncthreads();
    out[t] = s[t][0];                                         // COLUMN
}

__global__ void column_padded(float* out)
{
    __shared__ float p[32][33];
    int t = threadIdx.x;
    for (int j = 0; j < 32; ++j) p[t][j] = t + j;
    __syncthreads();
    out[t] = p[t][0];                                         // PADDED
}

__global__ void strided(float* out)
{
    __shared__ float q[64];
    int t = threadIdx.x;
    q[t] = t; q[t + 32] = t;
    __syncthreads();
    out[t] = q[2 * t];                                        // STRIDE2
}

__global__ void broadcast(float* out)
{
    __shared__ float b[32];
    int t = threadIdx.x;
    b[t] = t;
    __syncthreads();
    out[t] = b[0];                                            // BROADCAST
}

__global__ void vectors(float* out)
{
    __shared__ float4 v[32];
    int t = threadIdx.x;
    v[t] = make_float4(t, t, t, t);
    __syncthreads();
    float4 r = v[t];                                          // FLOAT4
    out[t] = r.x + r.w;
}

__global__ void reduce_racy(const float* x, float* out)
{
    extern __shared__ float buf[];
    unsigned t = threadIdx.x;
    buf[t] = x[t];
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];                     // REDUCE (no barrier in the loop)
    }
    if (t == 0) out[0] = buf[0];
}
"""


@pytest.fixture(scope="module")
def banks():
    return cuda.SourceModule(BANKS, analysis=True)


@pytest.mark.parametrize(("kernel", "marker", "array", "degree"), [
    ("column", "COLUMN", "s", 32),
    ("column_padded", "PADDED", "p", 1),
    ("strided", "STRIDE2", "q", 2),
    ("broadcast", "BROADCAST", "b", 1),
    ("vectors", "FLOAT4", "v", 1),
])
def test_bank_conflict_degree(banks, kernel, marker, array, degree):
    f = banks.get_function(kernel)
    out = np.zeros(32, np.float32)
    f(cuda.Out(out), block=(32, 1, 1))
    report = f.last_report.analysis
    line = report.line(line_of(BANKS, marker), array, "read")
    assert (line.count, line.max_degree) == (1, degree)
    assert line.avg_degree == degree
    assert not report.has_races
    assert not np.isnan(out).any()  # the kernel still wrote all its results


def test_bank_report_summary_and_dict(banks):
    f = banks.get_function("column")
    f(cuda.Out(np.zeros(32, np.float32)), block=(32, 1, 1))
    report = f.last_report.analysis
    store = report.line(line_of(BANKS, "s[t][j] = t + j"), "s", "write")
    assert (store.count, store.max_degree) == (32, 32)  # the store loop conflicts too
    assert report.average_degree == pytest.approx(32.0)
    d = report.to_dict()
    assert d["kernel"] == "column" and len(d["bank_lines"]) == 2 and d["races"] == []
    assert "avg degree" in report.summary()


def test_dynamic_shared_race(banks):
    f = banks.get_function("reduce_racy")
    x = np.ones(64, np.float32)
    f(cuda.In(x), cuda.Out(np.zeros(1, np.float32)), block=(64, 1, 1), shared=64 * 4)
    races = f.last_report.analysis.races
    line = line_of(BANKS, "REDUCE")
    assert races and all(r.array == "buf" and r.lines == (line, line) for r in races)
    assert all(r.threads[0] != r.threads[1] for r in races)


def test_shared_index_out_of_range_in_analysis_mode(banks):
    src = "__global__ void k(float* o) { __shared__ float s[8]; s[threadIdx.x] = 1; o[0] = 0; }"
    f = cuda.SourceModule(src, analysis=True).get_function("k")
    with pytest.raises(cuda.OutOfBoundsAccess, match=r"index 8 in dimension 1 of s") as info:
        f(cuda.Out(np.zeros(1, np.float32)), block=(16, 1, 1))
    assert info.value.buffer == "s" and info.value.thread == (8, 0, 0)


ATOMICS = r"""
__global__ void exch(const float* x, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    atomicExch(&total, total + x[threadIdx.x]);              // READ_THEN_EXCH
    __syncthreads();
    if (threadIdx.x == 0) out[0] = total;
}
__global__ void adds(const float* x, float* out) {
    __shared__ float total;
    __shared__ unsigned bins[4];
    if (threadIdx.x < 4) bins[threadIdx.x] = 0u;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    atomicAdd(&total, x[threadIdx.x]);
    atomicInc(&bins[threadIdx.x % 4], 1000u);
    __syncthreads();
    if (threadIdx.x == 0) out[0] = total + bins[1];
}
__global__ void store_beside(const float* x, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;                      // PLAIN_STORE
    atomicAdd(&total, x[threadIdx.x]);                       // ATOMIC_ADD
    __syncthreads();
    if (threadIdx.x == 0) out[0] = total;
}
"""


@pytest.mark.parametrize(("kernel", "plain", "atomic"), [
    ("exch", "READ_THEN_EXCH", "READ_THEN_EXCH"),  # atomicExch(&t, t + v): t read plainly
    ("store_beside", "PLAIN_STORE", "ATOMIC_ADD"),  # a plain store in the atomics' interval
    ("adds", None, None),  # atomics alone, ordered from the plain stores: no race
])
def test_a_plain_access_beside_another_threads_atomic_is_a_race(kernel, plain, atomic):
    """An atomic is a write to the race analysis: a plain read or write of its word by
    another thread in the same barrier interval races with it (on a GPU the update is lost);
    atomics among themselves do not."""
    f = cuda.SourceModule(ATOMICS, analysis=True).get_function(kernel)
    f(cuda.In(np.ones(64, np.float32)), cuda.Out(np.zeros(1, np.float32)), block=(64, 1, 1))
    races = f.last_report.analysis.races
    if plain is None:
        assert races == []
        return
    assert races and all(r.array == "total" for r in races)
    lines = {line_of(ATOMICS, plain), line_of(ATOMICS, atomic)}
    assert any(set(r.lines) == lines and "atomic write" in r.kinds
               and set(r.kinds) <= {"read", "write", "atomic write"} for r in races)
    assert "one atomic" in races[0].fix


GLOBALS = r"""
__device__ float scratch[64];
__global__ void rmw(const float* x, float* sums) {
    if (threadIdx.x == 0) sums[blockIdx.x] = 0.0f;
    __syncthreads();
    sums[blockIdx.x] += x[blockIdx.x * blockDim.x + threadIdx.x];   // RMW
}
__global__ void shared_scratch(const float* x, float* sums) {
    scratch[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];   // SCRATCH_STORE
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < 64; ++i) s += scratch[i];                  // SCRATCH_READ
        sums[blockIdx.x] = s;
    }
}
__global__ void sound(const float* x, float* sums, float* total, float* twice) {
    __shared__ float part[64];
    part[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < 64; ++i) s += part[i];
        sums[blockIdx.x] = s;                      // one writer per word
    }
    __syncthreads();
    part[threadIdx.x] = sums[blockIdx.x];          // read after the barrier: ordered
    atomicAdd(total, x[blockIdx.x * blockDim.x + threadIdx.x]);  // atomics of every block
    twice[threadIdx.x % 8] = 1.0f;                 // the same value written twice: no harm
}
"""


def _globals(kernel: str, *extra: np.ndarray):
    f = cuda.SourceModule(GLOBALS, analysis=True).get_function(kernel)
    x = np.ones(4 * 64, np.float32)
    f(cuda.In(x), cuda.Out(np.zeros(4, np.float32)), *(cuda.InOut(a) for a in extra),
      block=(64, 1, 1), grid=(4, 1))
    return f.last_report.analysis.races


def test_threads_of_a_block_updating_one_global_word_race():
    """sums[b] += x by every thread: the emulator runs them in turn and the sum comes out
    right, but on a GPU the updates are lost; the read and the write of one word by two
    threads in one barrier interval race, in global memory as in shared memory."""
    races = _globals("rmw")
    line = line_of(GLOBALS, "RMW")
    assert races and all(r.memory == "global" and r.array == "sums" for r in races)
    assert any(r.lines == (line, line) and set(r.kinds) == {"read", "write"}
               and r.other_block is None for r in races)
    assert "atomic" in races[0].fix


def test_two_blocks_sharing_a_device_array_race():
    """A __device__ array used as each block's scratch: blocks run one at a time on the
    emulator (right results), at the same time on a GPU; a word one block writes and
    another reads races, whenever the two ran."""
    races = _globals("shared_scratch")
    assert races and all(r.array == "scratch" for r in races)
    lines = {line_of(GLOBALS, "SCRATCH_STORE"), line_of(GLOBALS, "SCRATCH_READ")}
    two = [r for r in races if r.other_block is not None]
    assert two and any(set(r.lines) <= lines for r in two)
    assert all(r.other_block != r.block for r in two)
    assert "memory of its own" in races[0].fix


def test_ordered_global_accesses_atomics_and_a_value_written_twice_are_no_race():
    races = _globals("sound", np.zeros(1, np.float32), np.zeros(8, np.float32))
    assert races == []


BYTES_AND_CAS = r"""
__device__ float cas_add(float* address, float v) {
    int* a = (int*)address;
    int old = *a, assumed;                                          // SEED
    do {
        assumed = old;
        old = atomicCAS(a, assumed, __float_as_int(v + __int_as_float(assumed)));
    } while (assumed != old);
    return __int_as_float(old);
}
__global__ void own_bytes(const float* x, float* out) {
    __shared__ bool valid[64];
    valid[threadIdx.x] = x[threadIdx.x] > 0.0f;                     // each its own byte
    out[threadIdx.x] = valid[threadIdx.x] ? 1.0f : 0.0f;
}
__global__ void neighbours_byte(const float* x, float* out) {
    __shared__ char flag[64];
    flag[threadIdx.x] = 1;                                          // FLAG_STORE
    out[threadIdx.x] = flag[(threadIdx.x + 1) % 64];                // FLAG_READ
}
__global__ void cas_loops(const float* x, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    cas_add(&total, x[threadIdx.x]);
    cas_add(&out[1], x[threadIdx.x]);                               // in global memory too
    __syncthreads();
    if (threadIdx.x == 0) out[0] = total;
}
__global__ void store_beside_cas(const float* x, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;                             // PLAIN_STORE
    cas_add(&total, x[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) out[0] = total;
}
"""


@pytest.mark.parametrize(("kernel", "lines"), [
    ("own_bytes", None),  # bytes of one word, each thread its own: a GPU's memory is bytes
    ("neighbours_byte", ("FLAG_STORE", "FLAG_READ")),  # one byte, two threads
    ("cas_loops", None),  # the Programming Guide's atomicCAS loop reads its guess plainly
    ("store_beside_cas", ("PLAIN_STORE", "SEED")),  # a plain store beside it still races
])
def test_races_are_by_byte_and_a_compare_and_swap_checks_its_plain_guess(kernel, lines):
    f = cuda.SourceModule(BYTES_AND_CAS, analysis=True).get_function(kernel)
    f(cuda.In(np.ones(64, np.float32)), cuda.Out(np.zeros(64, np.float32)), block=(64, 1, 1))
    races = f.last_report.analysis.races
    if lines is None:
        assert races == []
        return
    want = {line_of(BYTES_AND_CAS, m) for m in lines}
    assert races and any(set(r.lines) <= want | {line_of(BYTES_AND_CAS, "atomicCAS(a")}
                         for r in races), races
