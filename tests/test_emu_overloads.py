"""CUDA's overload sets on the emulator, no more and no less: the atomics with their block
and system scopes (sm_20, sm_32 and sm_60 atomic_functions.h) and the cache-hinted loads
(sm_32_intrinsics.h), as nvcc builds and refuses them on an H200; and a block over the
kernel's __launch_bounds__ refused as PyCUDA refuses it (setting the block shape)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelab import emu

SCOPES = ("", "_block", "_system")
#: What nvcc accepts for each atomic (the same for every scope), as the H200 run found.
ACCEPTED = {
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


def test_every_atomic_in_every_scope_runs_on_each_type_cuda_has_it_for():
    lines, n = [], 0
    for op, types in ACCEPTED.items():
        for t in types:
            for s in SCOPES:
                lines.append(f"{{ {t}* p = ({t}*)(buf + {n * 8}); "
                             f"out[{n}] = (double){op}{s}(p, ({t})3); }}")
                n += 1
    src = ("__global__ void k(char* buf, double* out)\n{\n  if (threadIdx.x == 0) {\n"
           + "\n".join(lines) + "\n  }\n}\n")
    buf, out = np.zeros(n * 8, np.uint8), np.full(n, -1.0)
    emu.SourceModule(src).get_function("k")(emu.InOut(buf), emu.Out(out), block=(32, 1, 1))
    assert (out == 0).all()  # each returned the old value, 0
    kept = {"atomicMin", "atomicAnd"}  # min(0, 3) and 0 & 3 leave 0 as it was; the rest write
    wrote = [op not in kept for op, types in ACCEPTED.items() for _ in types for _ in SCOPES]
    assert ((buf.view(np.uint64) != 0) == np.array(wrote)).all()


@pytest.mark.parametrize("stmt", [
    "atomicAdd_block((long long*)p, 1ll);",  # CUDA has no atomicAdd for long long
    "atomicSub_system((float*)p, 1.0f);",
    "atomicExch((double*)p, 1.0);",
    "atomicInc_block((int*)p, 1);",
    "float3 v = __ldg((const float3*)p); (void)v;",
    "int3 v = __ldcg((const int3*)p); (void)v;",
])
def test_what_cuda_has_no_overload_for_is_refused_at_its_line(stmt: str):
    src = f"__global__ void k(char* p)\n{{\n  {stmt}\n}}\n"
    refused = r"kernel\.cu:3:\d+: error: (no matching function for call|invalid conversion)"
    with pytest.raises(emu.CompileError, match=refused):
        emu.SourceModule(src)


def test_cache_hinted_loads_and_stores_take_cudas_types():
    src = r"""
    __global__ void k(const float4* a, const double2* b, const uchar4* c, float* out)
    {
      float4 x = __ldg(&a[0]);
      double2 y = __ldcs(&b[0]);
      uchar4 z = __ldlu(&c[0]);
      __stcg(&out[0], x.w + (float)y.y + z.w);
      __stwt(&out[1], 1);
    }
    """
    a = np.arange(4, dtype=np.float32)
    b = np.array([5.0, 6.0])
    c = np.array([1, 2, 3, 4], np.uint8)
    out = np.zeros(2, np.float32)
    emu.SourceModule(src).get_function("k")(emu.In(a), emu.In(b), emu.In(c), emu.Out(out),
                                            block=(1, 1, 1))
    assert out.tolist() == [3.0 + 6.0 + 4.0, 1.0]


def test_a_block_over_the_launch_bounds_is_an_invalid_block_shape():
    src = ("__global__ void __launch_bounds__(128) k(int* out)\n{\n"
           "  out[threadIdx.x] = 1;\n}\n")
    f = emu.SourceModule(src).get_function("k")
    out = np.zeros(256, np.int32)
    f(emu.Out(out), block=(128, 1, 1))
    with pytest.raises(emu.LogicError, match=r"cuFuncSetBlockShape failed: invalid argument.*"
                                             r"__launch_bounds__\(128\).*has 256"):
        f(emu.Out(out), block=(256, 1, 1))
