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

_VECTORS = tuple(f"{t}{n}" for t, ns in (
    ("float", "1234"), ("int", "1234"), ("uint", "1234"), ("double", "1234"),
    ("char", "1234"), ("uchar", "1234"), ("short", "1234"), ("ushort", "1234"),
    ("longlong", "1234"), ("ulonglong", "1234"),
) for n in ns)
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
# CUDA's own math functions (float forms with the f suffix, double forms without).
_CUDA_MATH = (
    "sinpi", "cospi", "sincospi", "rcbrt", "rhypot", "norm3d", "rnorm3d", "norm4d", "rnorm4d",
    "norm", "rnorm", "normcdf", "normcdfinv", "erfinv", "erfcinv", "erfcx", "cyl_bessel_i0",
    "cyl_bessel_i1",
)
MATH = frozenset({
    *_MATH_PAIRS, *(f"{f}f" for f in _MATH_PAIRS),
    *(f"{f}{s}" for f in _CUDA_MATH for s in ("", "f")),
    "isnan", "isinf", "isfinite", "signbit", "abs", "labs", "llabs", "min", "max", "umin",
    "umax", "llmin", "llmax", "ullmin", "ullmax", "fdividef",
    "__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
    "__tanf", "__sincosf", "__fdividef", "__saturatef",
})

# Atomics, each with its block and system scopes (sm_60): CUDA's overloads of each.
_ATOMIC_OPS = ("atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicExch", "atomicAnd",
               "atomicOr", "atomicXor", "atomicInc", "atomicDec", "atomicCAS")
ATOMICS = frozenset(f"{op}{scope}" for op in _ATOMIC_OPS for scope in ("", "_block", "_system"))

# Warp-level primitives, block barriers and memory fences.
WARP = frozenset({
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
    "__any_sync", "__all_sync", "__activemask", "__syncwarp", "__reduce_add_sync",
    "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
    "__reduce_xor_sync", "__match_any_sync", "__match_all_sync",
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or",
    "__threadfence", "__threadfence_block", "__threadfence_system",
})

# Intrinsics: rounding-mode arithmetic and conversions (each in the modes rn, rz, ru, rd),
# reinterpretations, integer bit tricks and SIMD within a word, loads and stores with cache
# hints.
_MODES = ("rn", "rz", "ru", "rd")
_ROUNDED = (
    "fadd", "fsub", "fmul", "fdiv", "frcp", "fsqrt", "fmaf", "dadd", "dsub", "dmul", "ddiv",
    "drcp", "dsqrt", "fma", "float2int", "float2uint", "float2ll", "float2ull", "double2int",
    "double2uint", "double2ll", "double2ull", "int2float", "uint2float", "ll2float",
    "ull2float", "ll2double", "ull2double", "double2float",
)
_SIMD = (
    "vadd", "vsub", "vaddss", "vsubss", "vaddus", "vsubus", "vabsdiffs", "vabsdiffu", "vavgs",
    "vavgu", "vhaddu", "vmaxs", "vmaxu", "vmins", "vminu", "vcmpeq", "vcmpne", "vcmpges",
    "vcmpgeu", "vcmpgts", "vcmpgtu", "vcmples", "vcmpleu", "vcmplts", "vcmpltu", "vseteq",
    "vsetne", "vsetges", "vsetgeu", "vsetgts", "vsetgtu", "vsetles", "vsetleu", "vsetlts",
    "vsetltu", "vsads", "vsadu", "vabs", "vabsss", "vneg", "vnegss",
)
INTRINSICS = frozenset({
    *(f"__{op}_{m}" for op in _ROUNDED for m in _MODES), "__frsqrt_rn", "__int2double_rn",
    "__uint2double_rn", "__double2hiint", "__double2loint", "__hiloint2double",
    "__int_as_float", "__float_as_int", "__uint_as_float", "__float_as_uint",
    "__longlong_as_double", "__double_as_longlong",
    "__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev", "__brevll",
    "__mul24", "__umul24", "__mulhi", "__umulhi", "__mul64hi", "__umul64hi", "__hadd",
    "__rhadd", "__uhadd", "__urhadd", "__sad", "__usad", "__byte_perm", "__funnelshift_l",
    "__funnelshift_lc", "__funnelshift_r", "__funnelshift_rc", "__fns", "__dp4a", "__dp2a_lo",
    "__dp2a_hi", *(f"__{v}{n}" for v in _SIMD for n in (2, 4)),
    "__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv", "__stcg", "__stcs", "__stwb",
    "__stwt", "__nanosleep",
})

# cooperative_groups (with cooperative_groups/reduce.h, scan.h, memcpy_async.h): the thread
# block, tiles of 32 lanes and fewer, coalesced threads, their members, the collectives.
COOPERATIVE_GROUPS = frozenset({
    "cooperative_groups", "thread_group", "thread_block", "thread_block_tile",
    "coalesced_group", "this_thread_block", "tiled_partition", "coalesced_threads", "sync",
    "thread_rank", "num_threads", "size", "group_size", "group_index", "thread_index",
    "group_dim", "dim_threads", "meta_group_rank", "meta_group_size", "shfl", "shfl_up",
    "shfl_down", "shfl_xor", "any", "all", "ballot", "match_any", "match_all", "reduce",
    "inclusive_scan", "exclusive_scan", "plus", "less", "greater", "bit_and", "bit_or",
    "bit_xor", "memcpy_async", "wait", "wait_prior",
})

# Output, checks and timing inside a kernel.
DEBUG = frozenset({"printf", "assert", "__trap", "__brkpt", "clock", "clock64"})

NAMES = (BUILTIN_VARIABLES | QUALIFIERS | TYPES | MATH | ATOMICS | WARP | INTRINSICS
         | COOPERATIVE_GROUPS | DEBUG)
