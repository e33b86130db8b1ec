"""A seeded, deterministic generator of CUDA C kernels of the course's subset and its
neighbours, each with its inputs, launch, nvcc options and what to compare on a GPU.

``corpus(count, seed)`` draws ``count`` cases from the families below in turn, each from its
own random stream (``seed``, index), so a case depends on nothing but its index: the same
corpus on every machine, and a new family does not change the others' cases.

Families (``FAMILIES``): vector loads and stores at aligned and misaligned offsets, in global
memory, static shared arrays (padded tiles, arrays laid out after others) and carved dynamic
shared memory; warp shuffles with widths and masks, votes, matches and reductions (and what
nvcc refuses of them); atomics on every type CUDA has them for (and the ones it has not);
integer and floating edge values; math functions and intrinsics within their documented
error bounds, under -use_fast_math, -ftz, -prec-div, -prec-sqrt; templates and
__launch_bounds__; register limits (-maxrregcount); initialisers on __shared__ variables;
printf's volume and argument limit; barriers with predicates; launch limits; memcpy_async.
Later families (``LATER_FAMILIES``, only in the cases past ``FIRST_ROUND``): the flush to
zero of -ftz and --use_fast_math, fast intrinsics at wide arguments within the special
function unit's own error, every warp intrinsic with every kind of operand type, templated
kernels with __launch_bounds__ where it may be written, rows of shared arrays passed to
templates and filled by memcpy_async; global accesses before a buffer's start
and just past its end.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .corpus import Arg, Case

SEED = 51
F32, F64 = np.float32, np.float64
I8, U8, I16, U16 = np.int8, np.uint8, np.int16, np.uint16
I32, U32, I64, U64 = np.int32, np.uint32, np.int64, np.uint64
CTYPE = {np.dtype(k): v for k, v in [
    (F32, "float"), (F64, "double"), (I8, "signed char"), (U8, "unsigned char"),
    (I16, "short"), (U16, "unsigned short"), (I32, "int"), (U32, "unsigned int"),
    (I64, "long long"), (U64, "unsigned long long")]}
DTYPE = {v: k for k, v in CTYPE.items()}

#: CUDA's vector types: component type, count, alignment (bytes), as vector_types.h has them.
VECTORS = {
    "char2": ("signed char", 2, 2), "uchar4": ("unsigned char", 4, 4),
    "char4": ("signed char", 4, 4), "short2": ("short", 2, 4), "ushort2": ("unsigned short", 2, 4),
    "short4": ("short", 4, 8), "int2": ("int", 2, 8), "uint2": ("unsigned int", 2, 8),
    "int4": ("int", 4, 16), "uint4": ("unsigned int", 4, 16), "float2": ("float", 2, 8),
    "float4": ("float", 4, 16), "double2": ("double", 2, 16), "longlong2": ("long long", 2, 16),
    "float3": ("float", 3, 4), "int3": ("int", 3, 4),
    "float": ("float", 1, 4), "int": ("int", 1, 4), "double": ("double", 1, 8),
    "long long": ("long long", 1, 8), "short": ("short", 1, 2),
}
COMPONENTS = "xyzw"
FULL = 0xFFFFFFFF


def size_of(ctype: str) -> int:
    if ctype in VECTORS and VECTORS[ctype][1] > 1:
        comp, n, _ = VECTORS[ctype]
        return DTYPE[comp].itemsize * n
    return DTYPE[VECTORS[ctype][0] if ctype in VECTORS else ctype].itemsize


def align_of(ctype: str) -> int:
    return VECTORS[ctype][2] if ctype in VECTORS else DTYPE[ctype].itemsize


def parts(ctype: str, expr: str) -> list[str]:
    """The scalar components of a value of ``ctype`` written as ``expr``."""
    n = VECTORS.get(ctype, (ctype, 1, 0))[1]
    return [expr] if n == 1 else [f"{expr}.{COMPONENTS[k]}" for k in range(n)]


class Builder:
    """Collects a kernel's parameters and body; ``case()`` makes the :class:`Case`."""

    def __init__(self, name: str, family: str) -> None:
        self.name, self.family = name, family
        self.params: list[str] = []
        self.args: list[Arg] = []
        self.body: list[str] = []
        self.pre: list[str] = []  # helpers, templates, globals before the kernel

    def buf(self, ctype: str, name: str, value: np.ndarray, role: str = "in",
            compare: str = "exact", tol: float = 0.0, const: bool = True) -> str:
        q = "const " if role == "in" and const else ""
        self.params.append(f"{q}{ctype}* {name}")
        self.args.append(Arg(role, np.ascontiguousarray(value), compare, tol))
        return name

    def out(self, ctype: str, name: str, n: int, compare: str = "exact", tol: float = 0.0,
            fill: float | int = 0) -> str:
        return self.buf(ctype, name, np.full(n, fill, DTYPE[ctype]), "out", compare, tol)

    def scalar(self, ctype: str, name: str, value: float | int) -> str:
        self.params.append(f"{ctype} {name}")
        self.args.append(Arg("scalar", np.array(value, DTYPE[ctype])))
        return name

    def ptr(self, ctype: str, name: str, value: np.ndarray, offset: int, out: bool = True,
            compare: str = "exact") -> str:
        self.params.append(f"{ctype}* {name}")
        self.args.append(Arg("ptr", np.ascontiguousarray(value), compare, offset=offset, out=out))
        return name

    def source(self, bounds: str = "", extern_c: bool = False, template: str = "") -> str:
        linkage = 'extern "C" ' if extern_c else ""
        params = ", ".join(self.params)
        head = (f"{template}\n" if template else "") + \
            f"{linkage}__global__ void {bounds}{self.name}({params})"
        return "\n".join([*self.pre, head, "{", *("  " + s for s in self.body), "}"]) + "\n"

    def case(self, block: tuple[int, ...], grid: tuple[int, ...] = (1, 1), *, shared: int = 0,
             options: tuple[str, ...] = (), expect: str = "ok", alone: bool = False,
             symbol: str = "", no_extern_c: bool = False, source: str = "", printf: str = "",
             note: str = "", attrs: tuple = (), bounds: str = "") -> Case:
        src = source or self.source(bounds)
        first = len(self.pre) + 3 if not source else 0
        lines = tuple(range(first, first + len(self.body))) if not source else ()
        b = tuple(block) + (1,) * (3 - len(block))
        g = tuple(grid) + (1,) * (2 - len(grid))
        return Case(self.name, self.family, symbol or self.name, src, tuple(self.args), b, g,
                    shared, tuple(options), no_extern_c, alone or expect == "refuse", expect,
                    printf, lines, note, attrs)


def pick(rng: np.random.Generator, seq: list | tuple):
    return seq[int(rng.integers(len(seq)))]


def _random_of(rng: np.random.Generator, dtype: np.dtype, n: int) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 10).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, n, dtype=dtype)


def _store_parts(ctype: str, expr: str, out: str, index: str) -> list[str]:
    ps = parts(ctype, expr)
    return [f"{out}[({index}) * {len(ps)} + {k}] = {p};" for k, p in enumerate(ps)]


# ---- vector and wide accesses ---------------------------------------------------------------
BASES = ("unsigned char", "short", "float", "int", "double")
WIDE = ("float2", "float4", "int2", "int4", "uint2", "uint4", "double2", "longlong2", "short2",
        "short4", "char2", "uchar4", "char4", "ushort2", "float3", "int3", "double", "int",
        "float", "long long", "short")


def _offset(rng: np.random.Generator, base: str, vt: str, aligned: bool) -> int:
    """An element offset into a ``base`` array at which a ``vt`` is (or is not) aligned."""
    bs, al = size_of(base), align_of(vt)
    good = [k for k in range(0, 40) if (k * bs) % al == 0]
    bad = [k for k in range(1, 40) if (k * bs) % al != 0]
    return int(pick(rng, good if aligned or not bad else bad))


def vec_global(rng: np.random.Generator, name: str) -> Case:
    """A vector (or wide scalar) loaded from, or stored to, global memory at an offset."""
    base, vt = pick(rng, BASES), pick(rng, WIDE)
    aligned = bool(rng.random() < 0.45)
    off = _offset(rng, base, vt, aligned)
    misaligned = (off * size_of(base)) % align_of(vt) != 0
    comp = VECTORS[vt][0]
    block, grid = int(pick(rng, (32, 64, 128))), int(pick(rng, (1, 2)))
    n = block * grid
    nbase = (off * size_of(base) + n * size_of(vt)) // size_of(base) + 64
    b = Builder(name, "vec_global")
    x = b.buf(base, "x", _random_of(rng, DTYPE[base], nbase))
    ncomp = len(parts(vt, "v"))
    runtime = rng.random() < 0.5
    o = b.scalar("int", "off", off) if runtime else str(off)
    form = int(rng.integers(4))
    b.body.append("int i = blockIdx.x * blockDim.x + threadIdx.x;")
    if form == 3:  # a store through the vector type
        out = b.buf(base, "y", np.zeros(nbase, DTYPE[base]), "out")
        b.body.append(f"{vt} v = reinterpret_cast<const {vt}*>({x})[i];")
        b.body.append(f"reinterpret_cast<{vt}*>({out} + {o})[i] = v;")
        note = "store"
    else:
        out = b.out(comp, "out", n * ncomp)
        load = {0: f"reinterpret_cast<const {vt}*>({x} + {o})[i]",
                1: f"*((const {vt}*)({x} + {o}) + i)",
                2: f"*(const {vt}*)((const char*)({x} + {o}) + i * sizeof({vt}))"}[form]
        b.body.append(f"{vt} v = {load};")
        b.body += _store_parts(vt, "v", out, "i")
        note = "load"
    return b.case((block,), (grid,), expect="fault:misaligned" if misaligned else "ok",
                  note=f"{note} {vt} at {off} x {base}")


def vec_rows(rng: np.random.Generator, name: str) -> Case:
    """float4/float2 loads of a row-major matrix's rows, at a column offset: aligned only when
    the row length (and the offset) keeps every row's start aligned (a vec4 kernel without
    its alignment test)."""
    vt = pick(rng, ("float4", "float2", "int4", "double2"))
    comp, w, al = VECTORS[vt]
    es = DTYPE[comp].itemsize
    rows = int(pick(rng, (2, 4, 8)))
    k = int(pick(rng, (w * 4, w * 8, w * 4 + 1, w * 8 + 2, 33, 31, 64, 65)))
    c0 = int(pick(rng, (0, 0, w, 1, 2)))
    per_row = max(1, (k - c0) // w)
    bad = any(((r * k + c0) * es) % al for r in range(rows))
    b = Builder(name, "vec_rows")
    a = b.buf(comp, "A", _random_of(rng, DTYPE[comp], rows * k + 64))
    kk = b.scalar("int", "K", k)
    out = b.out(comp, "out", rows * per_row * w)
    b.body += [
        "int r = blockIdx.x, q = threadIdx.x;",
        f"if (q < {per_row}) {{",
        f"  {vt} v = reinterpret_cast<const {vt}*>(&{a}[r * {kk} + {c0}])[q];",
        *("  " + s for s in _store_parts(vt, "v", out, f"r * {per_row} + q")),
        "}",
    ]
    return b.case((max(32, per_row),), (rows,), expect="fault:misaligned" if bad else "ok",
                  note=f"{vt} rows K={k} c0={c0}")


def vec_shared(rng: np.random.Generator, name: str) -> Case:
    """A static shared array written element by element, read back as a vector type at an
    offset (aligned or not), or a padded 2-D tile read by float4."""
    block = int(pick(rng, (32, 64)))
    b = Builder(name, "vec_shared")
    if rng.random() < 0.5:  # 2-D tile, rows padded
        vt = pick(rng, ("float4", "float2", "int4", "int2"))
        comp, w, al = VECTORS[vt]
        es = DTYPE[comp].itemsize
        cols = 32 + int(pick(rng, (0, 1, 2, 4, 8, 3)))
        rows = block * w // 32
        x = b.buf(comp, "x", _random_of(rng, DTYPE[comp], rows * cols))
        out = b.out(comp, "out", block * w)
        b.body += [
            f"__shared__ {comp} tile[{rows}][{cols}];",
            f"for (int j = threadIdx.x; j < {rows * cols}; j += blockDim.x) "
            f"tile[j / {cols}][j % {cols}] = {x}[j];",
            "__syncthreads();",
            f"int t = threadIdx.x, r = t / {32 // w}, c = (t % {32 // w}) * {w};",
            f"{vt} v = *reinterpret_cast<const {vt}*>(&tile[r][c]);",
            *_store_parts(vt, "v", out, "t"),
        ]
        bad = any(((r * cols) * es) % al for r in range(rows))
        return b.case((block,), expect="fault:misaligned" if bad else "ok",
                      note=f"{vt} tile [{rows}][{cols}]")
    base, vt = pick(rng, BASES[1:]), pick(rng, WIDE)
    aligned = bool(rng.random() < 0.45)
    off = _offset(rng, base, vt, aligned)
    n_el = off + (block * size_of(vt) + size_of(base) - 1) // size_of(base) + 4
    x = b.buf(base, "x", _random_of(rng, DTYPE[base], n_el))
    comp = VECTORS[vt][0]
    ncomp = len(parts(vt, "v"))
    out = b.out(comp, "out", block * ncomp)
    b.body += [
        f"__shared__ {base} s[{n_el}];",
        f"for (int j = threadIdx.x; j < {n_el}; j += blockDim.x) s[j] = {x}[j];",
        "__syncthreads();",
        "int t = threadIdx.x;",
        f"{vt} v = reinterpret_cast<const {vt}*>(&s[{off}])[t];",
        *_store_parts(vt, "v", out, "t"),
    ]
    bad = (off * size_of(base)) % align_of(vt) != 0
    return b.case((block,), expect="fault:misaligned" if bad else "ok",
                  note=f"{vt} at {off} x {base} (shared)")


def shared_layout(rng: np.random.Generator, name: str) -> Case:
    """A shared float array declared after a char array of some length, read as float4 from
    its start: aligned only if the GPU's layout puts it on 16 bytes (declaration order,
    each array at its own alignment, as ptxas places them)."""
    pad = int(pick(rng, (4, 8, 12, 16, 20, 32, 100, 64, 36)))
    vt = pick(rng, ("float4", "float2", "double2"))
    comp, w, al = VECTORS[vt]
    es = DTYPE[comp].itemsize
    block = 32
    n = block * w
    b = Builder(name, "shared_layout")
    x = b.buf(comp, "x", _random_of(rng, DTYPE[comp], n))
    out = b.out(comp, "out", n)
    b.body += [
        f"__shared__ unsigned char pad[{pad}];",
        f"__shared__ {comp} s[{n}];",
        "int t = threadIdx.x;",
        f"pad[t % {pad}] = (unsigned char)t;",
        f"for (int j = t; j < {n}; j += blockDim.x) s[j] = {x}[j];",
        "__syncthreads();",
        f"{vt} v = reinterpret_cast<const {vt}*>(s)[t];",
        *_store_parts(vt, "v", out, "t"),
        f"if (t == 0) {out}[0] += (float)pad[3];" if comp != "double" else
        f"if (t == 0) {out}[0] += (double)pad[3];",
    ]
    start = -(-pad // es) * es
    return b.case((block,), expect="fault:misaligned" if start % al else "ok",
                  note=f"{vt} after char[{pad}] (model offset {start})")


CARVE_TYPES = ("char", "short", "int", "float", "double", "float2", "float4", "int4", "double2")


def carve_dynamic(rng: np.random.Generator, name: str) -> Case:
    """Dynamic shared memory carved into arrays of mixed types, each at the byte offset the
    sizes before it give (rounded up to its alignment, or not)."""
    k = int(rng.integers(2, 5))
    types = [pick(rng, CARVE_TYPES) for _ in range(k)]
    counts = [int(pick(rng, (1, 3, 7, 25, 32, 50, 100))) for _ in range(k)]
    align_up = rng.random() < 0.5
    decl = pick(rng, ("char", "unsigned char", "float", "double", "int4"))
    block = 64
    offs, pos = [], 0
    for t, c in zip(types, counts, strict=True):
        ts = 1 if t == "char" else size_of(t)
        ta = 1 if t == "char" else align_of(t)
        if align_up:
            pos = -(-pos // ta) * ta
        offs.append(pos)
        pos += ts * c
    total = pos
    bad = any(o % (1 if t == "char" else align_of(t)) for o, t in zip(offs, types, strict=True))
    b = Builder(name, "carve_dynamic")
    x = b.buf("float", "x", rng.integers(-50, 50, block).astype(F32))
    out = b.out("float", "out", block)
    b.body += [f"extern __shared__ {decl} smem[];",
               "char* base = reinterpret_cast<char*>(smem);",
               "int t = threadIdx.x;", "float acc = 0.0f;"]
    for j, (t, o) in enumerate(zip(types, offs, strict=True)):
        b.body.append(f"{t}* a{j} = reinterpret_cast<{t}*>(base + {o});")
    for j, (t, c) in enumerate(zip(types, counts, strict=True)):
        comp = VECTORS.get(t, (t, 1, 0))[0] if t != "char" else "char"
        n = VECTORS[t][1] if t in VECTORS else 1
        loop = f"for (int k = t; k < {c}; k += blockDim.x) a{j}[k] = "
        if n == 1:
            b.body.append(f"{loop}({t})({x}[k % {block}] + {j});")
        else:
            vals = ", ".join(f"({comp})({x}[k % {block}] + {j + q})" for q in range(n))
            b.body.append(f"{loop}make_{t}({vals});")
    b.body.append("__syncthreads();")
    for j, (t, c) in enumerate(zip(types, counts, strict=True)):
        for p in parts(t if t != "char" else "char", f"a{j}[(t + 1) % {c}]")[:2]:
            b.body.append(f"acc += (float){p};")
    b.body.append(f"{out}[t] = acc;")
    return b.case((block,), shared=total + int(pick(rng, (0, 0, 3, 16))),
                  expect="fault:misaligned" if bad else "ok",
                  note=" ".join(f"{t}[{c}]@{o}" for t, c, o in zip(types, counts, offs,
                                                                   strict=True)))


def misaligned_pointer(rng: np.random.Generator, name: str) -> Case:
    """A buffer passed as a raw device address some bytes into its allocation (a gpuarray
    view, ``int(ptr) + k``): the kernel's vector (or scalar) accesses inherit its offset."""
    vt = pick(rng, ("float4", "float2", "double", "int4", "float", "int2"))
    comp = VECTORS[vt][0]
    offset = int(pick(rng, (0, 4, 8, 16, 12, 2, 32)))
    n = 64
    b = Builder(name, "misaligned_pointer")
    data = _random_of(rng, np.uint8, offset + n * size_of(vt) + 64)
    p = b.ptr(vt, "p", data, offset, out=False)
    out = b.out(comp, "out", n * len(parts(vt, "v")))
    b.body += ["int i = threadIdx.x;", f"{vt} v = {p}[i];", *_store_parts(vt, "v", out, "i")]
    bad = offset % align_of(vt) != 0
    return b.case((n,), expect="fault:misaligned" if bad else "ok",
                  note=f"{vt}* at +{offset} bytes")


# ---- warp-level primitives ------------------------------------------------------------------
SHFL_TYPES = ("int", "unsigned int", "float", "double", "long long", "unsigned long long")


def _segment_mask(rng: np.random.Generator, width: int) -> int:
    if rng.random() < 0.5:
        return FULL
    segs = 32 // width
    chosen = [s for s in range(segs) if rng.random() < 0.6] or [0]
    return sum(((1 << width) - 1) << (s * width) for s in chosen)


def warp_shuffle(rng: np.random.Generator, name: str) -> Case:
    """__shfl_sync / _up / _down / _xor on every type CUDA shuffles, with a width, an offset
    or lane (past the width too) and a mask of whole segments."""
    t = pick(rng, SHFL_TYPES)
    op = pick(rng, ("", "_up", "_down", "_xor"))
    width = int(pick(rng, (32, 16, 8, 4, 2)))
    mask = _segment_mask(rng, width)
    if op == "":
        d = int(rng.integers(-40, 70))
    elif op == "_xor":
        d = int(rng.integers(0, width if mask != FULL else 40))
    else:
        d = int(rng.integers(0, 40))
    warps, grid = int(rng.integers(1, 4)), int(pick(rng, (1, 2)))
    n = 32 * warps * grid
    b = Builder(name, "warp_shuffle")
    x = b.buf(t, "x", _random_of(rng, DTYPE[t], n))
    out = b.out(t, "out", n, fill=7)
    dd = b.scalar("int", "d", d) if rng.random() < 0.5 else str(d)
    wexpr = "" if width == 32 and rng.random() < 0.5 else f", {width}"
    b.body += [
        "int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "unsigned lane = threadIdx.x & 31;",
        f"{t} v = {x}[i];",
        f"if (({mask:#x}u >> lane) & 1u) {out}[i] = __shfl{op}_sync({mask:#x}u, v, {dd}{wexpr});",
    ]
    return b.case((32 * warps,), (grid,), note=f"shfl{op} {t} w={width} d={d} m={mask:#x}")


def warp_vote(rng: np.random.Generator, name: str) -> Case:
    """__ballot_sync, __any_sync, __all_sync, __activemask (converged), __match_any_sync and
    __match_all_sync, with predicates from the inputs."""
    kind = pick(rng, ("ballot", "any", "all", "active", "match_any", "match_all"))
    warps = int(rng.integers(1, 4))
    n = 32 * warps
    width = int(pick(rng, (32, 16, 8)))
    mask = _segment_mask(rng, width)
    b = Builder(name, "warp_vote")
    x = b.buf("int", "x", rng.integers(-3, 4, n).astype(I32))
    out = b.out("unsigned int", "out", n, fill=0xABCD)
    thr = int(rng.integers(-2, 3))
    expr = {"ballot": f"__ballot_sync({mask:#x}u, v > {thr})",
            "any": f"(unsigned)__any_sync({mask:#x}u, v > {thr})",
            "all": f"(unsigned)__all_sync({mask:#x}u, v > {thr - 3})",
            "active": "__activemask()",
            "match_any": f"__match_any_sync({mask:#x}u, v)",
            "match_all": f"__match_all_sync({mask:#x}u, v & 1, &pred) * 2u + (unsigned)pred"}[kind]
    guard = "" if kind == "active" else f"if (({mask:#x}u >> lane) & 1u) "
    b.body += ["int i = threadIdx.x;", "unsigned lane = i & 31;", f"int v = {x}[i];",
               "int pred = 0;", f"{guard}{out}[i] = {expr};"]
    return b.case((n,), note=f"{kind} m={mask:#x}")


REDUCE_OPS = {"add": ("int", "unsigned int"), "min": ("int", "unsigned int"),
              "max": ("int", "unsigned int"), "and": ("unsigned int",), "or": ("unsigned int",),
              "xor": ("unsigned int",)}
REDUCE_BAD = ("float", "double", "long long", "unsigned long long", "float2")


def warp_reduce(rng: np.random.Generator, name: str) -> Case:
    """__reduce_*_sync on the 32-bit integers CUDA reduces (edge values, masks of segments),
    and on what it has no overload for (a float, a double, 64 bits: nvcc refuses)."""
    op = pick(rng, list(REDUCE_OPS))
    refuse = rng.random() < 0.25 and op in ("add", "min", "max")
    t = pick(rng, REDUCE_BAD) if refuse else pick(rng, REDUCE_OPS[op])
    mask = _segment_mask(rng, int(pick(rng, (32, 16, 8))))
    warps = int(rng.integers(1, 3))
    n = 32 * warps
    b = Builder(name, "warp_reduce")
    vt = "float" if t == "float2" else t
    edges = np.array([0, 1, -1, 2**31 - 1, -2**31, 12345, -7], I64)
    vals = np.where(rng.random(n) < 0.3, rng.choice(edges, n), rng.integers(-1000, 1000, n))
    x = b.buf(vt, "x", vals.astype(DTYPE[vt]))
    rt = "unsigned int" if t in ("unsigned int",) or refuse else "int"
    out = b.out(rt, "out", n, fill=5)
    val = "make_float2(v, v)" if t == "float2" else "v"
    b.body += ["int i = threadIdx.x;", "unsigned lane = i & 31;", f"{vt} v = {x}[i];",
               f"if (({mask:#x}u >> lane) & 1u) {out}[i] = __reduce_{op}_sync({mask:#x}u, "
               f"{val});"]
    return b.case((n,), expect="refuse" if refuse else "ok", note=f"reduce_{op} {t}")


def shuffle_types(rng: np.random.Generator, name: str) -> Case:
    """Shuffles of types CUDA has no overload for (vectors, structs: nvcc refuses) and of
    narrower ones it promotes (bool, char, short: accepted, an int comes back)."""
    bad = rng.random() < 0.5
    t = pick(rng, ("float2", "int2", "float4", "double2", "struct")) if bad else \
        pick(rng, ("bool", "char", "short", "unsigned char", "unsigned short"))
    op = pick(rng, ("__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync"))
    b = Builder(name, "shuffle_types")
    x = b.buf("int", "x", rng.integers(-100, 100, 32).astype(I32))
    out = b.out("int", "out", 32, fill=9)
    if t == "struct":
        b.pre.append(f"struct {name}_pair {{ int a; float b; }};")
        b.body += [f"{name}_pair v = {{{x}[threadIdx.x], 1.0f}};",
                   f"{name}_pair r = {op}({FULL:#x}u, v, 1);", f"{out}[threadIdx.x] = r.a;"]
    elif t in VECTORS:
        comp = VECTORS[t][0]
        vals = ", ".join(f"({comp}){x}[threadIdx.x]" for _ in range(VECTORS[t][1]))
        b.body += [f"{t} v = make_{t}({vals});", f"{t} r = {op}({FULL:#x}u, v, 1);",
                   f"{out}[threadIdx.x] = (int)r.x;"]
    else:
        b.body += [f"{t} v = ({t}){x}[threadIdx.x];",
                   f"{out}[threadIdx.x] = (int){op}({FULL:#x}u, v, 1);"]
    return b.case((32,), expect="refuse" if bad else "ok", note=f"{op} {t}")


# ---- atomics -------------------------------------------------------------------------------
#: The atomics CUDA declares, with the types each takes (device_atomic_functions.h,
#: sm_20/32/60 atomic_functions.h).
ATOMICS = {
    "atomicAdd": ("int", "unsigned int", "unsigned long long", "float", "double"),
    "atomicSub": ("int", "unsigned int"),
    "atomicExch": ("int", "unsigned int", "unsigned long long", "float"),
    "atomicMin": ("int", "unsigned int", "unsigned long long", "long long"),
    "atomicMax": ("int", "unsigned int", "unsigned long long", "long long"),
    "atomicAnd": ("int", "unsigned int", "unsigned long long", "long long"),
    "atomicOr": ("int", "unsigned int", "unsigned long long", "long long"),
    "atomicXor": ("int", "unsigned int", "unsigned long long", "long long"),
    "atomicInc": ("unsigned int",),
    "atomicDec": ("unsigned int",),
}
ALL_TYPES = ("int", "unsigned int", "unsigned long long", "long long", "float", "double")


def atomics(rng: np.random.Generator, name: str) -> Case:
    """An atomic on global or shared memory from every thread of a few blocks: the final
    values compared exactly (integer-valued floats, so any order sums the same), the values
    returned compared once sorted where every thread adds the same."""
    op = pick(rng, list(ATOMICS))
    refuse = rng.random() < 0.15
    valid = ATOMICS[op]
    t = pick(rng, [x for x in ALL_TYPES if x not in valid] or list(valid)) if refuse \
        else pick(rng, valid)
    refuse = t not in valid
    suffix = pick(rng, ("", "", "", "_block", "_system")) if op not in ("atomicInc",
                                                                        "atomicDec") else ""
    shared = rng.random() < 0.4
    block, grid = int(pick(rng, (32, 64, 128))), int(pick(rng, (1, 2, 3)))
    n = block * grid
    slots = int(pick(rng, (1, 2, 5, 16)))
    dt = DTYPE[t]
    same = rng.random() < 0.4
    if op in ("atomicInc", "atomicDec"):
        vals = np.full(n, int(rng.integers(3, 50)), dt)
        same = True
    elif op == "atomicExch":  # the last writer wins: every thread writes the same value
        vals = np.full(n, _random_of(rng, dt, 1)[0] if dt.kind != "f" else 2.5, dt)
        same = True
    elif op in ("atomicAnd", "atomicOr", "atomicXor"):
        vals = _random_of(rng, dt, n) if not same else np.full(n, _random_of(rng, dt, 1)[0])
    elif dt.kind == "f":
        vals = (rng.integers(-8, 9, n) / 4).astype(dt)
        if same:
            vals[:] = vals[0]
    else:
        lo = 0 if dt.kind == "u" else -1000
        vals = rng.integers(lo, 1000, n).astype(dt)
        if same:
            vals[:] = vals[0]
    init = (np.zeros(slots, dt) if op not in ("atomicMin", "atomicAnd", "atomicDec")
            else np.full(slots, 7 if op == "atomicDec" else 500, dt))
    if op == "atomicAnd" and dt.kind in "iu":
        init[:] = np.array(-1).astype(dt) if dt.kind == "i" else np.iinfo(dt).max
    b = Builder(name, "atomics")
    acc = b.buf(t, "acc", init, "out")
    v = b.buf(t, "v", vals)
    order_free = same and op in ("atomicAdd", "atomicSub", "atomicInc", "atomicDec",
                                 "atomicExch")
    olds = b.out(t, "olds", n, compare="sorted" if order_free and not shared else "none")
    fn = op + suffix
    b.body.append("int i = blockIdx.x * blockDim.x + threadIdx.x;")
    # per-block partial results in shared memory, folded into global memory by one atomic
    # per slot: from zero for add, sub and xor; from a copy of the global value for the
    # idempotent min, max, and, or
    fold = {"atomicAdd": "atomicAdd", "atomicSub": "atomicAdd", "atomicXor": "atomicXor",
            "atomicMin": "atomicMin", "atomicMax": "atomicMax", "atomicAnd": "atomicAnd",
            "atomicOr": "atomicOr"}.get(op)
    shared = shared and fold is not None and not refuse
    if shared:
        start = "0" if op in ("atomicAdd", "atomicSub", "atomicXor") else f"{acc}[threadIdx.x]"
        b.body += [f"__shared__ {t} s[{slots}];",
                   f"if (threadIdx.x < {slots}) s[threadIdx.x] = {start};",
                   "__syncthreads();",
                   f"{t} old = {fn}(&s[i % {slots}], {v}[i]);",
                   f"{olds}[i] = old;",
                   "__syncthreads();",
                   f"if (threadIdx.x < {slots}) {fold}(&{acc}[threadIdx.x], s[threadIdx.x]);"]
    else:
        b.body += [f"{t} old = {fn}(&{acc}[i % {slots}], {v}[i]);", f"{olds}[i] = old;"]
    note = f"{fn} {t} {'shared' if shared else 'global'} slots={slots}"
    return b.case((block,), (grid,), expect="refuse" if refuse else "ok", note=note)


def atomic_cas(rng: np.random.Generator, name: str) -> Case:
    """atomicCAS loops: a float maximum through the int bits, and a 64-bit one through
    unsigned long long; and an atomic on a misaligned address (a fault on a GPU)."""
    kind = pick(rng, ("fmax", "dmax", "misaligned"))
    n = int(pick(rng, (64, 128)))
    b = Builder(name, "atomic_cas")
    if kind == "misaligned":
        t = pick(rng, ("double", "int", "unsigned long long", "float"))
        off = int(pick(rng, (0, 1, 2, 4))) if t in ("double", "unsigned long long") else \
            int(pick(rng, (0, 1, 2)))
        acc = b.buf("unsigned char", "acc", np.zeros(64, U8), "out")
        b.body += [f"{t}* p = reinterpret_cast<{t}*>({acc} + {off});",
                   f"atomicAdd(p, ({t})1);"]
        return b.case((n,), expect="fault:misaligned" if off % size_of(t) else "ok",
                      note=f"atomicAdd {t} at +{off}")
    x = b.buf("float" if kind == "fmax" else "double", "x",
              (rng.standard_normal(n) * 100).astype(F32 if kind == "fmax" else F64))
    if kind == "fmax":
        out = b.buf("float", "out", np.array([-1e30], F32), "out")
        b.body += ["int i = threadIdx.x;", f"int* a = (int*){out};", "int old = *a, assumed;",
                   "do { assumed = old;",
                   f"  old = atomicCAS(a, assumed, __float_as_int(fmaxf({x}[i], "
                   "__int_as_float(assumed))));",
                   "} while (assumed != old);"]
    else:
        out = b.buf("double", "out", np.array([-1e300], F64), "out")
        b.body += ["int i = threadIdx.x;", f"unsigned long long* a = (unsigned long long*){out};",
                   "unsigned long long old = *a, assumed;", "do { assumed = old;",
                   f"  old = atomicCAS(a, assumed, __double_as_longlong(fmax({x}[i], "
                   "__longlong_as_double(assumed))));", "} while (assumed != old);"]
    return b.case((n,), note=kind)


# ---- integer and floating edge values ---------------------------------------------------------
INT_EDGES = {
    "int": [0, 1, -1, 2, -2, 31, 32, 33, 63, 64, 2**31 - 1, -2**31, 7, -7, 1000, 65535],
    "unsigned int": [0, 1, 2, 31, 32, 33, 2**31, 2**32 - 1, 7, 1000, 65535, 2**16],
    "long long": [0, 1, -1, 63, 64, 65, 2**63 - 1, -2**63, 2**31, -2**31 - 1, 7],
    "unsigned long long": [0, 1, 63, 64, 65, 2**64 - 1, 2**63, 2**32, 7],
}
INT_BINARY = ("+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%")
INT_FUNCS = {
    "int": ("abs(a)", "min(a, b)", "max(a, b)", "__mul24(a, b)", "__mulhi(a, b)", "__clz(a)",
            "__ffs(a)", "__popc(a)", "__hadd(a, b)", "__rhadd(a, b)", "__sad(a, b, 3u)",
            "-a", "~a", "(int)(short)a", "(int)(signed char)b", "a == b", "a < b",
            "__brev(a)", "__byte_perm(a, b, 0x3210u ^ (unsigned)b)", "__funnelshift_l(a, b, b)",
            "__funnelshift_r(a, b, b)", "__funnelshift_lc(a, b, b)", "max(a, 0u)"),
    "unsigned int": ("min(a, b)", "max(a, b)", "__umul24(a, b)", "__umulhi(a, b)", "__clz(a)",
                     "__popc(a)", "__brev(a)", "__uhadd(a, b)", "__urhadd(a, b)", "-a", "~a",
                     "__vabsdiffu4(a, b)", "__vadd2(a, b)", "__usad(a, b, 1u)"),
    "long long": ("llabs(a)", "min(a, b)", "max(a, b)", "__mul64hi(a, b)", "__clzll(a)",
                  "__ffsll(a)", "__popcll(a)", "-a", "~a", "__brevll(a)"),
    "unsigned long long": ("min(a, b)", "max(a, b)", "__umul64hi(a, b)", "__clzll(a)",
                           "__popcll(a)", "-a", "__brevll(a)"),
}


def int_edges(rng: np.random.Generator, name: str) -> Case:
    """Integer expressions of one or two operators on edge values: overflow, shifts by the
    width and more, division by zero and INT_MIN / -1, CUDA's integer intrinsics."""
    t = pick(rng, list(INT_EDGES))
    dt = DTYPE[t]
    n = 64
    edges = np.array(INT_EDGES[t], dtype=object)
    info = np.iinfo(dt)

    def draw() -> np.ndarray:
        e = rng.choice(edges, n)
        r = rng.integers(int(info.min) // 2, int(info.max) // 2, n, dtype=np.int64 if
                         dt.kind == "i" else np.uint64) if dt.itemsize == 8 else \
            rng.integers(int(info.min), int(info.max) + 1, n)
        return np.array([int(e[i]) if rng.random() < 0.6 else int(r[i]) for i in range(n)],
                        dtype=object).astype(dt)

    a_v, b_v = draw(), draw()
    exprs = []
    for _ in range(int(rng.integers(1, 4))):
        if rng.random() < 0.5:
            op = pick(rng, INT_BINARY)
            rhs = pick(rng, ("b", "b", "(b & 31)", "3", "(b | 1)")) if op in ("/", "%") \
                else pick(rng, ("b", "b", "(b & 63)", "(b & 31)"))
            if op in ("/", "%") and rhs == "(b | 1)" and dt.kind == "i":
                rhs = "b"
            exprs.append(f"a {op} {rhs}")
        else:
            exprs.append(pick(rng, INT_FUNCS[t]))
    b = Builder(name, "int_edges")
    av = b.buf(t, "A", a_v)
    bv = b.buf(t, "B", b_v)
    out = b.out("long long", "out", n * len(exprs), fill=-3)
    b.body += ["int i = threadIdx.x;", f"{t} a = {av}[i], b = {bv}[i];"]
    for k, e in enumerate(exprs):
        b.body.append(f"{out}[i * {len(exprs)} + {k}] = (long long)({e});")
    return b.case((n,), note=f"{t}: " + "; ".join(exprs))


FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 5e-39, 3.4028235e38,
               -3.4028235e38, math.inf, -math.inf, math.nan, 0.5, 2.5, -2.5, 1e30, 1e-30,
               16777217.0, 8388608.5, 2.0**126, 2.0**127, 1.5, 3.0]
DOUBLE_EDGES = [0.0, -0.0, 1.0, 5e-324, 2.2250738585072014e-308, 1e-310, 1.7976931348623157e308,
                math.inf, -math.inf, math.nan, 0.5, 2.5, -2.5, 1e300, 2.0**53 + 1, 3.0, -1e-320]
FLOAT_EXPRS = {
    "float": ("a + b", "a - b", "a * b", "a / b", "fmaf(a, b, c)", "sqrtf(fabsf(a))",
              "fminf(a, b)", "fmaxf(a, b)", "fabsf(a)", "copysignf(a, b)", "truncf(a)",
              "floorf(a)", "ceilf(a)", "rintf(a)", "roundf(a)", "nearbyintf(a)", "fmodf(a, b)",
              "remainderf(a, b)", "ldexpf(a, 3)", "ldexpf(a, -130)", "nextafterf(a, b)",
              "fdimf(a, b)", "(float)(double)a", "(float)((double)a * (double)b)",
              "(float)isnan(a)", "(float)isinf(b)", "(float)signbit(a)", "1.0f / a",
              "a * b + c", "__fadd_rz(a, b)", "__fmul_ru(a, b)", "__fdiv_rd(a, b)",
              "__frcp_rn(a)", "__fsqrt_rn(fabsf(b))", "__fmaf_rz(a, b, c)", "logbf(a)",
              "(float)ilogbf(b)", "scalbnf(a, 100)",
              "(float)(a < b)", "(float)(a == b)", "__saturatef(a)", "a * 0.0f"),
    "double": ("a + b", "a - b", "a * b", "a / b", "fma(a, b, c)", "sqrt(fabs(a))",
               "fmin(a, b)", "fmax(a, b)", "trunc(a)", "floor(a)", "rint(a)", "round(a)",
               "fmod(a, b)", "remainder(a, b)", "ldexp(a, 5)", "nextafter(a, b)",
               "(double)(float)a",
               "__dadd_rz(a, b)", "__dmul_ru(a, b)", "__ddiv_rd(a, b)", "__drcp_rn(a)",
               "__dsqrt_rn(fabs(b))", "1.0 / a", "a * b + c", "(double)isnan(a)",
               "(double)signbit(b)", "copysign(a, b)"),
}
FLOAT_OPTIONS = ((), (), (), ("-ftz=true",), ("--prec-div=false",), ("--prec-sqrt=false",),
                 ("--fmad=false",), ("-ftz=true", "--prec-div=false"))


def float_edges(rng: np.random.Generator, name: str) -> Case:
    """Floating expressions on edge values (signed zeros, denormals, infinities, NaN, the
    ends of the range, halfway cases), exactly as IEEE rounds them (NaN equal to NaN), under
    the options that change them (-ftz=true flushes single-precision denormals)."""
    t = pick(rng, ("float", "float", "double"))
    dt = DTYPE[t]
    n = 64
    edges = np.array(FLOAT_EDGES if t == "float" else DOUBLE_EDGES)

    def draw() -> np.ndarray:
        e = rng.choice(edges, n)
        r = rng.standard_normal(n) * 10.0 ** rng.integers(-40 if t == "float" else -300,
                                                           38 if t == "float" else 300, n)
        return np.where(rng.random(n) < 0.6, e, r).astype(dt)

    options = pick(rng, FLOAT_OPTIONS)
    exprs = [pick(rng, FLOAT_EXPRS[t]) for _ in range(int(rng.integers(1, 4)))]
    approx = any(("/" in e or "1.0f /" in e) for e in exprs) and "--prec-div=false" in options
    approx = approx or (any("sqrt" in e for e in exprs) and "--prec-sqrt=false" in options)
    b = Builder(name, "float_edges")
    av, bv, cv = (b.buf(t, nm, draw()) for nm in ("A", "B", "C"))
    out = b.out(t, "out", n * len(exprs), compare="ulp" if approx else "exact",
                tol=3 if approx else 0)
    b.body += ["int i = threadIdx.x;", f"{t} a = {av}[i], b = {bv}[i], c = {cv}[i];",
               "int e = 0;"]
    for k, e in enumerate(exprs):
        b.body.append(f"{out}[i * {len(exprs)} + {k}] = ({t})({e});")
    b.body.append("(void)e;")
    return b.case((n,), options=options, note=f"{t} {' '.join(options)}: " + "; ".join(exprs))


# ---- math functions and intrinsics within their documented bounds ------------------------------
# name: (arity, domain, ulps by default, ulps with -use_fast_math or "abs:E"), from the CUDA C++
# Programming Guide's "Mathematical Functions" appendix (single precision, cc >= 5.2); a
# bound the emulator's own rounding adds to is added at comparison.
MATH = {
    "sinf": (1, "wide", 2, "fast:__sinf"), "cosf": (1, "wide", 2, "fast:__cosf"),
    "tanf": (1, "small", 4, "fast:__tanf"), "expf": (1, "exp", 2, "fast:__expf"),
    "exp2f": (1, "exp", 2, 2), "exp10f": (1, "exp10", 2, "fast:__exp10f"),
    "expm1f": (1, "exp", 1, 1), "logf": (1, "pos", 1, "fast:__logf"),
    "log2f": (1, "pos", 1, "fast:__log2f"), "log10f": (1, "pos", 2, "fast:__log10f"),
    "log1pf": (1, "pos", 1, 1), "powf": (2, "pow", 4, "fast:__powf"),
    "sqrtf": (1, "pos", 0, 3), "rsqrtf": (1, "pos", 2, 2), "cbrtf": (1, "wide", 1, 1),
    "erff": (1, "small", 2, 2), "erfcf": (1, "small", 4, 4), "tanhf": (1, "small", 2, 2),
    "sinhf": (1, "small", 3, 3), "coshf": (1, "small", 2, 2), "atanf": (1, "wide", 2, 2),
    "asinf": (1, "unit", 2, 2), "acosf": (1, "unit", 2, 2), "atan2f": (2, "wide", 3, 3),
    "hypotf": (2, "wide", 3, 3), "sinpif": (1, "small", 1, 1), "cospif": (1, "small", 1, 1),
    "__fdividef": (2, "div", "div", "div"), "__sinf": (1, "wide", "sin", "sin"),
    "__cosf": (1, "wide", "sin", "sin"), "__expf": (1, "exp", "expf", "expf"),
    "__logf": (1, "pos", "log", "log"), "__log2f": (1, "pos", "log2", "log2"),
    "__powf": (2, "pow", "pow", "pow"), "__saturatef": (1, "small", 0, 0),
    "__frsqrt_rn": (1, "pos", 0, 0), "__fsqrt_rn": (1, "pos", 0, 0),
    "__exp10f": (1, "exp10", "exp10", "exp10"), "__tanf": (1, "small", "tan", "tan"),
    "__log10f": (1, "pos", "log10", "log10"),
}
MATH_OPTIONS = ((), (), ("-use_fast_math",), ("--use_fast_math",), ("-ftz=true",))


def _domain(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "small":
        x = rng.uniform(-3.1, 3.1, n)
    elif kind == "wide":
        x = np.where(rng.random(n) < 0.5, rng.uniform(-3.14, 3.14, n),
                     rng.uniform(-2000, 2000, n))
    elif kind == "exp":
        x = rng.uniform(-80, 80, n)
    elif kind == "exp10":
        x = rng.uniform(-30, 30, n)
    elif kind == "pos":
        x = np.exp(rng.uniform(-60, 60, n))
    elif kind == "unit":
        x = rng.uniform(-1, 1, n)
    elif kind == "pow":
        x = np.exp(rng.uniform(-3, 3, n))
    else:  # div: numerators, and divisors some of them past 2**126
        x = rng.standard_normal(n) * 1e3
    return x.astype(F32)


def math_functions(rng: np.random.Generator, name: str) -> Case:
    """A math function or intrinsic over a domain, its result within the bound CUDA documents
    (each output's tolerance says how it is compared), by default and under -use_fast_math
    and -ftz=true."""
    fn = pick(rng, list(MATH))
    arity, dom, bound, fast_bound = MATH[fn]
    options = pick(rng, MATH_OPTIONS)
    fast = any(o.lstrip("-") == "use_fast_math" for o in options)
    n = 128
    x = _domain(rng, dom, n)
    y = _domain(rng, "pow" if dom == "pow" else "div" if dom == "div" else "wide", n)
    if dom == "pow":
        y = rng.uniform(-4, 4, n).astype(F32)
    if dom == "div":
        y = np.where(rng.random(n) < 0.2, (rng.uniform(1, 2, n) * 2.0**126) *
                     np.sign(rng.standard_normal(n)),
                     rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(F32)
    spec = fast_bound if fast else bound
    if isinstance(spec, str) and spec.startswith("fast:"):
        spec = MATH[spec[5:]][2]
    compare, tol = _bound(spec)
    b = Builder(name, "math_functions")
    xv = b.buf("float", "x", x)
    yv = b.buf("float", "y", y)
    out = b.out("float", "out", n, compare=compare, tol=tol)
    call = f"{fn}(a)" if arity == 1 else f"{fn}(a, b)"
    b.body += ["int i = blockIdx.x * blockDim.x + threadIdx.x;",
               f"float a = {xv}[i], b = {yv}[i];", f"{out}[i] = {call};", "(void)b;"]
    return b.case((64,), (2,), options=options,
                  note=f"{fn} {' '.join(options)} [{compare} {tol}]")


def _bound(spec: int | str) -> tuple[str, float]:
    """How an output of a function with documented bound ``spec`` is compared: ``ulp`` n, or
    ``abs`` e for the intrinsics documented by an absolute error. The emulator rounds too, so
    one ulp is added to every bound."""
    table = {"div": ("ulp", 3), "sin": ("abs", 2.0**-21.41 * 2), "expf": ("ulp", 2 + 1 + 94),
             "log": ("abs", 2.0**-21.41 * 4), "log2": ("abs", 2.0**-22 * 4), "pow": ("ulp", 200),
             "exp10": ("ulp", 2 + 1 + 90), "tan": ("ulp", 30), "log10": ("abs", 2.0**-24 * 4)}
    if isinstance(spec, str):
        return table[spec]
    return ("exact", 0) if spec == 0 else ("ulp", spec + 1)


# ---- templates, launch bounds, registers ------------------------------------------------------
def _mangle(name: str, targs: str, params: str) -> str:
    return f"_Z{len(name)}{name}I{targs}EEv{params}"


def templates(rng: np.random.Generator, name: str) -> Case:
    """Template kernels (a value and a type parameter, __launch_bounds__ of the template's
    value), got by their mangled names; a template __device__ function given a row of a
    2-D shared array."""
    kind = pick(rng, ("bounds", "type", "row", "row_ref"))
    b = Builder(name, "templates")
    block = int(pick(rng, (32, 64, 128, 256)))
    n = block * 2
    if kind in ("bounds", "type"):
        t = pick(rng, ("float", "double", "int")) if kind == "type" else "float"
        b.buf(t, "x", _random_of(rng, DTYPE[t], n).astype(DTYPE[t]) if t != "int"
              else rng.integers(-99, 99, n).astype(I32))
        b.out(t, "out", n)
        bounds = "__launch_bounds__(N) " if kind == "bounds" else ""
        src = (f"template <typename T, int N>\n__global__ void {bounds}{name}(const T* x, "
               f"T* out)\n{{\n  int i = blockIdx.x * N + threadIdx.x;\n"
               f"  out[i] = x[i] * (T)3 + (T)N;\n}}\n"
               f"template __global__ void {name}<{t}, {block}>(const {t}*, {t}*);\n")
        code = {"float": "f", "double": "d", "int": "i"}[t]
        sym = _mangle(name, f"{code}Li{block}", "PKT_PS0_")
        return b.case((block,), (2,), source=src, symbol=sym, no_extern_c=True,
                      note=f"template {kind} {t} {block}")
    rows, cols = 4, 32
    b.buf("float", "x", rng.integers(-9, 9, rows * cols).astype(F32))
    b.out("float", "out", rows)
    helper = (f"template <class T>\n__device__ T {name}_sum(const T* row, int n)\n"
              f"{{ T s = 0; for (int k = 0; k < n; ++k) s += row[k]; return s; }}\n"
              if kind == "row" else
              f"template <class T, int M>\n__device__ T {name}_sum(const T (&row)[M], int n)\n"
              f"{{ T s = 0; for (int k = 0; k < M && k < n; ++k) s += row[k]; return s; }}\n")
    src = (helper + f"extern \"C\" __global__ void {name}(const float* x, float* out)\n{{\n"
           f"  __shared__ float buf[{rows}][{cols}];\n"
           f"  for (int j = threadIdx.x; j < {rows * cols}; j += blockDim.x) "
           f"buf[j / {cols}][j % {cols}] = x[j];\n  __syncthreads();\n"
           f"  if (threadIdx.x < {rows}) out[threadIdx.x] = {name}_sum(buf[threadIdx.x], "
           f"{cols});\n}}\n")
    return b.case((32,), source=src, no_extern_c=True, note=f"template {kind}")


def launch_bounds(rng: np.random.Generator, name: str) -> Case:
    """__launch_bounds__(max threads[, min blocks]) on a plain kernel, launched with fewer or
    more threads than its bound (a GPU refuses more)."""
    bound = int(pick(rng, (64, 128, 256, 512)))
    block = int(pick(rng, (bound // 2, bound, bound * 2)))
    minb = pick(rng, ("", ", 2", ", 4"))
    b = Builder(name, "launch_bounds")
    b.out("int", "out", block)
    b.body.append("out[threadIdx.x] = threadIdx.x * 3 + 1;")
    return b.case((block,), bounds=f"__launch_bounds__({bound}{minb}) ",
                  expect="launch" if block > bound else "ok", note=f"bound {bound}, block {block}")


def registers(rng: np.random.Generator, name: str) -> Case:
    """A kernel with many live values launched with 1024 (or 512) threads, built with and
    without -maxrregcount: the registers ptxas gives it decide whether a GPU launches it."""
    k = int(pick(rng, (16, 24, 32, 48)))
    limit = pick(rng, ((), ("-maxrregcount=32",), ("-maxrregcount=64",), ("--maxrregcount", "40"),
                       ("-maxrregcount=128",)))
    block = int(pick(rng, (1024, 512)))
    b = Builder(name, "registers")
    b.buf("float", "x", rng.standard_normal(block + k).astype(F32))
    b.out("float", "out", block, compare="ulp", tol=4)
    b.body += ["int t = threadIdx.x;", f"float r[{k}];",
               f"#pragma unroll\nfor (int j = 0; j < {k}; ++j) r[j] = x[t + j];",
               f"#pragma unroll\nfor (int s = 0; s < 4; ++s)\n#pragma unroll\n"
               f"  for (int j = 0; j < {k}; ++j) r[j] = r[j] * 0.5f + r[({k} - 1 - j)] * 0.25f;",
               "float acc = 0.0f;",
               f"#pragma unroll\nfor (int j = 0; j < {k}; ++j) acc += r[j];", "out[t] = acc;"]
    return b.case((block,), options=limit, expect="any", note=f"{k} live, {limit}, {block}")


# ---- what nvcc refuses ---------------------------------------------------------------------
SHARED_INITS = ("__shared__ float s = 1.0f;", "__shared__ int a[4] = {1, 2, 3, 4};",
                "__shared__ float s{};", "static __shared__ int s = 0;",
                "__shared__ float2 s = make_float2(0.0f, 0.0f);", "__shared__ double s(2.0);")
SHARED_FINE = ("__shared__ float s;", "static __shared__ int s;", "__shared__ volatile int s;",
               "__shared__ float2 s;")


def shared_init(rng: np.random.Generator, name: str) -> Case:
    """An initialiser on a __shared__ variable (nvcc: "initializer not allowed for __shared__
    variable"), and declarations without one, written by a thread and read by all."""
    bad = rng.random() < 0.6
    decl = pick(rng, SHARED_INITS if bad else SHARED_FINE)
    b = Builder(name, "shared_init")
    b.out("float", "out", 32)
    target = "s[0]" if "a[4]" in decl else ("s.x" if "float2" in decl else "s")
    var = "a" if "a[4]" in decl else "s"
    target = target.replace("s[0]", f"{var}[0]")
    b.body += [decl, f"if (threadIdx.x == 0) {target} = 5;", "__syncthreads();",
               f"out[threadIdx.x] = (float){target};"]
    return b.case((32,), expect="refuse" if bad else "ok", note=decl)


LDG_TYPES_OK = ("float4", "float2", "int4", "double2", "int", "double", "uchar4", "short2")
LDG_TYPES_BAD = ("float3", "int3")


def ldg(rng: np.random.Generator, name: str) -> Case:
    """__ldg on the types CUDA overloads it for, and on the ones it does not (float3: nvcc
    refuses)."""
    bad = rng.random() < 0.3
    t = pick(rng, LDG_TYPES_BAD if bad else LDG_TYPES_OK)
    comp = VECTORS[t][0]
    n = 32
    b = Builder(name, "ldg")
    x = b.buf(t, "x", _random_of(rng, np.uint8, n * size_of(t)))
    out = b.out(comp, "out", n * len(parts(t, "v")))
    b.body += ["int i = threadIdx.x;", f"{t} v = __ldg(&{x}[i]);", *_store_parts(t, "v", out, "i")]
    return b.case((n,), expect="refuse" if bad else "ok", note=f"__ldg {t}")


BAD_OPTIONS = (("--no-such-option",), ("-use-fast-math",), ("-ftz",), ("-maxrregcount",),
               ("--fmad=maybe",))
GOOD_OPTIONS = (("-lineinfo",), ("-O3",), ("-std=c++17",), ("-DSCALE=3",), ("-Xptxas", "-O2"),
                ("--restrict",), ("-ftz=false",), ("--prec-div=true",), ("-w",))


def options(rng: np.random.Generator, name: str) -> Case:
    """nvcc options PyCUDA passes on: ones nvcc takes, and ones it refuses (unknown, missing
    their value, a value it does not know)."""
    bad = rng.random() < 0.4
    opts = pick(rng, BAD_OPTIONS if bad else GOOD_OPTIONS)
    b = Builder(name, "options")
    b.out("int", "out", 64)
    scale = "SCALE" if "-DSCALE=3" in opts else "3"
    b.body.append(f"out[threadIdx.x] = threadIdx.x * {scale};")
    return b.case((64,), options=opts, expect="any" if bad else "ok", alone=bad,
                  note=" ".join(opts))


# ---- printf ---------------------------------------------------------------------------------
def printf_volume(rng: np.random.Generator, name: str) -> Case:
    """printf from many threads: a few lines (compared once sorted), a volume past the 1 MiB
    buffer a GPU gives printf (how many lines come out), more than 32 arguments (a GPU prints
    the first 32)."""
    kind = pick(rng, ("few", "few", "volume", "args"))
    b = Builder(name, "printf")
    b.out("int", "out", 1)
    if kind == "few":
        block = int(pick(rng, (4, 16, 32)))
        fmt = pick(rng, ('"t=%d v=%.3f\\n", threadIdx.x, threadIdx.x * 0.5f',
                         '"%5d|%-4x|%c\\n", threadIdx.x * 7, threadIdx.x, 65 + threadIdx.x',
                         '"%lld %u %e\\n", (long long)threadIdx.x << 40, threadIdx.x, '
                         '1e-3 * threadIdx.x',
                         '"%s:%g\\n", "row", 1.0 / (threadIdx.x + 1)'))
        b.body += [f"printf({fmt});", "out[0] = 1;"]
        return b.case((block,), printf="lines", note=f"printf {fmt[:30]}")
    if kind == "args":
        nargs = int(pick(rng, (31, 32, 33, 40)))
        fmt = " ".join(["%d"] * nargs)
        args = ", ".join(str(k) for k in range(nargs))
        b.body += [f'if (threadIdx.x == 0) printf("{fmt}\\n", {args});', "out[0] = 1;"]
        return b.case((32,), printf="lines", note=f"printf {nargs} args")
    per = int(pick(rng, (1, 4, 16, 64)))
    blocks = int(pick(rng, (8, 32, 64, 128)))
    b.body += [f"for (int k = 0; k < {per}; ++k) printf(\"b%d t%d k%d value %f\\n\", blockIdx.x, "
               "threadIdx.x, k, 0.25f * k);", "out[0] = 1;"]
    return b.case((256,), (blocks,), printf="count",
                  note=f"printf volume {256 * blocks * per} lines")


# ---- barriers, block-wide operations ----------------------------------------------------------
def barriers(rng: np.random.Generator, name: str) -> Case:
    """__syncthreads_count / _and / _or, and a shared-memory tree reduction of integers, over
    blocks of any size (2-D ones too)."""
    kind = pick(rng, ("count", "and", "or", "tree"))
    bx = int(pick(rng, (32, 48, 64, 96, 100, 128, 256)))
    by = int(pick(rng, (1, 1, 2, 3)))
    nt = bx * by
    grid = int(pick(rng, (1, 2, 3)))
    b = Builder(name, "barriers")
    x = b.buf("int", "x", rng.integers(-50, 50, nt * grid).astype(I32))
    out = b.out("int", "out", nt * grid, fill=-1)
    b.body += ["int t = threadIdx.y * blockDim.x + threadIdx.x;",
               "int i = blockIdx.x * blockDim.x * blockDim.y + t;", f"int v = {x}[i];"]
    if kind == "tree":
        p2 = 1 << (nt - 1).bit_length()
        b.body += [f"__shared__ int s[{p2}];", "s[t] = v;"]
        if p2 > nt:
            b.body.append(f"if (t < {p2 - nt}) s[t + {nt}] = 0;")
        b.body += ["__syncthreads();", f"for (int w = {p2 // 2}; w > 0; w >>= 1) {{",
                   "  if (t < w) s[t] += s[t + w];", "  __syncthreads();", "}",
                   f"{out}[i] = s[0] + t;"]
    else:
        fn = {"count": "__syncthreads_count", "and": "__syncthreads_and",
              "or": "__syncthreads_or"}[kind]
        thr = int(rng.integers(-60, 60))
        b.body.append(f"{out}[i] = {fn}(v > {thr});")
    return b.case((bx, by), (grid,), note=f"{kind} {bx}x{by}")


def launch_limits(rng: np.random.Generator, name: str) -> Case:
    """Launches at and past the limits: 1024 threads, 64 in z, 48 KiB of dynamic shared
    memory without the opt-in (and with it), static shared memory past 48 KiB (nvcc and
    ptxas refuse it)."""
    kind = pick(rng, ("block", "z", "dyn", "dyn_optin", "static"))
    b = Builder(name, "launch_limits")
    b.out("int", "out", 2048)
    if kind == "static":
        kb = int(pick(rng, (40, 48, 49, 64)))
        b.body += [f"__shared__ float big[{kb * 256}];", "big[threadIdx.x] = threadIdx.x;",
                   "__syncthreads();", f"out[threadIdx.x] = (int)big[{kb * 256 - 1} - "
                   "threadIdx.x] + (int)big[threadIdx.x];"]
        return b.case((32,), expect="refuse" if kb > 48 else "ok", alone=True,
                      note=f"static {kb} KiB")
    if kind in ("dyn", "dyn_optin"):
        kb = int(pick(rng, (32, 48, 49, 64, 100)))
        b.body += ["extern __shared__ float dyn[];", "dyn[threadIdx.x] = threadIdx.x;",
                   "__syncthreads();", "out[threadIdx.x] = (int)dyn[31 - threadIdx.x];"]
        attrs = (("MAX_DYNAMIC_SHARED_SIZE_BYTES", kb * 1024),) if kind == "dyn_optin" else ()
        over = kb > 48 and not attrs
        return b.case((32,), shared=kb * 1024, attrs=attrs, expect="launch" if over else "ok",
                      note=f"{kind} {kb} KiB")
    block = ((int(pick(rng, (512, 1024, 1025, 2048))), 1, 1) if kind == "block" else
             (4, 4, int(pick(rng, (32, 64, 65)))))
    nt = block[0] * block[1] * block[2]
    b.body.append("int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;")
    b.body.append("if (t < 2048) out[t] = t;")
    bad = nt > 1024 or block[2] > 64
    return b.case(block, expect="launch" if bad else "ok", note=f"block {block}")


def memcpy_async(rng: np.random.Generator, name: str) -> Case:
    """cooperative_groups::memcpy_async in both its forms (a byte count; element counts of
    destination and source), then wait()."""
    form = pick(rng, ("bytes", "counts", "aligned"))
    n = int(pick(rng, (64, 128, 256)))
    b = Builder(name, "memcpy_async")
    b.buf("float", "x", rng.standard_normal(n).astype(F32))
    b.out("float", "out", n)
    copy = {"bytes": f"cg::memcpy_async(block, buf, x, sizeof(float) * {n});",
            "counts": f"cg::memcpy_async(block, buf, {n}, x, {n});",
            "aligned": f"cg::memcpy_async(block, buf, x, cuda::aligned_size_t<16>(sizeof(float) "
                       f"* {n}));"}[form]
    src = ("#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n"
           "namespace cg = cooperative_groups;\n"
           f"extern \"C\" __global__ void {name}(const float* x, float* out)\n{{\n"
           "  cg::thread_block block = cg::this_thread_block();\n"
           f"  __shared__ __align__(16) float buf[{n}];\n  {copy}\n  cg::wait(block);\n"
           f"  for (int j = threadIdx.x; j < {n}; j += blockDim.x) out[j] = 2.0f * buf[({n} - 1"
           " - j)];\n}\n")
    return b.case((64,), source=src, no_extern_c=True, alone=True, note=f"memcpy_async {form}")


# ---- later families (cases past FIRST_ROUND; see schedule) ------------------------------------
FTZ_OPTIONS = ((), ("-ftz=true",), ("--use_fast_math",), ("-ftz=true", "-ftz=false"),
               ("-ftz=false", "--use_fast_math"))
#: single-precision operations a flush to zero changes (PTX .ftz: subnormal inputs and
#: results become sign-preserving zeros), with whether --use_fast_math makes them approximate
FTZ_EXPRS = {"a * b": False, "a + b": False, "a - b": False, "fmaf(a, b, c)": False,
             "__fmul_rn(a, b)": False, "(a == 0.0f) ? 1.0f : 2.0f": False,
             "(a < b) ? a : b": False, "(float)((double)a * 2.0)": False, "a * 1e30f": False,
             "sqrtf(a)": True, "__fdividef(a, b)": True, "c * c * c": False}
SUBNORMALS = np.array([1e-40, -1e-40, 1e-45, -3e-39, 1.1754942e-38, 5.877472e-39, 1e-38,
                       1.17549435e-38, 0.0, -0.0, 1e-20, -1e-20, 3e-20, 1.0, -2.5, 1e30],
                      np.float32)


def ftz_flush(rng: np.random.Generator, name: str) -> Case:
    """Single-precision arithmetic on subnormal inputs and with subnormal results, built
    with and without -ftz=true and --use_fast_math (a GPU flushes both to signed zero)."""
    expr = pick(rng, list(FTZ_EXPRS))
    options = pick(rng, FTZ_OPTIONS)
    fast = "--use_fast_math" in options
    n = 64
    b = Builder(name, "ftz_flush")
    vals = [rng.choice(SUBNORMALS, n) for _ in range(3)]
    xa, xb, xc = (b.buf("float", v, vals[k].astype(F32)) for k, v in enumerate("xyz"))
    approx = FTZ_EXPRS[expr] and fast
    out = b.out("float", "out", n, compare="ulp" if approx else "exact", tol=3 if approx else 0)
    b.body += ["int i = threadIdx.x;", f"float a = {xa}[i], b = {xb}[i], c = {xc}[i];",
               f"{out}[i] = {expr};", "(void)b; (void)c;"]
    return b.case((n,), options=options, note=f"{expr} {' '.join(options)}")


#: fast intrinsics, their arguments' domain and the special function unit's own documented
#: error (the emulator does the GPU's argument step; this is all that may be left)
FAST_INTRINSICS = {
    "__sinf(a)": ("turns", "abs", 2.0**-21.41 + 2.0**-24), "__cosf(a)": ("turns", "abs",
                                                                         2.0**-21.19 + 2.0**-24),
    "__expf(a)": ("exp", "ulp", 3), "__exp10f(a)": ("exp10", "ulp", 3),
    "__logf(a)": ("pos", "abs_rel", 3), "__log2f(a)": ("pos", "abs_rel", 3),
    "__log10f(a)": ("pos", "abs_rel", 3), "__powf(a, b)": ("pow", "ulp", 8),
    "__fdividef(a, b)": ("div", "ulp", 3),
}


def fast_intrinsics(rng: np.random.Generator, name: str) -> Case:
    """__sinf, __expf, ... over wide arguments (|x| to 1e4 for sine and cosine), compared
    within the special function unit's own error only: the argument's rounding (to turns,
    by log2(e)), which makes most of a GPU's error at large |x|, must be the GPU's."""
    expr = pick(rng, list(FAST_INTRINSICS))
    dom, mode, tol = FAST_INTRINSICS[expr]
    options = pick(rng, ((), ("-ftz=true",), ("--use_fast_math",)))
    n = 128
    if dom == "turns":
        x = np.where(rng.random(n) < 0.5, rng.uniform(-3.2, 3.2, n),
                     rng.uniform(-1e4, 1e4, n))
    elif dom == "exp":
        x = rng.uniform(-87, 88, n)
    elif dom == "exp10":
        x = rng.uniform(-37, 38, n)
    elif dom == "pos":
        x = np.where(rng.random(n) < 0.5, rng.uniform(0.5, 2, n), np.exp(rng.uniform(-80, 80, n)))
    elif dom == "pow":
        x = np.exp(rng.uniform(-4, 4, n))
    else:
        x = rng.standard_normal(n) * 1e3
    y = rng.uniform(-4, 4, n) if dom == "pow" else np.where(
        rng.random(n) < 0.2, rng.uniform(1.01, 1.99, n) * 2.0**126,
        rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n))
    b = Builder(name, "fast_intrinsics")
    xa = b.buf("float", "x", x.astype(F32))
    xb = b.buf("float", "y", y.astype(F32))
    if mode == "abs_rel":  # documented: absolute on [0.5, 2], in ulps elsewhere
        mode, tol = ("abs", 2.0**-21.41 * 2) if dom == "pos" and (x < 2).all() else ("ulp", tol)
    out = b.out("float", "out", n, compare=mode, tol=tol)
    b.body += ["int i = blockIdx.x * blockDim.x + threadIdx.x;",
               f"float a = {xa}[i], b = {xb}[i];", f"{out}[i] = {expr};", "(void)b;"]
    return b.case((64,), (2,), options=options, note=f"{expr} {' '.join(options)}")


#: operand types for the warp intrinsics, and what C++ makes of each against CUDA's
#: declarations: "promote" (to int), "exact" (one of the shuffle types), "convert" (an
#: arithmetic conversion), "none" (no conversion: a vector, a struct, a pointer)
WARP_TYPES = {"bool": "promote", "char": "promote", "signed char": "promote",
              "unsigned char": "promote", "short": "promote", "unsigned short": "promote",
              "int": "exact", "unsigned int": "exact", "long": "exact", "unsigned long": "exact",
              "long long": "exact", "unsigned long long": "exact", "size_t": "exact",
              "float": "exact", "double": "exact", "enum": "promote", "float2": "none",
              "int2": "none", "uint4": "none", "struct": "none", "int*": "none"}
WARP_FUNCS = ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
              "__match_any_sync", "__match_all_sync", "__reduce_add_sync", "__reduce_min_sync",
              "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync")


def warp_accepts(fn: str, t: str) -> bool:
    """Whether nvcc takes ``t`` for ``fn`` (the Programming Guide's declarations and C++'s
    overload resolution): shuffles and matches take any arithmetic type, __reduce_add/min/
    max_sync (int and unsigned) only what promotes to int or is one of the two (a float or
    a 64-bit value converts to both: ambiguous), __reduce_and/or/xor_sync (unsigned) any
    arithmetic type."""
    kind = WARP_TYPES[t]
    if kind == "none":
        return False
    if fn in ("__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync"):
        return kind == "promote" or t in ("int", "unsigned int")
    return True


def warp_operands(rng: np.random.Generator, name: str) -> Case:
    """Every warp intrinsic with every kind of operand type: what nvcc takes (results
    compared) and what it refuses (no overload, or two that fit)."""
    fn, t = pick(rng, WARP_FUNCS), pick(rng, list(WARP_TYPES))
    b = Builder(name, "warp_operands")
    x = b.buf("int", "x", rng.integers(-100, 100, 32).astype(I32))
    out = b.out("long long", "out", 32, fill=9)
    ctype = {"enum": f"{name}_e", "struct": f"{name}_s", "size_t": "size_t"}.get(t, t)
    if t == "enum":
        b.pre.append(f"enum {name}_e {{ {name}_A = 1, {name}_B = 7 }};")
    if t == "struct":
        b.pre.append(f"struct {name}_s {{ int a; float f; }};")
    make = {"float2": f"make_float2((float){x}[i], 1.0f)", "int2": f"make_int2({x}[i], 2)",
            "uint4": f"make_uint4({x}[i], 1u, 2u, 3u)", "struct": f"{{{x}[i], 1.0f}}",
            "int*": f"(int*)({x} + (i & 3))", "enum": f"({ctype})({x}[i] & 7)",
            "bool": f"({x}[i] > 0)"}.get(t, f"({ctype}){x}[i]")
    m = f"{FULL:#x}u"
    call = {"__shfl_sync": f"{fn}({m}, v, (i + 3) & 31)", "__shfl_up_sync": f"{fn}({m}, v, 2)",
            "__shfl_down_sync": f"{fn}({m}, v, 5)", "__shfl_xor_sync": f"{fn}({m}, v, 6)",
            "__match_all_sync": f"{fn}({m}, v, &p)"}.get(fn, f"{fn}({m}, v)")
    ok = warp_accepts(fn, t)
    use = "(long long)r" if ok else "0"
    b.body += ["int i = threadIdx.x;", f"{ctype} v = {make};", "int p = 0;",
               f"auto r = {call};", f"{out}[i] = {use} + p * 1000;", "(void)r;"]
    return b.case((32,), expect="ok" if ok else "refuse", note=f"{fn} {t}")


def template_bounds(rng: np.random.Generator, name: str) -> Case:
    """Templated kernels with __launch_bounds__ where CUDA lets it be written (after void,
    before __global__, between them), a bound of the template's value, an expression of it
    or a number, with or without a minimum of blocks; launched at the bound or past it."""
    where = pick(rng, ("after_void", "before_global", "between"))
    n = int(pick(rng, (32, 64, 128)))
    expr, bound = pick(rng, (("N", n), ("N * 2", n * 2), ("256", 256)))
    minb = pick(rng, ("", ", 2"))
    lb = f"__launch_bounds__({expr}{minb})"
    head = {"after_void": f"__global__ void {lb} {name}",
            "before_global": f"{lb} __global__ void {name}",
            "between": f"__global__ {lb} void {name}"}[where]
    block = int(pick(rng, (bound, bound // 2, bound * 2 if bound * 2 <= 1024 else bound)))
    t = pick(rng, ("float", "int"))
    b = Builder(name, "template_bounds")
    b.buf(t, "x", (rng.integers(-99, 99, 1024)).astype(DTYPE[t]))
    b.out(t, "out", 1024)
    src = (f"template <typename T, int N>\n{head}(const T* x, T* out)\n{{\n"
           "  int i = threadIdx.x;\n  out[i] = x[i] * (T)2 + (T)N;\n}\n"
           f"template __global__ void {name}<{t}, {n}>(const {t}*, {t}*);\n")
    code = {"float": "f", "int": "i"}[t]
    sym = _mangle(name, f"{code}Li{n}", "PKT_PS0_")
    return b.case((block,), source=src, symbol=sym, no_extern_c=True,
                  expect="launch" if block > bound else "ok",
                  note=f"{where} {lb} block {block}")


def shared_rows(rng: np.random.Generator, name: str) -> Case:
    """Rows and planes of 2-D and 3-D shared arrays (buf[i], cube[i][j]) passed to templates
    (by pointer and by reference to an array) and filled by both forms of
    cooperative_groups::memcpy_async."""
    dims = pick(rng, ((4, 32), (2, 4, 16), (8, 8)))
    fill = pick(rng, ("loop", "bytes", "counts"))
    total = int(np.prod(dims))
    b = Builder(name, "shared_rows")
    b.buf("float", "x", rng.integers(-9, 9, total).astype(F32))
    b.out("float", "out", dims[0])
    ext = "".join(f"[{d}]" for d in dims)
    inner = int(np.prod(dims[1:]))
    last = dims[-1]
    row = "buf[t]" if len(dims) == 2 else "buf[t][1]"
    by_ref = rng.random() < 0.5
    helper = (f"template <class T, int M>\n__device__ T {name}_sum(const T (&row)[M])\n"
              f"{{ T s = 0; for (int k = 0; k < M; ++k) s += row[k] * (k + 1); return s; }}\n"
              if by_ref else
              f"template <class T>\n__device__ T {name}_sum(const T* row)\n"
              f"{{ T s = 0; for (int k = 0; k < {last}; ++k) s += row[k] * (k + 1); return s; }}\n")
    call = f"{name}_sum({row})"
    if fill == "loop":
        flat = " ".join(f"[(j / {int(np.prod(dims[k + 1:]))}) % {dims[k]}]"
                        for k in range(len(dims)))
        copy = (f"  for (int j = threadIdx.x; j < {total}; j += blockDim.x) buf{flat} = x[j];\n"
                "  __syncthreads();\n")
    else:
        first = "buf[s]" if len(dims) == 2 else "buf[s][0]"
        count = last if len(dims) > 2 else inner
        per = (f"cg::memcpy_async(block, {first}, x + s * {inner}, sizeof(float) * {count});"
               if fill == "bytes" else
               f"cg::memcpy_async(block, {first}, {count}, x + s * {inner}, {count});")
        if len(dims) > 2:
            per = (f"for (int q = 0; q < {dims[1]}; ++q) " + per.replace("[0]", "[q]")
                   .replace(f"x + s * {inner}", f"x + s * {inner} + q * {last}"))
        copy = (f"  cg::thread_block block = cg::this_thread_block();\n"
                f"  for (int s = 0; s < {dims[0]}; ++s) {per}\n  cg::wait(block);\n")
    src = ("#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n"
           "namespace cg = cooperative_groups;\n" + helper +
           f"extern \"C\" __global__ void {name}(const float* x, float* out)\n{{\n"
           f"  __shared__ __align__(16) float buf{ext};\n" + copy +
           f"  int t = threadIdx.x;\n  if (t < {dims[0]}) out[t] = {call};\n}}\n")
    return b.case((32,), source=src, no_extern_c=True, alone=True,
                  note=f"rows {dims} {fill} {'ref' if by_ref else 'ptr'}")


def global_bounds(rng: np.random.Generator, name: str) -> Case:
    """A read before a buffer's start (``x[i - d]``, a halo without its guard), a read or
    write a few elements past its end (a guard with ``<=``), through a scalar or a vector
    type, or the same access in bounds. A GPU may fault (an illegal address), or read or
    write a neighbouring allocation unseen (compute-sanitizer's memcheck reports it): only a
    GPU says which, so the values the stray access reads are not compared."""
    kind = pick(rng, ("before", "before", "past_read", "past_write", "inside"))
    vt = pick(rng, ("float", "float", "int", "double", "float2", "float4"))
    comp, w, _ = VECTORS[vt]
    d = int(pick(rng, (1, 2, 3, 4, 8, 16)))
    block, grid = int(pick(rng, (32, 64))), int(pick(rng, (1, 2)))
    n = block * grid + int(pick(rng, (0, 1, 3)))  # elements of vt
    b = Builder(name, "global_bounds")
    x = b.buf(comp, "x", _random_of(rng, DTYPE[comp], n * w))
    nn = b.scalar("int", "n", n)
    got = b.out(comp, "got", n * w, compare="none")  # the stray value: not compared
    y = b.out(comp, "y", n * w)
    xv = f"reinterpret_cast<const {vt}*>({x})"
    yv = f"reinterpret_cast<{vt}*>({y})"
    b.body += ["int i = blockIdx.x * blockDim.x + threadIdx.x;", f"if (i >= {nn}) return;"]
    at = {"before": f"i - {d}", "past_read": f"i + {d}", "inside": "i"}.get(kind, "i")
    if kind == "past_write":  # element n + d - 1 of y's n: d - 1 past its last
        b.body.append(f"{yv}[i] = {xv}[i];")
        b.body.append(f"if (i == 0) {yv}[{nn} + {d - 1}] = {xv}[0];")
    else:
        b.body.append(f"{vt} v = {xv}[{at}];")
        b.body += _store_parts(vt, "v", got, "i")
        b.body.append(f"{yv}[i] = {xv}[i];")
    expect = "ok" if kind == "inside" else "any"
    return b.case((block,), (grid,), expect=expect, note=f"{kind} {vt} d={d} n={n}")


#: Each family with its share of the corpus.
FAMILIES: dict[str, tuple[Callable[[np.random.Generator, str], Case], int]] = {
    "vec_global": (vec_global, 14), "vec_rows": (vec_rows, 4), "vec_shared": (vec_shared, 8),
    "shared_layout": (shared_layout, 3), "carve_dynamic": (carve_dynamic, 8),
    "misaligned_pointer": (misaligned_pointer, 4), "warp_shuffle": (warp_shuffle, 10),
    "warp_vote": (warp_vote, 5), "warp_reduce": (warp_reduce, 6),
    "shuffle_types": (shuffle_types, 3), "atomics": (atomics, 10), "atomic_cas": (atomic_cas, 3),
    "int_edges": (int_edges, 10), "float_edges": (float_edges, 10),
    "math_functions": (math_functions, 12), "templates": (templates, 4),
    "launch_bounds": (launch_bounds, 2), "registers": (registers, 2),
    "shared_init": (shared_init, 3), "ldg": (ldg, 2), "options": (options, 2),
    "printf": (printf_volume, 3), "barriers": (barriers, 5), "launch_limits": (launch_limits, 2),
    "memcpy_async": (memcpy_async, 1),
}
#: Families added after a first round of the corpus was measured on a GPU: they take the
#: cases past FIRST_ROUND, so the first round's cases keep their sources (and a truth file
#: recorded for them stays valid); a corpus of FIRST_ROUND cases or fewer has none of them.
LATER_FAMILIES: dict[str, tuple[Callable[[np.random.Generator, str], Case], int]] = {
    "ftz_flush": (ftz_flush, 24), "fast_intrinsics": (fast_intrinsics, 24),
    "warp_operands": (warp_operands, 20), "template_bounds": (template_bounds, 12),
    "shared_rows": (shared_rows, 12), "global_bounds": (global_bounds, 12),
}
FIRST_ROUND = 2400
FIRST_FAMILIES = dict(FAMILIES)
FAMILIES.update(LATER_FAMILIES)
SHORT = {f: "".join(w[0] for w in f.split("_")) + f[-1] for f in FAMILIES}


def _interleave(families: dict, count: int) -> list[str]:
    """The family of each of ``count`` cases: the weights interleaved, in a fixed order."""
    total = sum(w for _, w in families.values())
    out, credit = [], dict.fromkeys(families, 0.0)
    for _ in range(count):
        for f, (_, w) in families.items():
            credit[f] += w / total
        best = max(credit, key=lambda f: credit[f])
        credit[best] -= 1
        out.append(best)
    return out


def schedule(count: int) -> list[str]:
    """The family of each of ``count`` cases: the first families' weights interleaved up to
    FIRST_ROUND, then every family's."""
    first = _interleave(FIRST_FAMILIES, min(count, FIRST_ROUND))
    return first + _interleave(FAMILIES, max(count - FIRST_ROUND, 0))


def case(index: int, family: str, seed: int = SEED) -> Case:
    """Case number ``index`` (of family ``family``), from its own random stream."""
    rng = np.random.default_rng([seed, index, sum(map(ord, family))])
    return FAMILIES[family][0](rng, f"{SHORT[family]}{index:05d}")


def corpus(count: int = 2400, seed: int = SEED, families: tuple[str, ...] = ()) -> list[Case]:
    """``count`` generated cases (:func:`schedule`; only of ``families``, when given)."""
    return [case(i, f, seed) for i, f in enumerate(schedule(count))
            if not families or f in families]
