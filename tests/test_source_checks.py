"""Sources are vetted before any compiler sees them."""

from __future__ import annotations

import pytest

from tilelab.grading.source_checks import (
    MAX_SOURCE_BYTES,
    SourceRejected,
    check_signature,
    parameter_types,
    validate_source,
)

OK = "__global__ void k(float* a) { a[0] = 1.0f; }\n"


def test_plain_source_passes():
    assert validate_source(OK) == OK
    assert validate_source(OK.encode()) == OK
    assert validate_source("#include <stdio.h>\n" + OK)


@pytest.mark.parametrize("inc", ['"/etc/passwd"', "</etc/passwd>", '"../solutions/x.cu"',
                                 "<iostream>"])
def test_includes_outside_the_allowlist_are_rejected_without_reading(inc):
    with pytest.raises(SourceRejected, match="line 2: #include") as e:
        validate_source("// kernel\n#include " + inc + "\n" + OK)
    assert "root:" not in str(e.value)


def test_non_utf8_and_nul_and_empty_and_huge():
    with pytest.raises(SourceRejected, match="not valid UTF-8"):
        validate_source(b"__global__ void k() {}\xff\xfe")
    with pytest.raises(SourceRejected, match="NUL"):
        validate_source(OK + "\x00")
    with pytest.raises(SourceRejected, match="empty"):
        validate_source("  \n")
    with pytest.raises(SourceRejected, match="more than"):
        validate_source(b"/" * (MAX_SOURCE_BYTES + 1))


@pytest.mark.parametrize(
    "trick",
    [
        '#define F "/etc/passwd"\n#include F\n',  # a macro names the file
        '#inc\\\nlude "/etc/passwd"\n',  # a directive split by a backslash-newline
        '#include \\\n"/etc/passwd"\n',
        '%:include "/etc/passwd"\n',  # the digraph of #
        '#include_next </etc/passwd>\n',
        '#embed "/etc/passwd"\n',
    ],
)
def test_includes_that_hide_their_target_are_rejected(trick):
    with pytest.raises(SourceRejected, match="is not allowed") as e:
        validate_source("// kernel\n" + trick + OK)
    assert "root:" not in str(e.value)  # the file was never read


SIG = "__global__ void k(const float* A, float* C, int M)"


@pytest.mark.parametrize(
    "kernel",
    [
        "__global__ void k(const float* A, float* C, int M) {}",
        "__global__ void k(const float *__restrict__ A, float * __restrict__ C, const int M) {}",
        "extern \"C\" __global__ void __launch_bounds__(256) k(float A[], float* C, int M) {}",
        "#define K k\n__global__ void K(double* A, int M) {}",  # not found by name: compiler's job
    ],
)
def test_signatures_that_launch_the_same_way_pass(kernel):
    check_signature(kernel, "k", SIG)


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ("__global__ void k(const double* A, float* C, int M) {}", "parameter 1 .* is double\\*"),
        ("__global__ void k(const float* A, float* C, float M) {}", "parameter 3 .* is float,"),
        ("__global__ void k(const float* A, float* C) {}", "takes 2 parameters, .* passes 3"),
        ("__global__ void kk(const float* A, float* C, int M) {}", "no kernel named 'k'.*'kk'"),
    ],
)
def test_wrong_signatures_and_names_are_named(kernel, message):
    with pytest.raises(SourceRejected, match=message) as e:
        check_signature(kernel, "k", SIG)
    assert "Declare it exactly as given" in str(e.value) or "fixes the name" in str(e.value)


def test_parameter_types():
    assert parameter_types(["const float* __restrict__ A", "int M", "float B[]"]) == [
        "float*",
        "int",
        "float*",
    ]


def test_an_include_behind_a_comment_is_still_an_include():
    # comments become spaces before directives are read: this one opens /etc/passwd
    with pytest.raises(SourceRejected, match="line 2: #include of '/etc/passwd'"):
        validate_source('// kernel\n/* a comment */ #include "/etc/passwd"\n' + OK)
    assert validate_source("/* stdio */ #include <stdio.h>\n" + OK)


# The compilers read a BOM, CR, CRLF, form feed and vertical tab their own way; the scan
# reads the very text they compile (tilelab.emu.source), on both backends.
HIDDEN_INCLUDES = {
    "form feed before #": '\f#include "/etc/passwd"\n',
    "vertical tab before #": '\v#include "/etc/passwd"\n',
    "form feed after #": '#\finclude "/etc/passwd"\n',
    "lone CR ends a // comment": '// note\r#include "/etc/passwd"\n',
    "CRLF": '// a\r\n#include "/etc/passwd"\r\n',
    "BOM": '\ufeff#include "/etc/passwd"\n',
    "BOM then form feed": '\ufeff\f\v#include "/etc/passwd"\n',
}


@pytest.mark.parametrize("trick", HIDDEN_INCLUDES.values(), ids=HIDDEN_INCLUDES.keys())
def test_an_include_hidden_by_blanks_or_line_ends_is_refused_on_both_backends(trick):
    from tilelab.emu.errors import CompileError
    from tilelab.emu.translate import translate

    with pytest.raises(SourceRejected, match="is not allowed"):
        validate_source(trick + OK)
    with pytest.raises(CompileError, match="is not allowed"):
        translate(trick + OK)


def test_the_text_compiled_is_the_text_scanned():
    text = validate_source("\ufeff// a\r#include <cstdio>\r\n\f" + OK)
    assert text == "// a\n#include <cstdio>\n " + OK
    assert "\r" not in text and "\ufeff" not in text


def test_one_include_allow_list():
    from tilelab.emu.checks import ALLOWED_INCLUDES
    from tilelab.grading.source_checks import ALLOWED_INCLUDES as GRADER

    # one list by design: the grader's is the emulator's own object, never a copy
    assert GRADER is ALLOWED_INCLUDES
    assert validate_source("#include <cassert>\n" + OK)


ADVERSARIAL = {  # each near the size cap; every scan of them must stay linear
    "__global__ tokens inside #if 0": "#if 0\n" + "__global__ " * 22000 + "\n#endif\n",
    "__shared__ tokens": "__shared__ " * 22000,
    "unclosed parentheses after 63 kernels": "__global__ void f(" * 63 + "x" * 240000,
    "a directive continued over 60,000 lines": "#define X \\\n" + "a \\\n" * 60000,
    "line splices after slashes": "/\\\n" * 80000,
    "braces": "{" * 240000,
}


@pytest.mark.slow
@pytest.mark.timeout(60)  # a guard against a hang: each scan takes well under a second
@pytest.mark.parametrize("src", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_scans_of_adversarial_sources_end(src):
    from tilelab.emu.errors import CompileError
    from tilelab.emu.translate import translate

    sig = "__global__ void k(float* a)"
    try:
        check_signature(validate_source(src), "k", sig)
    except SourceRejected as exc:
        assert "more than" in str(exc) or "no kernel" in str(exc)
    with pytest.raises(CompileError) if "more than" in _refusal(src) else _nothing():
        translate(src)


def _refusal(src: str) -> str:
    try:
        validate_source(src)
    except SourceRejected as exc:
        return str(exc)
    return ""


def _nothing():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.parametrize("name", ["TILELAB_ANALYSIS", "TL_SHARED", "tl_emu", "tilelab_launch"])
def test_a_source_naming_the_emulators_own_macros_is_refused(name):
    from tilelab.emu.errors import CompileError
    from tilelab.emu.translate import translate

    src = f"#ifdef {name}\n#define PAD 1\n#else\n#define PAD 0\n#endif\n" + OK
    with pytest.raises(SourceRejected, match=f"line 1: `{name}` is a name of the CPU emulator"):
        validate_source(src)
    with pytest.raises(CompileError, match="build whose output is checked"):
        translate(src)
    assert validate_source("// TILELAB_ANALYSIS in a comment is fine\n" + OK)


@pytest.mark.parametrize(("hidden", "line", "what", "emulator_too"), [
    ("int x = tl_\\\nemu::g_nstats;", 2, "`tl_emu` is a name of the CPU emulator", True),
    ("int x = TILELAB_\\   \nANALYSIS;", 2, "`TILELAB_ANALYSIS` is a name of the CPU emulator",
     True),
    ("#define N(a, b) a##b\nint x = N(tl_, emu)::g_nstats;", 2, r"token pasting \(`##`\)",
     False),
    ("#define N(a, b) a %:%: b\nint x = N(tl_, emu)::g_nstats;", 2,
     r"token pasting \(`%:%:`\)", False),
])
def test_a_name_of_the_emulators_built_by_a_splice_or_a_paste_is_refused(
        hidden, line, what, emulator_too):
    from tilelab.emu.errors import CompileError
    from tilelab.emu.translate import translate

    src = "// a kernel\n" + hidden + "\n" + OK
    with pytest.raises(SourceRejected, match=f"line {line}: {what}"):
        validate_source(src)
    if emulator_too:  # a learner's own run on the emulator refuses the name itself
        with pytest.raises(CompileError, match=what):
            translate(src)
    assert validate_source('// a ## in a comment\n#define MSG "## in a string"\n' + OK)


# ------------------------------------------------ the graded subset (one allow-list)

NAIVE_BODY = (
    "__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N,"
    " int K)\n{\n    int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (row < M && col < N) {\n        float acc = 0.0f;\n"
    "        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
    "        C[row * N + col] = acc;\n    }\n}\n"
)


def _with(old: str, new: str) -> str:
    assert old in NAIVE_BODY
    return NAIVE_BODY.replace(old, new)


SHARED = "__shared__ float t[32][33];"

# construct -> (source, what the refusal names)
OUTSIDE = {
    "#ifdef __CUDA_ARCH__": ("#ifdef __CUDA_ARCH__\n#define STRIDE 1\n#else\n#define STRIDE 2\n"
                             "#endif\n" + NAIVE_BODY, "__CUDA_ARCH__"),
    "#ifdef __SANITIZE_THREAD__": ("#ifdef __SANITIZE_THREAD__\n#define PAD 1\n#endif\n"
                                   + NAIVE_BODY, "__SANITIZE_THREAD__"),
    "#if defined(__GNUC__)": ("#if defined(__GNUC__) && !defined(__NVCC__)\n#endif\n"
                              + NAIVE_BODY, "__GNUC__"),
    "#if __has_include": ("#if __has_include(<sanitizer/tsan_interface.h>)\n#endif\n"
                          + NAIVE_BODY, "__has_include"),
    "#ifdef __clang__": ("#ifdef __clang__\n#endif\n" + NAIVE_BODY, "__clang__"),
    "a macro naming __CUDACC__": ("#define ON_GPU __CUDACC__\n" + NAIVE_BODY, "__CUDACC__"),
    "#define __CUDA_ARCH__": ("#define __CUDA_ARCH__ 900\n" + NAIVE_BODY, "__CUDA_ARCH__"),
    "clock64 timing": (_with("float acc = 0.0f;", "long long t0 = clock64(); float acc = 0.0f;"),
                       "clock64"),
    "clock timing": (_with("float acc = 0.0f;", "int t0 = clock(); float acc = 0.0f;"),
                     "clock"),
    "%globaltimer": (_with("float acc = 0.0f;", 'unsigned long long t; asm volatile('
                           '"mov.u64 %0, %%globaltimer;" : "=l"(t)); float acc = 0.0f;'),
                     "asm"),
    "no_sanitize_thread": ("__device__ __attribute__((no_sanitize_thread)) float get(const "
                           "float* p) { return *p; }\n" + NAIVE_BODY, "no_sanitize_thread"),
    "no_sanitize(\"thread\")": ('__device__ __attribute__((no_sanitize("thread"))) float '
                                "get(const float* p) { return *p; }\n" + NAIVE_BODY,
                                "no_sanitize"),
    "alias through a string": ('extern int forged __attribute__((alias("tl_emu_report")));\n'
                               + NAIVE_BODY, "alias"),
    "weak/used/section": ('__device__ int x __attribute__((used, section(".init")));\n'
                          + NAIVE_BODY, "used"),
    "[[gnu::constructor]]": ("[[gnu::constructor]] void at_load() {}\n" + NAIVE_BODY, "[[...]]"),
    "__attribute__((constructor))": ("__attribute__((constructor)) void at_load() {}\n"
                                     + NAIVE_BODY, "constructor"),
    "a static initializer calling a function": (
        "__device__ int escape() { return 1; }\nstatic int at_load = escape();\n" + NAIVE_BODY,
        "file-scope initializer"),
    "a file-scope object with a constructor": (
        "struct Forge { int v; Forge() { v = 1; } };\nForge forge;\n" + NAIVE_BODY,
        "file-scope object of a struct type"),
    "a file-scope object of a typedef of such a struct": (
        "struct Boot { int v; Boot(int n) { v = n; } };\ntypedef Boot Alias;\nAlias boot = 8;\n"
        + NAIVE_BODY, "file-scope object of a struct type"),
    "a file-scope object of an alias of an alias of such a struct": (
        "struct Boot { int v; Boot(int n) { v = n; } };\ntypedef Boot Once;\n"
        "typedef Once Twice;\nTwice boot = 8;\n" + NAIVE_BODY,
        "file-scope object of a struct type"),
    "a lambda run at load": ("static int x = [] { return 1; }();\n" + NAIVE_BODY,
                             "file-scope"),
    "asm": (_with("float acc = 0.0f;", 'float acc; asm("mov.f32 %0, 0f00000000;" : "=f"(acc));'),
            "asm"),
    "the address of printf": (_with("float acc = 0.0f;", "void* p = (void*)&printf; "
                                    "float acc = 0.0f;"), "printf without a call"),
    "a function pointer": (_with("float acc = 0.0f;", "int (*f)(int) = 0; float acc = 0.0f;"),
                           "function pointer"),
    "a typedef of a function type": ("typedef int fn_t(const char*);\n" + NAIVE_BODY,
                                     "typedef of a function type"),
    "a libc function": (_with("float acc = 0.0f;", "char cmd[3] = {'i', 'd', 0}; "
                              "system(cmd); float acc = 0.0f;"), "system"),
    "a compiler builtin": (_with("float acc = 0.0f;", "__builtin_trap(); float acc = 0.0f;"),
                           "__builtin_trap"),
    "a string outside printf": (_with("float acc = 0.0f;", 'const char* s = "x"; '
                                      "float acc = 0.0f;"), "string literal"),
    "a universal character name": (_with("float acc = 0.0f;", "int syst\\u0065m = 0; "
                                         "float acc = 0.0f;"), "backslash"),
    "a name split by a line splice": ("__device__ int sys, tem;\n" + _with(
        "float acc = 0.0f;", "sys\\\ntem(0); float acc = 0.0f;"), "line splice"),
    "printf with a computed format": (_with("float acc = 0.0f;", "char f[3] = {'%', 'n', 0}; "
                                            "printf(f); float acc = 0.0f;"), "printf with a"),
    "a $ in a name": (_with("float acc = 0.0f;", "int a$b = 0; float acc = 0.0f;"), "'$'"),
    "_Pragma of anything else": ('_Pragma("GCC optimize(\\"O0\\")")\n' + NAIVE_BODY,
                                 "string literal|_Pragma"),
    "#pragma GCC": ("#pragma GCC optimize(\"O0\")\n" + NAIVE_BODY, "#pragma"),
    "#line": ("#line 1 \"x.cu\"\n" + NAIVE_BODY, "#line"),
    "decltype": (_with("float acc = 0.0f;", "decltype(1.0f) acc = 0.0f;"), "decltype"),
    "a statement expression": (_with("float acc = 0.0f;", "float acc = ({ 0.0f; });"),
                               "statement expression"),
    "a stringizing macro": ("#define STR(x) #x\n" + NAIVE_BODY, "# in the body"),
    "a macro standing for __shared__": ("#define SMEM __shared__\n" + NAIVE_BODY,
                                        "SMEM standing for __shared__"),
    "a macro declaring a shared array": ("#define TILE_OF(n) __shared__ float n[32][33]\n"
                                         + NAIVE_BODY, "TILE_OF standing for __shared__"),
    "a macro standing for __global__": ("#define KERNEL __global__\n" + NAIVE_BODY,
                                        "KERNEL standing for __global__"),
    "a macro standing for __restrict__": ("#define R __restrict__\n" + NAIVE_BODY,
                                          "R standing for __restrict__"),
    "a macro standing for extern": ("#define DYNAMIC extern\n" + NAIVE_BODY,
                                    "DYNAMIC standing for extern"),
    "a macro reaching libc": ("#define RUN system\n" + _with(
        "float acc = 0.0f;", "char c[1] = {0}; RUN(c); float acc = 0.0f;"), "system"),
}


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_constructs_outside_the_graded_subset_are_refused_by_name(case):
    from tilelab.grading.subset import NotInSubset, check_subset

    source, named = OUTSIDE[case]
    with pytest.raises(NotInSubset, match=r"line \d+: .*(" + named.replace("[", r"\[")
                       .replace("(", r"\(").replace(")", r"\)").replace("$", r"\$")
                       .replace("|", ")|(") + ")") as e:
        check_subset(source)
    assert "not allowed in a graded kernel: " in str(e.value)  # what to write instead follows


def test_every_kernel_the_course_ships_is_in_the_graded_subset():
    """Reference kernels, every variant, the course's .cu files, every solution's kernel and
    every released stub."""
    from pathlib import Path

    from tilelab import classroom
    from tilelab.catalog import exercises
    from tilelab.catalog.reference import KERNELS
    from tilelab.catalog.variants import VARIANTS
    from tilelab.grading.subset import NotInSubset, check_subset

    root = Path(__file__).parent.parent
    sources = [k.source() for k in KERNELS.values()]
    sources += [v.source() for vs in VARIANTS.values() for v in vs]
    # chapter 6's steps 6 and 7 copy with inline PTX (cp.async) where the architecture has
    # it, and the wide-bank microbenchmark loads with inline PTX so that nvcc can neither
    # merge nor drop its access: no exercise asks for it, and a graded kernel may test no
    # compiler's macro and hold no asm, so the subset must refuse them
    gpu_only = {"sgemm_06_async.cu", "sgemm_07_swizzle.cu", "bank_wide.cu"}
    files = sorted((root / "tilelab" / "kernels").glob("*.cu"))
    sources += [p.read_text() for p in files if p.name not in gpu_only]
    for name in gpu_only:
        with pytest.raises(NotInSubset, match=r"__CUDA_ARCH__|asm"):
            check_subset((root / "tilelab" / "kernels" / name).read_text())
    for ex in exercises.EXERCISES.values():
        for folder in ("solutions", "exercises"):
            nb = root / folder / ex.assignment / f"{classroom.notebook_id(ex.assignment)}.ipynb"
            sources.append(classroom.extract_kernel(nb, ex.id))
    assert len(sources) > 60
    for src in sources:
        check_subset(src)


def test_the_subset_allows_what_kernels_of_the_course_write():
    from tilelab.grading.subset import check_subset

    check_subset(
        "#include <stdio.h>\n#ifndef TILE\n#define TILE 32\n#endif\n"
        "#define IDX(r, c) ((r) * N + (c))\n"
        "typedef float real;\nstruct Pair { float a, b; };\n"
        "__device__ __forceinline__ real twice(real v) { return 2.0f * v; }\n"
        "__device__ float scale = 1.0f;\n__constant__ int offsets[2] = {0, 1};\n"
        "template <int T>\n__global__ void __launch_bounds__(256) k(float* __restrict__ C, int N)\n"
        "{\n    __shared__ __align__(16) float s[TILE][TILE + 1];\n    Pair p; p.a = 1.0f;\n"
        "    int i = threadIdx.x, j = 0, n = N;\n    float4 v = make_float4(0, 0, 0, 0);\n"
        "    #pragma unroll\n    for (int q = 0; q < T; ++q) s[i][q] = v.x + p.a;\n"
        "    __syncthreads();\n    atomicAdd(&C[0], twice(s[0][i]) * scale + offsets[j]);\n"
        '    if (i == 0) printf("%d %d\\n", n, IDX(1, 2));\n}\n'
    )


@pytest.mark.parametrize(("name", "why"), [("memcpy", "as a loop"), ("malloc", "buffers")])
def test_device_library_functions_the_subset_leaves_out_are_refused_for_that_reason(name, why):
    """memcpy is CUDA's device API: the refusal says the subset leaves it out, and why."""
    from tilelab.grading.subset import NotInSubset, check_subset

    with pytest.raises(NotInSubset, match=rf"line 3: {name} is not allowed .*leaves it out.*"
                                          rf"{why}") as info:
        check_subset(f"__global__ void k(float* a, float* b)\n{{\n    {name}(a);\n}}\n")
    assert "neither CUDA's device API" not in str(info.value)


def test_a_variable_of_the_sources_own_may_hide_a_library_functions_name():
    """`int x0 = ..., y0 = ...` (y0 is a Bessel function), `float max`: C++ and nvcc let a
    variable hide a function of the library, and such names are common in tiling code.
    Where the source declares none, the name without a call is refused as before."""
    from tilelab.grading.subset import NotInSubset, check_subset

    check_subset("__global__ void k(float* out, int n)\n{\n"
                 "    int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;\n"
                 "    int y1 = y0 + threadIdx.y;\n    float max = 0.0f, pow = 2.0f;\n"
                 "    if (x0 < n && y1 < n) max = fmaxf(max, pow * y1);\n    out[0] = max;\n}\n")
    with pytest.raises(NotInSubset, match="line 3: y0 without a call"):
        check_subset("__global__ void k(float* out)\n{\n    out[0] = (float)(long)y0;\n}\n")
    with pytest.raises(NotInSubset, match="line 3: __syncthreads without a call"):
        check_subset("__global__ void k(float* out)\n{\n    int __syncthreads = 0;\n"
                     "    out[0] = __syncthreads;\n}\n")  # never a reserved name


@pytest.mark.parametrize("spelling", ["%:define STR(x) %:x", "??=define STR(x) ??=x",
                                      "#define CAT(a, b) a %:%: b"])
def test_a_digraph_or_trigraph_spelling_of_the_hash_is_refused(spelling):
    """``%:`` is ``#`` to both compilers: a stringizing macro spelt so once passed the scan
    (tests/fixtures/submissions/naive-digraph_stringify.cu)."""
    from tilelab.grading.subset import NotInSubset, check_subset

    with pytest.raises(NotInSubset, match="another spelling of #"):
        check_subset(spelling + "\n__global__ void k(float *x) { x[0] = 1.0f; }\n")


def test_the_red_teams_digraph_kernel_is_refused():
    from pathlib import Path

    from tilelab.grading.subset import NotInSubset, check_subset

    src = (Path(__file__).parent / "fixtures" / "submissions" /
           "naive-digraph_stringify.cu").read_text()
    with pytest.raises(NotInSubset, match="another spelling of #"):
        check_subset(src)


@pytest.mark.parametrize("fixture", ["naive-static_assert_message", "naive-if0_disabled_code"])
def test_honest_kernels_the_red_team_found_refused_are_in_the_subset(fixture):
    """A static_assert's message and old code kept under #if 0 run nowhere: both pass."""
    from pathlib import Path

    from tilelab.grading.subset import check_subset

    check_subset((Path(__file__).parent / "fixtures" / "submissions" / f"{fixture}.cu")
                 .read_text())


def test_only_the_if_0_branch_is_skipped_by_the_scan():
    from tilelab.grading.subset import NotInSubset, check_subset

    body = "__global__ void k(float *x) { x[0] = 1.0f; }\n"
    check_subset("#if 0\nvoid old() { system(\"x\"); }\n#endif\n" + body)
    for hidden in ("#if 0\n#else\nint t = clock();\n#endif\n",
                   "#if 0 \\\n|| 1\nint t = clock();\n#endif\n",
                   "#if 0\n#if 1\n#endif\n#elif 1\nint t = clock();\n#endif\n"):
        with pytest.raises(NotInSubset):
            check_subset(hidden + body)
    with pytest.raises(NotInSubset, match="string literal"):
        check_subset('__global__ void k(float *x) { x[0] = sizeof("a"); }\n')


def test_a_kernel_declared_extern_c_is_in_the_subset():
    """``extern "C" __global__`` (PyCUDA's style with no_extern_c=True) is legal inside the
    ``extern "C" { }`` SourceModule wraps a source in: the scan reads the kernel without it
    (a red team found it refused as a string literal outside printf)."""
    from tilelab.grading.subset import check_subset

    source = 'extern "C" ' + NAIVE_BODY
    check_subset(source)
    declared = ('extern /* C linkage */ "C"\n__global__ void matmul_naive(const float*, '
                "const float*, float*, int, int, int);\n")
    check_subset(declared + source)
    signature = "__global__ void matmul_naive(const float* A, const float* B, float* C, " \
                "int M, int N, int K)"
    check_signature(declared + source, "matmul_naive", signature)


@pytest.mark.parametrize(("source", "named"), [
    ('extern "C" long write(int, const void*, unsigned long);\n' + NAIVE_BODY,
     'line 1: extern "C" before anything but a __global__ function'),
    ('\nextern "C" __device__ float twice(float v) { return 2.0f * v; }\n' + NAIVE_BODY,
     'line 2: extern "C" before anything but a __global__ function'),
    ('extern "C++" ' + NAIVE_BODY, 'line 1: extern "C\\+\\+" before anything but'),
    ('extern "C" {\n' + NAIVE_BODY + "}\n", 'line 1: an extern "C" { ... } block'),
], ids=["a libc function", "a __device__ function", "C++ linkage", "a block"])
def test_any_other_linkage_specification_is_refused_by_name(source, named):
    from tilelab.grading.subset import NotInSubset, check_subset

    with pytest.raises(NotInSubset, match=named) as e:
        check_subset(source)
    assert "printf" not in str(e.value)
    assert 'already gives every kernel C linkage' in str(e.value)
    assert 'remove extern "C"' in str(e.value)
