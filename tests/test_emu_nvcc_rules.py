"""The emulator accepts what nvcc accepts and refuses what it refuses, with nvcc's reason at
the learner's line: initialisers on __shared__ variables, warp intrinsics given operand
types CUDA declares no overload for, templated kernels with __launch_bounds__, rows of
shared arrays passed to templates, both forms of cooperative_groups::memcpy_async, the
asynchronous-copy headers, and printf's 1 MiB limit.

Each answer is nvcc's (CUDA 13.0, -arch=sm_90, checked by compiling the same source) or the
CUDA C++ Programming Guide's."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu.report import PRINTF_CUT

FULL = "0xffffffffu"


# ---- __shared__ initialisers --------------------------------------------------------------
@pytest.mark.parametrize("decl, name", [
    ("__shared__ float s = 1.0f;", "s"), ("__shared__ int a[4] = {1, 2, 3, 4};", "a"),
    ("__shared__ float s{};", "s"), ("static __shared__ int s = 0;", "s"),
    ("__shared__ float2 s = make_float2(0.0f, 0.0f);", "s"), ("__shared__ double s(2.0);", "s"),
    ("__shared__ float a[2], b = 3;", "b"), ("__shared__ int z[] = {1, 2};", "z"),
])
def test_an_initializer_on_a_shared_variable_is_refused_as_nvcc_refuses_it(decl, name):
    src = f"__global__ void k(float* out)\n{{\n  {decl}\n  out[0] = 1;\n}}\n"
    with pytest.raises(emu.CompileError) as exc:
        emu.SourceModule(src)
    assert exc.value.lines == (3,)
    assert f'kernel.cu(3): error: initializer not allowed for __shared__ variable "{name}"' \
        in exc.value.msg and "__syncthreads()" in exc.value.msg


def test_a_shared_variable_at_file_scope_with_an_initializer_is_refused_too():
    with pytest.raises(emu.CompileError, match=r"kernel\.cu\(1\).*initializer not allowed"):
        emu.SourceModule("__shared__ float g = 2.0f;\n__global__ void k(float* o) { o[0] = g; }")


def test_shared_declarations_without_an_initializer_compile_and_run():
    src = """__global__ void k(float* out)
{
  __shared__ float s; static __shared__ int t; __shared__ volatile int v;
  __shared__ __align__(16) float2 p; __shared__ alignas(16) float q[4];
  __shared__ float buf[4 * (2 + 1)] __attribute__((aligned(16)));
  if (threadIdx.x == 0) { s = 5; t = 2; v = 3; p.x = 1; buf[11] = 4; q[1] = 0; }
  __syncthreads();
  out[threadIdx.x] = s + t + v + p.x + buf[11] + q[1];
}
"""
    out = np.zeros(32, np.float32)
    emu.SourceModule(src).get_function("k")(emu.Out(out), block=(32, 1, 1))
    assert (out == 15).all()


# ---- warp intrinsics: CUDA's overloads ----------------------------------------------------
#: (intrinsic, operand type): what nvcc does with it, from the Programming Guide's signatures
#: (shuffles and matches: int, unsigned int, long, unsigned long, long long, unsigned long
#: long, float, double; __reduce_add/min/max_sync: int, unsigned; __reduce_and/or/xor_sync:
#: unsigned) and C++'s overload resolution, as nvcc 13.0 was seen to do it
TWO = "more than one instance"
REFUSED = [
    ("__reduce_add_sync", "float", TWO), ("__reduce_min_sync", "double", TWO),
    ("__reduce_max_sync", "long long", TWO), ("__reduce_add_sync", "unsigned long long", TWO),
    ("__reduce_and_sync", "float2", "no instance"), ("__shfl_sync", "float2", "no instance"),
    ("__shfl_down_sync", "int2", "no instance"), ("__shfl_xor_sync", "float4", "no instance"),
    ("__match_any_sync", "float2", "no instance"),
]


def test_warp_intrinsics_refuse_the_operand_types_nvcc_refuses():
    """Every refusal at its own line, with nvcc's words, the types each takes and a fix."""
    body = []
    for i, (fn, t, _) in enumerate(REFUSED):
        extra = ", 1" if "shfl" in fn else ""
        value = f"make_{t}(1, 2{', 3, 4' if t.endswith('4') else ''})" if t[-1] in "24" \
            else f"({t})threadIdx.x"
        body.append(f"  {{ auto r = {fn}({FULL}, {value}{extra}); (void)r; }}  // {i}")
    src = "__global__ void k(int* o)\n{\n" + "\n".join(body) + "\n}\n"
    with pytest.raises(emu.CompileError) as exc:
        emu.SourceModule(src)
    msg = exc.value.msg
    assert exc.value.lines == tuple(range(3, 3 + len(REFUSED)))
    for i, (fn, t, kind) in enumerate(REFUSED):
        said = next(ln for ln in msg.splitlines() if ln.startswith(f"kernel.cu({3 + i})"))
        assert f'{kind} of overloaded function "{fn}" matches the argument list' in said
        assert t in said and "CUDA declares" in said and "only;" in said


def test_warp_intrinsics_take_what_nvcc_takes_and_return_its_types():
    """Narrow integers are promoted to int (the shuffle returns an int), a float given to
    __reduce_and_sync becomes its one unsigned, a double is matched by its bits."""
    src = f"""__global__ void k(int* o, const int* x)
{{
  int i = threadIdx.x, v = x[i];
  auto a = __shfl_sync({FULL}, (short)v, 3);
  auto b = __shfl_down_sync({FULL}, (unsigned char)v, 1);
  o[i] = a * 1000 + b + (sizeof(a) == 4 && sizeof(b) == 4 ? 0 : 1000000);
  o[32 + i] = (int)__reduce_and_sync({FULL}, 7.9f) + __reduce_add_sync({FULL}, (bool)(v & 1));
  o[64 + i] = (int)__match_any_sync({FULL}, (double)(v & 3)) + __reduce_min_sync({FULL}, (char)v);
  int p = 0;
  o[96 + i] = (int)__match_all_sync({FULL}, 2.5, &p) + p
              + (int)__reduce_max_sync({FULL}, (unsigned)v);
}}
"""
    x = np.arange(-5, 27, dtype=np.int32)
    o = np.zeros(128, np.int32)
    emu.SourceModule(src).get_function("k")(emu.Out(o), emu.In(x), block=(32, 1, 1))
    lane = np.arange(32)
    down = np.where(lane < 31, np.roll(x, -1), x).astype(np.uint8).astype(np.int64)
    assert (o[:32] == x[3] * 1000 + down).all()
    assert (o[32:64] == 7 + (x & 1).sum()).all()
    match = np.array([sum(1 << j for j in range(32) if (x[j] & 3) == (x[i] & 3))
                      for i in range(32)], np.uint32).view(np.int32)
    assert (o[64:96] == match + x.min()).all()
    assert (o[96:] == -1 + 1 + x.astype(np.uint32).max().astype(np.int64) - 2**32).all()


# ---- templates ----------------------------------------------------------------------------
@pytest.mark.parametrize("head, bound", [
    ("template <typename T, int N>\n__global__ void __launch_bounds__(N) k", 64),
    ("template <typename T, int N>\n__launch_bounds__(N * 2, 2) __global__ void k", 128),
    ("template <typename T, int N>\n__global__ __launch_bounds__(N) void k", 64),
])
def test_a_templated_kernel_with_launch_bounds_is_found_and_bounded(head, bound):
    src = (f"{head}(const T* x, T* out)\n{{\n  int i = blockIdx.x * N + threadIdx.x;\n"
           "  out[i] = x[i] * (T)3 + (T)N;\n}\n"
           "template __global__ void k<float, 64>(const float*, float*);\n")
    mod = emu.SourceModule(src, no_extern_c=True)
    assert mod.kernel_names == ["_Z1kIfLi64EEvPKT_PS0_"]  # nvcc's mangled name
    f = mod.get_function("_Z1kIfLi64EEvPKT_PS0_")
    assert f.launch_bound() == bound
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    f(emu.In(x), emu.Out(out), block=(64, 1, 1), grid=(2, 1))
    assert (out == x * 3 + 64).all()
    with pytest.raises(emu.LogicError, match="invalid argument"):  # as PyCUDA's on a GPU
        f(emu.In(x), emu.Out(out), block=(bound * 2, 1, 1))


def test_a_launch_bound_written_with_macros_is_read_with_their_values():
    src = "#define BS2 (BS * 2)\n__global__ void __launch_bounds__(BS2) k(float* o) { o[0] = 1; }"
    f = emu.SourceModule(src, options=["-DBS=64"]).get_function("k")
    assert f.launch_bound() == 128
    with pytest.raises(emu.LogicError, match=r"__launch_bounds__\(128\)"):
        f(emu.Out(np.zeros(1, np.float32)), block=(256, 1, 1))


_ROWS = """template <class T>
__device__ T rsum(const T* row, int n)
{ T s = 0; for (int k = 0; k < n; ++k) s += row[k]; return s; }
template <class T, int M>
__device__ T rsum2(const T (&row)[M], int n)
{ T s = 0; for (int k = 0; k < M && k < n; ++k) s += row[k]; return s; }
__device__ float second(float* p) { return p[1]; }
extern "C" __global__ void k(const float* x, float* out, int r)
{
  __shared__ float buf[4][32];
  __shared__ float cube[2][4][8];
  for (int j = threadIdx.x; j < 128; j += blockDim.x) {
    buf[j / 32][j % 32] = x[j];
    if (j < 64) cube[j / 32][(j / 8) % 4][j % 8] = x[j];
  }
  __syncthreads();
  int t = threadIdx.x;
  if (t < 4) out[t] = rsum(buf[t], 32) + 1000 * rsum2(buf[t], 32);
  if (t < 2) out[4 + t] = second(cube[t][1]) + rsum(cube [t] [2], 8);
  if (threadIdx.x == 6) out[6] = second(buf[r]) + sizeof(buf[0]);
}
"""


@pytest.mark.parametrize("analysis", [False, True])
def test_a_row_of_a_shared_array_passes_to_templates_as_a_row(analysis):
    mod = emu.SourceModule(_ROWS, no_extern_c=True, analysis=analysis)
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(7, np.float32)
    mod.get_function("k")(emu.In(x), emu.Out(out), np.int32(3), block=(32, 1, 1))
    b, c = x.reshape(4, 32), x[:64].reshape(2, 4, 8)
    want = [*(b[i].sum() * 1001 for i in range(4)), *(c[i, 1, 1] + c[i, 2].sum() for i in (0, 1)),
            b[3, 1] + 128]
    assert out.tolist() == want


def test_the_index_of_a_row_is_still_checked():
    mod = emu.SourceModule(_ROWS, no_extern_c=True)
    line = next(i for i, ln in enumerate(_ROWS.splitlines(), 1) if "buf[r]" in ln)
    with pytest.raises(emu.OutOfBoundsAccess, match=rf"line {line}: index 4 in dimension 1 of buf"):
        mod.get_function("k")(emu.In(np.zeros(128, np.float32)), emu.Out(np.zeros(7, np.float32)),
                              np.int32(4), block=(32, 1, 1))


@pytest.mark.parametrize("copy, copied", [
    ("cg::memcpy_async(block, buf[s], x + 64 * s, sizeof(float) * 64);", 64),
    ("cg::memcpy_async(block, buf[s], 64, x + 64 * s, 64);", 64),
    ("cg::memcpy_async(block, buf[s], 64, x + 64 * s, 40);", 40),  # min(dst, src) elements
    ("cg::memcpy_async(block, &buf[s][0], (size_t)64, x + 64 * s, 64u);", 64),
])
def test_both_forms_of_memcpy_async_copy_into_rows_of_a_shared_array(copy, copied):
    src = ("#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n"
           "namespace cg = cooperative_groups;\n"
           'extern "C" __global__ void k(const float* x, float* out)\n{\n'
           "  cg::thread_block block = cg::this_thread_block();\n"
           "  __shared__ __align__(16) float buf[2][64];\n"
           f"  for (int s = 0; s < 2; ++s) {copy}\n  cg::wait(block);\n"
           "  for (int j = threadIdx.x; j < 128; j += blockDim.x) out[j] = buf[j / 64][j % 64];\n"
           "}\n")
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    emu.SourceModule(src, no_extern_c=True).get_function("k")(emu.In(x), emu.Out(out),
                                                              block=(64, 1, 1))
    got = out.reshape(2, 64)
    assert (got[:, :copied] == x.reshape(2, 64)[:, :copied]).all()
    assert np.isnan(got[:, copied:]).all()  # never written: the emulator's poison


@pytest.mark.parametrize("header", ["cuda_pipeline.h", "cuda/pipeline", "cuda/barrier"])
def test_the_asynchronous_copy_headers_are_refused_with_what_to_write_instead(header):
    with pytest.raises(emu.CompileError) as exc:
        emu.SourceModule(f"#include <{header}>\n__global__ void k(float* o) {{ o[0] = 1; }}\n")
    msg = exc.value.msg
    assert exc.value.lines == (1,) and f"<{header}>" in msg
    loop = re.search(r"for \(int i = threadIdx\.x; i < n; i \+= blockDim\.x\) tile\[i\] = "
                     r"src\[i\]; __syncthreads\(\);", msg)
    assert loop and "cooperative_groups::memcpy_async(block, tile, src, bytes)" in msg
    # the advice compiles and runs
    src = ("__global__ void k(const float* src, float* out, int n)\n{\n"
           f"  __shared__ float tile[256];\n  {loop.group()}\n"
           "  out[threadIdx.x] = tile[n - 1 - threadIdx.x];\n}\n")
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    emu.SourceModule(src).get_function("k")(emu.In(x), emu.Out(out), np.int32(256),
                                            block=(256, 1, 1))
    assert (out == x[::-1]).all()


# ---- printf ---------------------------------------------------------------------------------
def test_printf_output_cut_at_one_mebibyte_says_so(capsys):
    """A GPU's printf buffer holds 1 MiB by default (cudaLimitPrintfFifoSize) and drops the
    rest of a launch's output; the emulator cuts its own there and says so."""
    src = ('__global__ void k(int* o)\n{\n  for (int r = 0; r < 8; ++r) printf("block %d thread '
           '%d row %d\\n", blockIdx.x, threadIdx.x, r);\n  o[0] = 1;\n}\n')
    f = emu.SourceModule(src).get_function("k")
    f(emu.Out(np.zeros(1, np.int32)), block=(256, 1, 1), grid=(32, 1))  # about 2 MiB
    report = f.last_report
    assert report.stdout_truncated and len(report.stdout.encode()) <= 1 << 20
    assert report.printf_note == PRINTF_CUT and "1 MiB" in PRINTF_CUT
    assert capsys.readouterr().out.rstrip().endswith(PRINTF_CUT)
    f(emu.Out(np.zeros(1, np.int32)), block=(4, 1, 1))
    assert f.last_report.printf_note == ""


# ---- the graded subset ------------------------------------------------------------------------
def test_the_graded_subset_takes_what_the_emulator_now_takes():
    """``tilelab check`` and a class grade read the source with the same allow-list: the
    forms above are in it (the intrinsics are CUDA's device API)."""
    from tilelab.grading.subset import check_subset

    templated = ("template <typename T, int N>\n__global__ void __launch_bounds__(N) k(const T* x, "
                 "T* out)\n{ out[threadIdx.x] = x[threadIdx.x] * (T)N; }\n"
                 "template __global__ void k<float, 64>(const float*, float*);\n")
    fast = ("__global__ void k(const float* x, float* out)\n{\n  int i = threadIdx.x;\n"
            "  out[i] = __sinf(x[i]) + __expf(x[i]) + __fdividef(x[i], 3.0f) + __powf(x[i], 2.0f)"
            f"\n    + __shfl_sync({FULL}, x[i], 1) + __reduce_add_sync({FULL}, i);\n}}\n")
    for src in (templated, _ROWS, fast):
        check_subset(src)
