"""The public CUDA device API the CPU emulator runs: the names a kernel may call or name.

Each category is a frozenset of identifiers as a learner writes them; ``NAMES`` is their
union. Standard C++ (keywords, ``size_t``, ``int32_t``...) is not listed. Every name here
compiles and runs on the emulator (tests/test_emu_cuda_api.py holds one use of each).
"""

from __future__ import annotations

BUILTIN_VARIABLES = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})

# Declaration specifiers and qualifiers of CUDA C.
QUALIFIERS = frozenset({
    "__global__", "__device__", "__host__", "__shared__", "__constant__", "__restrict__",
    "__inline__", "__forceinline__", "__noinline__", "__launch_bounds__", "__align__",
})

_VECTORS = ("float2", "float3", "float4", "int2", "int3", "int4", "uint2", "uint3", "uint4",
            "double2", "longlong2", "uchar4", "char4")
TYPES = frozenset({*_VECTORS, *(f"make_{v}" for v in _VECTORS), "dim3"})

# Math functions (float forms with the f suffix, double forms without) and the fast-math
# intrinsics.
_MATH_PAIRS = (
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "logb",
    "ilogb", "pow", "sqrt", "rsqrt", "cbrt", "hypot", "fabs", "fmin", "fmax", "fdim", "fma",
    "fmod", "remainder", "remquo", "modf", "frexp", "ldexp", "scalbn", "scalbln", "floor",
    "ceil", "trunc", "round", "rint", "nearbyint", "lround", "llround", "lrint", "llrint",
    "copysign", "nextafter", "erf", "erfc", "lgamma", "tgamma", "sincos", "j0", "j1", "y0",
    "y1", "jn", "yn", "nan",
)
MATH = frozenset({
    *_MATH_PAIRS, *(f"{f}f" for f in _MATH_PAIRS),
    "isnan", "isinf", "isfinite", "signbit", "abs", "labs", "llabs", "min", "max",
    "__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
    "__tanf", "__sincosf", "__fdividef", "__saturatef",
})

ATOMICS = frozenset({
    "atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicExch", "atomicAnd", "atomicOr",
    "atomicXor", "atomicInc", "atomicDec", "atomicCAS", "atomicAdd_block", "atomicAdd_system",
})

# Warp-level primitives, block barriers and memory fences.
WARP = frozenset({
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
    "__any_sync", "__all_sync", "__activemask", "__syncwarp", "__reduce_add_sync",
    "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
    "__reduce_xor_sync", "__match_any_sync", "__match_all_sync",
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or",
    "__threadfence", "__threadfence_block", "__threadfence_system",
})

# Intrinsics: rounding-mode arithmetic, conversions, reinterpretations, integer bit tricks,
# loads through the read-only cache.
INTRINSICS = frozenset({
    "__fadd_rn", "__fsub_rn", "__fmul_rn", "__fdiv_rn", "__fmaf_rn", "__fma_rn", "__frcp_rn",
    "__fsqrt_rn", "__frsqrt_rn",
    "__float2int_rn", "__float2int_rz", "__float2int_rd", "__float2int_ru", "__float2uint_rn",
    "__int2float_rn", "__uint2float_rn", "__double2int_rn",
    "__int_as_float", "__float_as_int", "__uint_as_float", "__float_as_uint",
    "__longlong_as_double", "__double_as_longlong",
    "__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev", "__mul24",
    "__umul24", "__mulhi", "__umulhi", "__ldg",
})

COOPERATIVE_GROUPS: frozenset[str] = frozenset()

# Output, checks and timing inside a kernel.
DEBUG = frozenset({"printf", "assert", "__trap", "__brkpt", "clock", "clock64"})

NAMES = (BUILTIN_VARIABLES | QUALIFIERS | TYPES | MATH | ATOMICS | WARP | INTRINSICS
         | COOPERATIVE_GROUPS | DEBUG)
