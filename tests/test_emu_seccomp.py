"""The emulator's child runs a learner's kernel under seccomp: a system call ends the run.

Each kernel here passes every check made on its text (no forbidden name, no inline
assembly) and reaches libc through a function pointer, as a hostile learner would; the
filter, not the name checks, must stop it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu import errors, seccomp

pytestmark = pytest.mark.skipif(not seccomp.available(), reason="seccomp filters: x86-64 Linux")

WALK = (Path(__file__).parent / "data" / "hostile" / "libc_walk.h").read_text()


def kernel(body: str, prefix: str = "") -> str:
    return WALK + prefix + (
        "__global__ void k(float* a, int n) {\n"
        "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n" + body + "\n  }\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) a[i] = 2.0f * i;\n}\n"
    )


def launch(src: str) -> np.ndarray:
    a = np.zeros(64, np.float32)
    emu.SourceModule(src).get_function("k")(emu.InOut(a), np.int32(64), block=(32, 1, 1),
                                            grid=(2, 1))
    return a


def test_a_plain_kernel_with_printf_runs_under_the_filter(capfd):
    src = kernel('    printf("hello %d\\n", n);')
    assert launch(src)[3] == 6.0


CASES = {
    "system() found through &printf": (
        '    typedef int (*fn)(const char*);\n'
        '    fn f = (fn)libc_symbol("system");\n'
        '    if (f) f("touch {marker}");', r"operating system \((rt_sigaction|clone\w*|vfork)\)"),
    "execve through libc's syscall()": (
        '    typedef long (*fn)(long, ...);\n'
        '    fn f = (fn)libc_symbol("syscall");\n'
        '    const char* argv[] = {"/bin/sh", "-c", "touch {marker}", 0};\n'
        '    if (f) f(59L, argv[0], argv, 0);', r"operating system \(execve\)"),
    "fopen of /proc/self/mem": (
        '    typedef void* (*fn)(const char*, const char*);\n'
        '    fn f = (fn)libc_symbol("fopen");\n'
        '    if (f) f("/proc/self/mem", "r+");', r"operating system \(open(at)?\)"),
    "a socket": (
        '    typedef int (*fn)(int, int, int);\n'
        '    fn f = (fn)libc_symbol("socket");\n'
        '    if (f) f(2, 1, 0);', r"operating system \(socket\)"),
    "kill of the parent": (
        '    typedef int (*fn)(int, int);\n'
        '    typedef int (*gp)(void);\n'
        '    fn f = (fn)libc_symbol("kill");\n'
        '    gp g = (gp)libc_symbol("getppid");\n'
        '    if (f && g) f(g(), 9);', r"operating system \((kill|getppid)\)"),
    "ptrace of the parent": (
        '    typedef long (*fn)(int, int, void*, void*);\n'
        '    fn f = (fn)libc_symbol("ptrace");\n'
        '    if (f) f(16, 1, 0, 0);', r"operating system \(ptrace\)"),
}


@pytest.mark.parametrize("body,message", CASES.values(), ids=CASES.keys())
def test_a_system_call_from_the_kernel_ends_the_run_with_a_clear_message(body, message,
                                                                         tmp_path):
    marker = tmp_path / "escaped"
    with pytest.raises(errors.KernelCrash, match=message) as e:
        launch(kernel(body.replace("{marker}", str(marker))))
    assert "kernels cannot" in str(e.value)
    assert not marker.exists()


def test_a_constructor_that_runs_at_load_time_is_stopped_too(tmp_path):
    marker = tmp_path / "escaped"
    prefix = (
        "__device__ int escape() {\n"
        '  typedef int (*fn)(const char*);\n'
        '  fn f = (fn)libc_symbol("system");\n'
        f'  return f ? f("touch {marker}") : 0;\n'
        "}\n"
        "static int at_load = escape();\n"
    )
    with pytest.raises(errors.CompileError, match="operating system while loading"):
        launch(kernel("    a[0] = at_load;", prefix))
    assert not marker.exists()


def test_the_grid_filter_allows_writes_only_to_its_descriptors():
    prog = seccomp.grid_filter((1, 2, 7))
    assert len(prog) % 8 == 0 and len(prog) // 8 < 255
    assert seccomp.describe("k", 59).startswith("kernel 'k': the kernel tried to call the "
                                                "operating system (execve)")
