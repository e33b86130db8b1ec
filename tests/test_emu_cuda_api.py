"""Every name of the emulator's public CUDA device API (tilelab.emu.cuda_api) compiles and
runs in a kernel on the emulator: one use of each, all in one kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu import cuda_api

_UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
          "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p",
          "logb", "ilogb", "sqrt", "rsqrt", "cbrt", "fabs", "floor", "ceil", "trunc", "round",
          "rint", "nearbyint", "lround", "llround", "lrint", "llrint", "erf", "erfc", "lgamma",
          "tgamma", "j0", "j1", "y0", "y1", "sinpi", "cospi", "rcbrt", "normcdf", "normcdfinv",
          "erfinv", "erfcinv", "erfcx", "cyl_bessel_i0", "cyl_bessel_i1")
_BINARY = ("atan2", "pow", "hypot", "fmin", "fmax", "fdim", "fmod", "remainder", "copysign",
           "nextafter", "rhypot")
_SPECIAL = {
    "fma": "{f}(x, y, 0.5{s})", "remquo": "{f}(x, y, &q)", "modf": "{f}(x, &{v}ip)",
    "frexp": "{f}(x, &q)", "ldexp": "{f}(x, 2)", "scalbn": "{f}(x, 2)", "scalbln": "{f}(x, 2L)",
    "sincos": "({f}(x, &{v}s, &{v}c), {v}s + {v}c)", "jn": "{f}(2, x)", "yn": "{f}(2, x)",
    "nan": '{f}("")', "sincospi": "({f}(x, &{v}s, &{v}c), {v}s + {v}c)",
    "norm3d": "{f}(x, y, x)", "rnorm3d": "{f}(x, y, x)", "norm4d": "{f}(x, y, x, y)",
    "rnorm4d": "{f}(x, y, x, y)", "norm": "{f}(3, {v}arr)", "rnorm": "{f}(3, {v}arr)",
}


def _math_uses() -> dict[str, str]:
    uses = {}
    for base in _UNARY + _BINARY + tuple(_SPECIAL):
        for name, s, v, t in ((base, "", "d", "double"), (base + "f", "f", "f", "float")):
            expr = _SPECIAL.get(base, "{f}(x)" if base in _UNARY else "{f}(x, y)")
            expr = expr.format(f=name, s=s, v=v)
            uses[name] = f"{{ {t} x = ({t})(0.25f + lane / 64.0f), y = ({t})1.5; " \
                         f"acc += (float)({expr}); }}"
    return uses


_F2 = "(xf, 1.5f)"
_D2 = "((double)xf, 1.5)"
_ROUNDED_ARGS = {
    "fadd": _F2, "fsub": _F2, "fmul": _F2, "fdiv": _F2, "frcp": "(xf)", "fsqrt": "(xf)",
    "fmaf": "(xf, 1.5f, 0.5f)", "dadd": _D2, "dsub": _D2, "dmul": _D2, "ddiv": _D2,
    "drcp": "((double)xf)", "dsqrt": "((double)xf)", "fma": "((double)xf, 1.5, 0.5)",
    "float2int": "(xf * 10)", "float2uint": "(xf * 10)", "float2ll": "(xf * 10)",
    "float2ull": "(xf * 10)", "double2int": "(xf * 10.0)", "double2uint": "(xf * 10.0)",
    "double2ll": "(xf * 10.0)", "double2ull": "(xf * 10.0)", "int2float": "(lane)",
    "uint2float": "((unsigned)lane)", "ll2float": "((long long)lane)",
    "ull2float": "((unsigned long long)lane)", "ll2double": "((long long)lane)",
    "ull2double": "((unsigned long long)lane)", "double2float": "((double)xf)",
}
_UNARY_SIMD = ("vabs", "vabsss", "vneg", "vnegss")
_INT3 = "(0x12345678u + lane, 0x9abcdef0u, 7u)"

USES: dict[str, str] = {
    **_math_uses(),
    **{f"__{op}_{m}": f"acc += (float)__{op}_{m}{args};"
       for op, args in _ROUNDED_ARGS.items() for m in ("rn", "rz", "ru", "rd")},
    **{f"__{v}{n}": f"acc += (float)__{v}{n}(0x12345678u + lane"
       + (");" if v in _UNARY_SIMD else ", 0x9abcdef0u);")
       for v in cuda_api._SIMD for n in (2, 4)},
    **{n: f"acc += (float){n}{_INT3};" for n in ("__byte_perm", "__funnelshift_l",
                                                  "__funnelshift_lc", "__funnelshift_r",
                                                  "__funnelshift_rc", "__dp4a", "__dp2a_lo",
                                                  "__dp2a_hi", "__usad")},
    "__sad": "acc += (float)__sad(lane, -3, 7u);", "__fns": "acc += (float)__fns(0xf0u, 1u, 2);",
    **{n: f"acc += (float){n}(lane, 5);" for n in ("__hadd", "__rhadd", "__uhadd", "__urhadd")},
    "__mul64hi": "acc += (float)__mul64hi(1LL << 40, lane + 5LL);",
    "__umul64hi": "acc += (float)__umul64hi(1ULL << 40, lane + 5ULL);",
    "__brevll": "acc += (float)(__brevll(lane + 5ULL) >> 60);",
    "__int2double_rn": "acc += (float)__int2double_rn(lane);",
    "__uint2double_rn": "acc += (float)__uint2double_rn(7u);",
    "__double2hiint": "acc += (float)__double2hiint(1.0);",
    "__double2loint": "acc += (float)__double2loint(1.0);",
    "__hiloint2double": "acc += (float)__hiloint2double(0x3ff00000, 0);",
    **{n: f"acc += (float){n}(3u, 4u);" for n in ("umin", "umax")},
    **{n: f"acc += (float){n}(3LL, 4LL);" for n in ("llmin", "llmax")},
    **{n: f"acc += (float){n}(3ULL, 4ULL);" for n in ("ullmin", "ullmax")},
    "fdividef": "acc += fdividef(xf, 3.0f);",
    **{n: f"acc += {n}(&in[lane]);" for n in ("__ldcg", "__ldca", "__ldcs", "__ldlu",
                                               "__ldcv")},
    **{n: f"{n}(&spill, xf);" for n in ("__stcg", "__stcs", "__stwb", "__stwt")},
    "__nanosleep": "__nanosleep(100);",
    "isnan": "acc += isnan(xf);", "isinf": "acc += isinf(xf);",
    "isfinite": "acc += isfinite(xf);", "signbit": "acc += signbit(xf);",
    "abs": "acc += abs(-lane);", "labs": "acc += labs(-(long)lane);",
    "llabs": "acc += llabs(-(long long)lane);", "min": "acc += min(lane, 3);",
    "max": "acc += max(xf, 0.5f);",
    **{n: f"acc += {n}(xf);" for n in ("__expf", "__exp10f", "__logf", "__log2f", "__log10f",
                                         "__sinf", "__cosf", "__tanf", "__saturatef")},
    "__powf": "acc += __powf(xf, 2.0f);", "__fdividef": "acc += __fdividef(xf, 3.0f);",
    "__sincosf": "{ float s, c; __sincosf(xf, &s, &c); acc += s + c; }",
    **{n: f"atomicAdd(&cnt_u, 1u); acc += (float){n}(&cnt_u, 1u);"
       for n in cuda_api.ATOMICS if not n.startswith("atomicCAS")},
    **{n: f"acc += (float){n}(&cnt_u, 0u, 1u);"
       for n in ("atomicCAS", "atomicCAS_block", "atomicCAS_system")},
    **{n: f"acc += (float){n}(FULL, xf, 1);"
       for n in ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync")},
    **{n: f"acc += (float){n}(FULL, lane & 1);"
       for n in ("__ballot_sync", "__any_sync", "__all_sync")},
    **{n: f"acc += (float){n}(FULL, lane);"
       for n in ("__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                 "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
                 "__match_any_sync")},
    "__match_all_sync": "{ int p; acc += (float)__match_all_sync(FULL, 7, &p) + p; }",
    "__activemask": "acc += (float)__activemask();", "__syncwarp": "__syncwarp();",
    "__syncthreads": "__syncthreads();",
    **{n: f"acc += {n}(lane & 1);"
       for n in ("__syncthreads_count", "__syncthreads_and", "__syncthreads_or")},
    **{n: f"{n}();" for n in ("__threadfence", "__threadfence_block", "__threadfence_system")},
    "__frsqrt_rn": "acc += __frsqrt_rn(xf);",
    **{n: f"acc += (float){n}(xf * 10.0f);" for n in ("__float_as_int", "__float_as_uint")},
    "__int_as_float": "acc += __int_as_float(0x3f800000);",
    "__uint_as_float": "acc += __uint_as_float(0x3f800000u);",
    "__longlong_as_double": "acc += (float)__longlong_as_double(0x3ff0000000000000LL);",
    "__double_as_longlong": "acc += (float)(__double_as_longlong(1.0) >> 52);",
    **{n: f"acc += (float){n}(lane + 5);"
       for n in ("__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev")},
    **{n: f"acc += (float){n}(lane + 5, 3);"
       for n in ("__mul24", "__umul24", "__mulhi", "__umulhi")},
    "__ldg": "acc += __ldg(&in[lane]);",
    **{f"{t}{n}": f"{{ {t}{n} v = make_{t}{n}({', '.join(['1'] * n)}); acc += (float)v.x; }}"
       for t in ("float", "int", "uint", "double", "char", "uchar", "short", "ushort",
                 "longlong", "ulonglong") for n in (1, 2, 3, 4)},
    "dim3": "{ dim3 d(2, 3); acc += d.x * d.y * d.z; }",
    "printf": 'if (lane == 0 && blockIdx.x == 0) printf("api %d\\n", warpSize);',
    "assert": "assert(lane < 64);", "__trap": "if (lane > 1000) __trap();",
    "__brkpt": "if (lane > 1000) __brkpt();", "clock": "acc += (clock() >= 0) ? 0.f : 1.f;",
    "clock64": "acc += (clock64() > 0) ? 0.f : 1.f;",
}

# The frame around the uses: it names the built-in variables, the qualifiers and
# cooperative_groups.
FRAME = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
#include <cooperative_groups/memcpy_async.h>
#define FULL 0xffffffffu
__constant__ float scale[2];
__device__ unsigned int cnt_u;
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
__device__ __noinline__ float thrice(float v) { return 3.0f * v; }
__host__ __device__ __inline__ float once(float v) { return v; }
extern "C" __global__ void __launch_bounds__(64) api(float* __restrict__ out, const float* in)
{
    __shared__ __align__(16) float tile[64];
    int lane = threadIdx.x + blockIdx.x * blockDim.x * gridDim.x + warpSize * 0;
    float xf = in[lane] + scale[0];
    float acc = once(twice(thrice(xf))) * 0.0f, fip, fs, fc;
    double dip, ds, dc;
    int q;
    float spill, farr[3] = {1.f, 2.f, 3.f};
    double darr[3] = {1.0, 2.0, 3.0};
    {
        namespace cg = cooperative_groups;
        cg::thread_block block = cg::this_thread_block();
        cg::thread_group any_group = block;
        cg::thread_block_tile<32> t32 = cg::tiled_partition<32>(block);
        auto t8 = cg::tiled_partition<8>(t32);
        cg::thread_group dyn = cg::tiled_partition(block, 4);
        block.sync();
        cg::sync(t8);
        any_group.sync();
        dyn.sync();
        acc += block.thread_rank() + block.num_threads() + block.size() + block.group_index().x
             + block.thread_index().x + block.group_dim().x + block.dim_threads().x
             + cg::thread_rank(t8) + cg::num_threads(t8) + cg::group_size(t8);
        acc += t8.meta_group_rank() + t8.meta_group_size() + t8.shfl(xf, 1) + t8.shfl_up(xf, 1)
             + t8.shfl_down(xf, 1) + t8.shfl_xor(xf, 1) + t8.any(lane & 1) + t8.all(lane & 1)
             + t8.ballot(lane & 1) + t8.match_any(lane & 3);
        int same;
        acc += t8.match_all(7, same) + same;
        acc += cg::reduce(t32, lane, cg::plus<int>()) + cg::reduce(t8, lane, cg::less<int>())
             + cg::reduce(t8, lane, cg::greater<int>()) + cg::reduce(t8, lane, cg::bit_and<int>())
             + cg::reduce(t8, lane, cg::bit_or<int>()) + cg::reduce(t8, lane, cg::bit_xor<int>())
             + cg::inclusive_scan(t8, lane) + cg::exclusive_scan(t8, lane);
        __shared__ float staged[64];
        cg::memcpy_async(block, staged, in, sizeof(float) * 64);
        cg::wait(block);
        cg::wait_prior<0>(block);
        acc += staged[lane] * 0.0f;
        if (lane & 1) {
            cg::coalesced_group odd = cg::coalesced_threads();
            acc += odd.thread_rank() * 0.0f;
        }
        __syncthreads();
    }
    tile[threadIdx.x] = xf;
    __syncthreads();
    acc += tile[63 - threadIdx.x] * 0.0f;
USES
    out[lane] = isnan(acc) ? -1.0f : 1.0f + 0.0f * acc;
}
"""


def test_every_name_has_a_use_here():
    frame_names = {n for n in cuda_api.NAMES if re.search(rf"(?<!\w){n}(?!\w)", FRAME)}
    typed = {f"make_{t}" for t in USES if f"make_{t}" in cuda_api.TYPES}
    assert set(USES) | frame_names | typed == cuda_api.NAMES
    assert not set(USES) - cuda_api.NAMES


def test_the_categories_are_public_names():
    for name in cuda_api.NAMES:
        assert re.fullmatch(r"[A-Za-z_]\w*", name), name
        assert not name.startswith(("tilelab", "tl_")), name
    assert frozenset().union(
        cuda_api.BUILTIN_VARIABLES, cuda_api.QUALIFIERS, cuda_api.TYPES, cuda_api.MATH,
        cuda_api.ATOMICS, cuda_api.WARP, cuda_api.INTRINSICS, cuda_api.COOPERATIVE_GROUPS,
        cuda_api.DEBUG) == cuda_api.NAMES


@pytest.mark.slow
def test_every_name_compiles_and_runs_on_the_emulator(capfd):
    src = FRAME.replace("USES", "\n".join("    " + u for u in USES.values()))
    mod = emu.SourceModule(src, no_extern_c=True)  # cooperative_groups: as nvcc needs
    x = np.linspace(0.1, 0.9, 64).astype(np.float32)
    out = np.zeros(64, np.float32)
    mod.get_function("api")(emu.Out(out), emu.In(x), block=(64, 1, 1), grid=(1, 1))
    assert set(np.unique(out)) <= {1.0, -1.0}  # every thread ran to its end
    assert "api 32" in capfd.readouterr().out
