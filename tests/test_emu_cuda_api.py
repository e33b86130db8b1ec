"""Every name of the emulator's public CUDA device API (tilelab.emu.cuda_api) compiles and
runs in a kernel on the emulator: one use of each, all in one kernel."""

from __future__ import annotations

import re

import numpy as np

from tilelab import emu
from tilelab.emu import cuda_api

_UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
          "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p",
          "logb", "ilogb", "sqrt", "rsqrt", "cbrt", "fabs", "floor", "ceil", "trunc", "round",
          "rint", "nearbyint", "lround", "llround", "lrint", "llrint", "erf", "erfc", "lgamma",
          "tgamma", "j0", "j1", "y0", "y1")
_BINARY = ("atan2", "pow", "hypot", "fmin", "fmax", "fdim", "fmod", "remainder", "copysign",
           "nextafter")
_SPECIAL = {
    "fma": "{f}(x, y, 0.5{s})", "remquo": "{f}(x, y, &q)", "modf": "{f}(x, &{v}ip)",
    "frexp": "{f}(x, &q)", "ldexp": "{f}(x, 2)", "scalbn": "{f}(x, 2)", "scalbln": "{f}(x, 2L)",
    "sincos": "({f}(x, &{v}s, &{v}c), {v}s + {v}c)", "jn": "{f}(2, x)", "yn": "{f}(2, x)",
    "nan": '{f}("")',
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


USES: dict[str, str] = {
    **_math_uses(),
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
       for n in ("atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicExch", "atomicAnd",
                 "atomicOr", "atomicXor", "atomicInc", "atomicDec", "atomicAdd_block",
                 "atomicAdd_system")},
    "atomicCAS": "acc += (float)atomicCAS(&cnt_u, 0u, 1u);",
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
    **{n: f"acc += {n}(xf, 1.5f);"
       for n in ("__fadd_rn", "__fsub_rn", "__fmul_rn", "__fdiv_rn")},
    "__fmaf_rn": "acc += __fmaf_rn(xf, 1.5f, 0.5f);",
    "__fma_rn": "acc += (float)__fma_rn((double)xf, 1.5, 0.5);",
    **{n: f"acc += {n}(xf);" for n in ("__frcp_rn", "__fsqrt_rn", "__frsqrt_rn")},
    **{n: f"acc += (float){n}(xf * 10.0f);"
       for n in ("__float2int_rn", "__float2int_rz", "__float2int_rd", "__float2int_ru",
                 "__float2uint_rn", "__float_as_int", "__float_as_uint")},
    "__int2float_rn": "acc += __int2float_rn(lane);",
    "__uint2float_rn": "acc += __uint2float_rn(7u);",
    "__double2int_rn": "acc += (float)__double2int_rn(2.5);",
    "__int_as_float": "acc += __int_as_float(0x3f800000);",
    "__uint_as_float": "acc += __uint_as_float(0x3f800000u);",
    "__longlong_as_double": "acc += (float)__longlong_as_double(0x3ff0000000000000LL);",
    "__double_as_longlong": "acc += (float)(__double_as_longlong(1.0) >> 52);",
    **{n: f"acc += (float){n}(lane + 5);"
       for n in ("__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev")},
    **{n: f"acc += (float){n}(lane + 5, 3);"
       for n in ("__mul24", "__umul24", "__mulhi", "__umulhi")},
    "__ldg": "acc += __ldg(&in[lane]);",
    "float2": "{ float2 v = make_float2(xf, 1.f); acc += v.x + v.y; }",
    "float3": "{ float3 v = make_float3(xf, 1.f, 2.f); acc += v.z; }",
    "float4": "{ float4 v = make_float4(xf, 1.f, 2.f, 3.f); acc += v.w; }",
    "int2": "{ int2 v = make_int2(1, 2); acc += v.y; }",
    "int3": "{ int3 v = make_int3(1, 2, 3); acc += v.z; }",
    "int4": "{ int4 v = make_int4(1, 2, 3, 4); acc += v.w; }",
    "uint2": "{ uint2 v = make_uint2(1u, 2u); acc += v.y; }",
    "uint3": "{ uint3 v = make_uint3(1u, 2u, 3u); acc += v.z; }",
    "uint4": "{ uint4 v = make_uint4(1u, 2u, 3u, 4u); acc += v.w; }",
    "double2": "{ double2 v = make_double2(1.0, 2.0); acc += (float)v.y; }",
    "longlong2": "{ longlong2 v = make_longlong2(1, 2); acc += (float)v.y; }",
    "uchar4": "{ uchar4 v = make_uchar4(1, 2, 3, 4); acc += v.w; }",
    "char4": "{ char4 v = make_char4(1, 2, 3, -4); acc += v.w; }",
    "dim3": "{ dim3 d(2, 3); acc += d.x * d.y * d.z; }",
    "printf": 'if (lane == 0 && blockIdx.x == 0) printf("api %d\\n", warpSize);',
    "assert": "assert(lane < 64);", "__trap": "if (lane > 1000) __trap();",
    "__brkpt": "if (lane > 1000) __brkpt();", "clock": "acc += (clock() >= 0) ? 0.f : 1.f;",
    "clock64": "acc += (clock64() > 0) ? 0.f : 1.f;",
}

# The frame around the uses: it names the built-in variables and the qualifiers.
FRAME = r"""
#define FULL 0xffffffffu
__constant__ float scale[2];
__device__ unsigned int cnt_u;
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
__device__ __noinline__ float thrice(float v) { return 3.0f * v; }
__host__ __device__ __inline__ float once(float v) { return v; }
__global__ void __launch_bounds__(64) api(float* __restrict__ out, const float* in)
{
    __shared__ __align__(16) float tile[64];
    int lane = threadIdx.x + blockIdx.x * blockDim.x * gridDim.x + warpSize * 0;
    float xf = in[lane] + scale[0];
    float acc = once(twice(thrice(xf))) * 0.0f, fip, fs, fc;
    double dip, ds, dc;
    int q;
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


def test_every_name_compiles_and_runs_on_the_emulator(capfd):
    src = FRAME.replace("USES", "\n".join("    " + u for u in USES.values()))
    mod = emu.SourceModule(src)
    x = np.linspace(0.1, 0.9, 64).astype(np.float32)
    out = np.zeros(64, np.float32)
    mod.get_function("api")(emu.Out(out), emu.In(x), block=(64, 1, 1), grid=(1, 1))
    assert set(np.unique(out)) <= {1.0, -1.0}  # every thread ran to its end
    assert "api 32" in capfd.readouterr().out
