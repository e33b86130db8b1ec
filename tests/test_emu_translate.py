"""The source transform keeps every learner line in place and finds what it must (no g++)."""

from __future__ import annotations

import pytest
from support.emu_samples import TILED_MATMUL

from tilelab.emu.errors import CompileError, UnsupportedConstruct
from tilelab.emu.kernels import find_kernels, param_name
from tilelab.emu.lexer import mask
from tilelab.emu.translate import translate

TRICKY = r"""#include <stdio.h>
#include "cuda_runtime.h"
// __shared__ float in_a_comment[4]; __shfl_sync
#define N 8
extern __shared__ float dyn[];
__global__ void __launch_bounds__(256, 2) k(const float* __restrict__ a,
                                           float *b, unsigned int n, int)
{
    __shared__ float t[N][N + 1],
                     u[N];
    __shared__ int count;
    const char* s = "__shared__ float fake[3]; <<<";
    #pragma unroll 4
    for (int i = 0; i < N; ++i) t[i][threadIdx.x] = a[i];
    u[0] = sizeof(t[0]) + dyn[1];
    b[0] = t[1][2] + u[0] + count;
}
"""


def _user_part(code: str) -> list[str]:
    lines = code.split("\n")
    start = lines.index('#line 1 "kernel.cu"') + 1
    return lines[start:]


@pytest.mark.parametrize("analysis", [False, True])
def test_lines_stay_in_place(analysis):
    user = _user_part(translate(TRICKY, analysis=analysis).code)
    src = TRICKY.split("\n")
    assert user[len(src)] == "}"  # right after the learner's last line, extern "C" closes
    changed = []
    for n, text in enumerate(src):
        if user[n] != text:
            changed.append(n + 1)
    # includes, shared declarations, #pragma unroll, lines indexing shared arrays (checked)
    expect = {1, 2, 5, 9, 10, 11, 13, 14, 15, 16}
    assert set(changed) == expect
    assert user[12].strip() == "" and user[0] == "" and user[1] == ""


def test_shared_declarations_fast_mode():
    user = _user_part(translate(TRICKY).code)
    assert user[8].strip().startswith("static TL_SHARED float t[N][N + 1], u[N];")
    assert user[9].strip() == ""  # the continuation line of the declaration, emptied
    assert user[10].strip() == "static TL_SHARED int count;"
    assert user[4].startswith("static float* dyn; static tl_emu::DynReg tl_reg_dyn(dyn")
    assert 'const char* s = "__shared__ float fake[3]; <<<";' in user[11]


def test_analysis_mode_rewrites_uses_not_sizeof_or_strings():
    user = _user_part(translate(TRICKY, analysis=True).code)
    assert "tl_reg_t(t, \"t\")" in user[8] and "tl_reg_u(u, \"u\")" in user[8]
    assert 'tl_emu::sh(t, "t", __LINE__)[i][threadIdx.x] = a[i]' in user[13]
    assert "sizeof(t[0])" in user[14] and 'tl_emu::shp(dyn, "dyn", __LINE__)[1]' in user[14]
    assert "fake[3]" in user[11] and "count;" in user[15]  # scalars are not instrumented


def test_kernels_and_parameter_names():
    (k,) = find_kernels(mask(TRICKY))
    assert k.name == "k" and k.line == 6
    assert k.params == ("const float* __restrict__ a", "float *b", "unsigned int n", "int")
    assert k.names == ("a", "b", "n", "#3")
    assert param_name("unsigned n", 0) == "n" and param_name("float4* v", 1) == "v"
    assert [x.name for x in find_kernels(mask(TILED_MATMUL))] == ["matmul_tiled"]


def test_templates_and_prototypes_are_not_entry_points():
    src = ("template <int T> __global__ void t(float* x) {}\n"
           "__global__ void proto(int);\n__global__ void proto(int n) {}\n")
    assert [k.name for k in find_kernels(mask(src))] == ["proto"]


def test_function_scope_shared_names_are_scoped():
    src = ("__global__ void a(float* tile) { tile[0] = 1; }\n"
           "__global__ void b() { __shared__ float tile[4]; tile[0] = 2; }\n"
           "__global__ void c(float* tile) { tile[1] = 3; }\n")
    user = _user_part(translate(src, analysis=True).code)
    assert "tile[0] = 1" in user[0] and "tile[1] = 3" in user[2]
    assert 'tl_emu::sh(tile, "tile", __LINE__)[0] = 2' in user[1]


def test_include_checks_ignore_comments_and_catch_tricks():
    translate("// #include </etc/passwd>\n/* #include \"x\" */\n__global__ void k() {}\n")
    for src in ('#define F "/etc/passwd"\n#include F\n', '%:include "x.h"\n',
                '#  include \\\n  "/etc/hosts"\n', '#import "x.h"\n'):
        with pytest.raises(CompileError, match="is not allowed"):
            translate(src)


def test_unsupported_in_macro_is_found_but_not_in_comments():
    translate("// __shfl(v, 0);\n__global__ void k() { /* asm(\"x\"); */ }\n")
    with pytest.raises(UnsupportedConstruct, match="__shfl without _sync"):
        translate("#define SYNC __shfl(v, 0)\n__global__ void k() { SYNC; }\n")
    with pytest.raises(UnsupportedConstruct, match="half precision"):
        translate("#include <cuda_fp16.h>\n")
