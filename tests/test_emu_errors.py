"""Failures become clear Python errors, and the process running the tests survives them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import running
from support.emu_samples import line_of

import tilelab.emu as cuda

FAULTY = r"""
__global__ void read_past(const float* src, float* dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) dst[i % n] = src[i];              // off by one: reads src[n]
}

__global__ void write_past(float* dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = 1.0f;                                 // no bounds test at all
}

__global__ void write_before(float* dst)
{
    dst[(int)threadIdx.x - 2] = 5.0f;
}

__global__ void null_write(float* dst)
{
    float* p = 0;
    if (threadIdx.x == 3) *p = dst[0];
}

__global__ void spin(float* x)
{
    while (x[0] == x[0]) x[1] += 1.0f;
}

__global__ void checked(int n)
{
    assert(threadIdx.x < n);
}

__global__ void scale(float* x, float a, int n)
{
    int i = threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


@pytest.fixture(scope="module")
def faulty():
    return cuda.SourceModule(FAULTY)


def test_out_of_bounds_read_names_parameter_and_line(faulty):
    src, dst = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(cuda.OutOfBoundsAccess) as info:
        faulty.get_function("read_past")(cuda.In(src), cuda.Out(dst), np.int32(64),
                                         block=(32, 1, 1), grid=(3, 1))
    e = info.value
    assert (e.buffer, e.access, e.index) == ("src", "read", 64)
    assert e.line == line_of(FAULTY, "off by one")
    assert e.block == (2, 0, 0) and e.thread == (0, 0, 0)
    assert f"line {e.line}" in str(e) and "src[64]" in str(e) and "1 element(s) past" in str(e)
    assert (dst == 0).all()


def test_out_of_bounds_write_names_parameter_and_line(faulty):
    dst = cuda.mem_alloc(100 * 4)
    with pytest.raises(cuda.OutOfBoundsAccess) as info:
        faulty.get_function("write_past")(dst, np.int32(100), block=(64, 1, 1), grid=(2, 1))
    e = info.value
    assert (e.buffer, e.access, e.index) == ("dst", "write", 100)
    assert e.line == line_of(FAULTY, "no bounds test")
    assert "write_past" in str(e)


def test_small_underflow_write_is_caught(faulty):
    with pytest.raises(cuda.OutOfBoundsAccess, match=r"dst\[-2\], 2 element\(s\) before"):
        faulty.get_function("write_before")(cuda.Out(np.zeros(8, np.float32)), block=(4, 1, 1))


def test_segfault_is_reported_and_process_survives(faulty):
    with pytest.raises(cuda.KernelCrash, match=r"thread \(3,0,0\).*null pointer") as info:
        faulty.get_function("null_write")(cuda.In(np.zeros(4, np.float32)), block=(8, 1, 1))
    assert info.value.line == line_of(FAULTY, "*p = dst[0]")
    x = np.ones(4, np.float32)
    faulty.get_function("scale")(cuda.InOut(x), np.float32(3), np.int32(4), block=(4, 1, 1))
    assert (x == 3).all()


OVERFLOW = r"""
__global__ void deep(float* out)
{
    volatile float big[17000];   // 68 KB: past a thread's 64 KiB stack, into its guard
    big[16999 - threadIdx.x % 7] = 1.0f;
    big[0] = 2.0f;
    out[threadIdx.x] = big[0] + big[16999 - threadIdx.x % 7];
}
"""


def test_a_thread_past_its_stack_is_told_so_in_a_block_of_1024():
    """Each emulated thread's stack ends at a guard region: a local array a little too
    large is a stack overflow of that thread, in the largest block too, never a silent
    write into the stack of the thread below it."""
    deep = cuda.SourceModule(OVERFLOW).get_function("deep")
    with pytest.raises(cuda.KernelCrash, match=r"Stack overflow in kernel 'deep'.*thread "
                       r"\(\d+,0,0\).*64 KiB of stack"):
        deep(cuda.Out(np.zeros(1024, np.float32)), block=(1024, 1, 1))


def test_endless_loop_times_out(faulty, monkeypatch):
    x = np.zeros(2, np.float32)
    with pytest.raises(cuda.KernelTimeout, match=r"did not finish within 0\.5 s"):
        faulty.get_function("spin")(cuda.InOut(x), block=(1, 1, 1), timeout=0.5)
    monkeypatch.setenv("TILELAB_EMU_TIMEOUT", "0.3")
    with pytest.raises(cuda.KernelTimeout, match=r"0\.3 s"):
        faulty.get_function("spin")(cuda.InOut(x), block=(1, 1, 1))
    assert (x == 0).all()


def test_failed_assert_is_a_crash(faulty):
    with pytest.raises(cuda.KernelCrash, match=r"assertion `threadIdx.x < n` failed.*\(5,0,0\)"):
        faulty.get_function("checked")(np.int32(5), block=(8, 1, 1))


def test_argument_types_are_checked(faulty):
    f = faulty.get_function("scale")
    x = cuda.In(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match=r"parameter #2 \(0-based\).*wrap it: np\.int32\(4\)"):
        f(x, np.float32(2), 4, block=(4, 1, 1))
    with pytest.raises(TypeError, match=r"parameter #1 \(0-based\) `float a`.*numpy\.int32"):
        f(x, np.int32(2), np.int32(4), block=(4, 1, 1))
    with pytest.raises(TypeError, match=r"`int n`.*numpy\.float64"):
        f(x, np.float32(2), np.float64(4), block=(4, 1, 1))
    with pytest.raises(TypeError, match="needs device memory, got a NumPy array"):
        f(np.zeros(4, np.float32), np.float32(2), np.int32(4), block=(4, 1, 1))
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        f(x, np.float32(2), block=(4, 1, 1))


def test_launch_limits(faulty):
    f = faulty.get_function("scale")
    args = (cuda.In(np.zeros(4, np.float32)), np.float32(2), np.int32(4))
    with pytest.raises(cuda.LaunchError, match="2048 threads"):
        f(*args, block=(64, 32, 1))
    with pytest.raises(cuda.LaunchError, match="too many resources requested for launch"):
        f(*args, block=(4, 1, 1), shared=300 * 1024)


def test_unknown_kernel_lists_kernels(faulty):
    with pytest.raises(cuda.LogicError, match=r"named symbol not found.*read_past, write_past"):
        faulty.get_function("matmul")


def test_compile_error_reports_learner_line():
    src = ("__global__ void k(float* x)\n{\n"
           "    int i = threadIdx.x;\n    x[i] = undefined_thing;\n}\n")
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(src)
    assert info.value.lines == (4,)
    assert "kernel.cu:4" in str(info.value) and "undefined_thing" in str(info.value)
    assert "    4 |     x[i] = undefined_thing;" in str(info.value)  # the learner's own line
    assert "tilelab_emu" not in str(info.value)


@pytest.mark.parametrize("target", ['"/etc/passwd"', "</etc/shadow>", '"../secret.h"',
                                    "<sys/socket.h>"])
def test_disallowed_include_is_rejected_without_reading_it(target):
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(f"#include {target}\n__global__ void k() {{}}\n")
    msg = str(info.value)
    assert target in msg and "<stdio.h>" in msg and info.value.lines == (1,)
    assert "root:" not in msg and not info.value.stderr


_PASSWD = [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.strip()] \
    if Path("/etc/passwd").is_file() else ["root:x:0:0:root:/root:/bin/bash"]


def _shows_passwd(err: cuda.CompileError) -> bool:
    text = f"{err}\n{err.stderr}"
    return "root:" in text or any(ln in text for ln in _PASSWD)


@pytest.mark.parametrize("src", [
    '#inc\\\nlude "/etc/passwd"\n',                              # directive name spliced
    '#\\\ninclude "/etc/passwd"\n',
    '%\\\n:include "/etc/passwd"\n',                             # the %: digraph, spliced
    '/* *\\\n/\n#include "/etc/passwd"\n/* */\n',                # comment closed by a splice
    'const char* s = R"x( " /* )x";\n#include "/etc/passwd"\n/* */\n',  # raw string
    '#define F "/etc/passwd"\n#include F\n',                     # include through a macro
])
def test_include_hidden_from_the_check_is_rejected_without_showing_the_file(src):
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(src + "__global__ void k() {}\n")
    assert "is not allowed" in str(info.value) and info.value.lines
    assert not _shows_passwd(info.value) and not info.value.stderr


def test_included_file_never_reaches_a_message_even_past_the_include_check(monkeypatch):
    """Should the source check miss an include, g++'s list of files read still stops it."""
    import tilelab.emu.translate as translate

    monkeypatch.setattr(translate, "check_includes", lambda src, masked: [])
    with pytest.raises(cuda.CompileError, match=r"includes /etc/passwd") as info:
        cuda.SourceModule('#include "/etc/passwd"\n__global__ void k() {}\n')
    assert not _shows_passwd(info.value) and not info.value.stderr


@pytest.mark.parametrize(("src", "name", "line"), [
    ('int system(const char*);\n__global__ void k()\n{\n    system("rm -rf ~");\n}\n',
     "system", 1),
    ('__global__ void k(int* x)\n{\n    FILE* f = fopen("/tmp/x", "w");\n    x[0] = f != 0;\n}\n',
     "fopen", 3),
    ('extern "C" void* dlsym(void*, const char*);\n'
     '__global__ void k(long* x) { x[0] = (long)dlsym(0, "system"); }\n', "dlsym", 1),
    # Functions the emulator itself calls are refused by name, even a name built with ##.
    ('__global__ void k()\n{\n    write(2, "x", 1);\n}\n', "write", 3),
    ('#define CAT(a, b) a##b\n__global__ void k()\n{\n    CAT(mpro, tect)(0, 0, 7);\n}\n',
     "mprotect", 4),
])
def test_host_function_call_is_rejected(src, name, line):
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(src)
    msg = str(info.value)
    assert f"calls `{name}`, a host function" in msg or f"uses `{name}`, a host function" in msg
    assert "kernels can call only CUDA device functions" in msg and "Remove the call" in msg
    assert info.value.lines == (line,) and f"line {line}" in msg


def test_static_constructor_calling_host_functions_is_never_loaded(tmp_path):
    marker = tmp_path / "constructor-ran"
    src = ("__attribute__((constructor)) static void boot()\n{\n"
           '    const char* home = getenv("HOME");\n'
           f'    FILE* f = fopen("{marker}", "w");\n'
           '    if (f && home) printf("%s", home);\n}\n'
           "__global__ void k() {}\n")
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(src)
    assert "`fopen` (line 4) and `getenv` (line 3), host functions" in str(info.value)
    assert info.value.lines == (3, 4) and not marker.exists()


def test_rejected_kernel_stays_rejected_on_a_second_compile():
    src = '__global__ void k(int* x) { x[0] = unlink("/tmp/tilelab-nothing"); }\n'
    for _ in range(2):
        with pytest.raises(cuda.CompileError, match="`unlink`, a host function"):
            cuda.SourceModule(src)


def test_device_functions_are_allowed_and_a_host_call_among_them_is_named_alone():
    body = ("__global__ void k(float* x, unsigned* u, long long* l, int n)\n{\n"
            "    float* p = new float[n]; p[0] = expf(x[0]) + powf(x[1], 2.5f); delete[] p;\n"
            "    float s, c; sincosf(x[2], &s, &c); x[3] = s + c + lgammaf(x[4]) + clock();\n"
            "    u[0] = __popc(u[1]); l[0] = (long long)((__int128)l[1] * l[2] / l[3]);\n"
            "    memcpy(x, x + 4, 8); atomicAdd(&x[5], 1.0f);\n"
            '    printf("%d %f\\n", n, x[0]); printf("x"); printf("done\\n");\n'
            "    HOST\n}\n")
    for analysis in (False, True):
        cuda.SourceModule(body.replace("HOST", ""), analysis=analysis)
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(body.replace("HOST", "x[6] = rand();"))
    assert "kernel.cu line 8 calls `rand`, a host function" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize(("src", "kind", "text", "line"), [
    ("#define CAT(a, b) a##b\n__global__ void k() { CAT(__as, m__) volatile(\"nop\"); }\n",
     cuda.UnsupportedConstruct, "inline assembly", 2),
    ('static int w(int, const void*, unsigned long) __attribute__((weakref("write")));\n'
     '__global__ void k() { w(1, "x", 1); }\n', cuda.CompileError, "uses `weakref`", 1),
    ("__global__ void k(int* x)\n{\n    int write = 3;\n    x[0] = write;\n}\n",
     cuda.CompileError, "rename your own function or variable", 3),
])
def test_indirect_ways_to_reach_host_functions_are_rejected(src, kind, text, line):
    with pytest.raises(kind, match=text) as info:
        cuda.SourceModule(src)
    assert info.value.lines == (line,)


@pytest.mark.slow
@pytest.mark.parametrize("definition", [
    "void* memcpy(void* d, const void* s, size_t n) { return d; }",  # the runtime calls it
    "void free(void* p) {}",  # a kernel may call it
    "#define NAME(a, b) a##b\nvoid* NAME(mem, set)(void* d, int c, size_t n) { return d; }",
])
@pytest.mark.parametrize("analysis", [False, True])
def test_a_kernel_may_not_define_a_library_functions_name(definition, analysis):
    """Defined in the kernel's library, a library function's name would stand for the
    library's in the emulator's own calls to it (its runtime copies with memcpy): the built
    library is read for it, however the name was spelled."""
    src = definition + "\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    with pytest.raises(cuda.CompileError, match=r"defines `mem(cpy|set)`|defines `free`") as info:
        cuda.SourceModule(src, analysis=analysis)
    assert "may not take a library function's name: rename it" in str(info.value)
    cuda.SourceModule(src.replace("memcpy(", "my_copy(").replace("free(", "release(")
                      .replace("NAME(mem, set)(", "NAME(my, set)("), analysis=analysis)


def test_define_option_naming_a_host_function_is_rejected():
    with pytest.raises(cuda.CompileError, match=r"-DF=write names `write`"):
        cuda.SourceModule('__global__ void k() { F(1, "x", 1); }\n', options=["-DF=write"])


@pytest.mark.parametrize(("code", "name"), [
    ("float v = __shfl_down(1.0f, 1);", "__shfl_down without _sync"),
    ("unsigned b = __ballot(1);", "__ballot without _sync"),
    ("cooperative_groups::this_grid().sync();", "blocks that wait on each other"),
    ('asm volatile("trap;");', "inline assembly"),
    ("__half h;", "half precision"),
])
def test_unsupported_construct_is_named(code, name):
    with pytest.raises(cuda.UnsupportedConstruct) as info:
        cuda.SourceModule(f"__global__ void k()\n{{\n    {code}\n}}\n")
    assert name in str(info.value) and "run this kernel on a GPU" in str(info.value)
    assert info.value.line == 3


def test_unknown_global_names_the_ones_found():
    mod = cuda.SourceModule("__constant__ float w[16];\n__global__ void k() {}\n")
    assert mod.get_global("w")[1] == 64
    with pytest.raises(cuda.LogicError, match=r"named 'v'.*found are: w\."):
        mod.get_global("v")


def test_kernel_process_dies_with_its_parent(tmp_path):
    """A grader killing the launching process must not leave the kernel's process running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "spin.py"
    script.write_text(
        "import numpy as np, tilelab.emu as cuda\n"
        "f = cuda.SourceModule('__global__ void spin(int* x) { while (x[0] == x[0]) x[1]++; }')"
        ".get_function('spin')\n"
        "f(cuda.InOut(np.zeros(2, np.int32)), timeout=120)\n")
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)

    def children() -> list[int]:
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == proc.pid:
                        out.append(int(pid))
            except (OSError, ValueError, IndexError):
                pass
        return out

    deadline = time.monotonic() + 60
    while not (kids := children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not kids:
        proc.kill()
    assert kids, "the launch never forked"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while any(map(running, kids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [k for k in kids if running(k)]
    for k in alive:  # do not leave a spinning orphan behind when this fails
        os.kill(k, signal.SIGKILL)
    assert not alive, f"kernel process(es) {alive} outlived their parent"


def test_ptxas_report_gives_registers_shared_and_stack():
    from tilelab.emu.resources import parse_report
    text = ("ptxas info    : Function properties for _Z1kPf\n"
            "    24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
            "ptxas info    : Used 96 registers, used 1 barriers, 8192 bytes smem\n"
            "ptxas info    : Function properties for other\n"
            "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
            "ptxas info    : Used 8 registers, used 0 barriers\n")
    res = parse_report(text)
    assert (res["_Z1kPf"].registers, res["_Z1kPf"].shared, res["_Z1kPf"].local) == (96, 8192, 24)
    assert res["_Z1kPf"].block_registers(1024) == 98304 and res["_Z1kPf"].max_threads() == 672
    assert (res["other"].registers, res["other"].shared) == (8, 0)


def test_missing_pycuda_pieces_are_named():
    with pytest.raises(AttributeError, match=r"has no 'Device'.*Event, Stream"):
        cuda.Device(0)
    a = cuda.gpuarray.to_gpu(np.arange(4, dtype=np.float32))
    with pytest.raises(NotImplementedError, match=r"a\.get\(\) with NumPy"):
        a + a
    with pytest.raises(NotImplementedError, match=r"GPUArray\.sum is not available"):
        a.sum()
    assert (a.get() == np.arange(4)).all()


def test_template_in_extern_c_says_no_extern_c():
    src = "template <int B> __global__ void k(float* x) { x[0] = B; }\n" \
          "template __global__ void k<4>(float*);\n"
    with pytest.raises(cuda.CompileError, match="no_extern_c=True"):
        cuda.SourceModule(src)
    mod = cuda.SourceModule(src, no_extern_c=True)
    assert mod.kernel_names == ["_Z1kILi4EEvPf"]


SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


@pytest.mark.parametrize("fixture, says", [
    ("naive-template_helper", r"templates cannot be .*Write the helper without a template"),
    ("naive-overloaded_helper", r"two functions cannot share a name.*its own name"),
])
def test_cpp_that_c_linkage_forbids_is_explained_with_what_to_do(fixture, says):
    """A template or an overloaded helper fails inside PyCUDA's extern "C" on a GPU too
    (nvcc: 'may not have extern "C" linkage'); the message says why and what to write."""
    with pytest.raises(cuda.CompileError, match=says) as err:
        cuda.SourceModule((SUBMISSIONS / f"{fixture}.cu").read_text())
    assert 'extern "C"' in str(err.value)


@pytest.mark.gpu
@pytest.mark.parametrize("fixture", ["naive-template_helper", "naive-overloaded_helper"])
def test_nvcc_refuses_the_same_cpp_inside_extern_c(fixture):
    """The emulator's refusal above is the GPU's: PyCUDA's SourceModule fails to compile it."""
    compiler = pytest.importorskip("pycuda.compiler")
    pytest.importorskip("pycuda.autoinit")
    from pycuda.driver import CompileError
    with pytest.raises(CompileError, match="linkage"):
        compiler.SourceModule((SUBMISSIONS / f"{fixture}.cu").read_text())


def test_a_kernel_that_makes_the_compiler_work_for_long_is_stopped_at_its_compile_budget(
        monkeypatch):
    """Compile-time evaluation (a constexpr loop behind a static_assert: about 7 s of g++
    each) counts against the seconds g++ may spend on one build, all its passes together;
    past them the source is refused with a message that says why (and nothing is cached:
    a second build is refused too)."""
    from tilelab.emu import compile as emu_compile

    monkeypatch.setattr(emu_compile, "COMPILE_SECONDS", 1.0)
    monkeypatch.setenv("TILELAB_EMU_NVCC", "0")
    src = (
        f"// budget test {id(monkeypatch)}\n"
        + "__device__ constexpr unsigned spin(unsigned n, unsigned k) { unsigned s = k;"
        " for (unsigned i = 0; i < n; i++) for (unsigned j = 0; j < 200000; j++) s += j ^ i;"
        " return s; }\n"
        "__global__ void k(float* x) {\n"
        "    static_assert(spin(7, 1) != 1u, \"x\");\n"
        "    x[threadIdx.x] = 1.0f;\n}\n")
    with pytest.raises(cuda.CompileError, match=r"g\+\+ spent more than 1 s compiling"):
        cuda.SourceModule(src)
    with pytest.raises(cuda.CompileError, match="more than 1 s"):
        cuda.SourceModule(src)


def test_a_link_failure_is_told_with_its_line_not_buried_under_the_preludes_warnings():
    """A 4 GiB __device__ array: g++ compiles it, the linker cannot place it. The learner
    reads the linker's own error at its kernel.cu line (once cut off behind some 30 lines of
    the prelude's warnings), with the likely cause."""
    src = ("__device__ float big[1u << 30];\n"
           "__global__ void k(float* x)\n{\n    big[threadIdx.x] = x[blockIdx.x];\n}\n")
    with pytest.raises(cuda.CompileError) as info:
        cuda.SourceModule(src)
    text = str(info.value)
    assert "the link failed" in text and "array too large" in text, text
    assert "warning" not in text and "prelude" not in text, text
    assert info.value.lines and all(n <= 5 for n in info.value.lines)
