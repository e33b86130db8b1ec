"""The emulator's child runs a learner's kernel under seccomp: a system call ends the run.

Each kernel here passes every check made on its text (no forbidden name, no inline
assembly) and reaches libc through a function pointer, as a hostile learner would; the
filter, not the name checks, must stop it.
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu import errors, hostcalls, native, seccomp

pytestmark = pytest.mark.skipif(not seccomp.available(),
                                reason=f"no seccomp filter here: {seccomp.unavailable()}")

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


SLEEP_STOPPED = """
import ctypes, os, signal, sys, time
from tilelab.emu import seccomp
code = seccomp.loading_filter() if sys.argv[1] == "loading" else seccomp.grid_filter((1, 2))
pid = os.fork()
if pid == 0:
    class Timespec(ctypes.Structure):
        _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
    libc = ctypes.CDLL(None)
    futex = seccomp._lib().seccomp_syscall_resolve_name(b"futex")
    word = ctypes.c_int(0)
    seccomp.install(code)
    # a wait with a relative timeout, which a stop interrupts and the kernel resumes
    libc.syscall(futex, ctypes.byref(word), 0, 0, ctypes.byref(Timespec(0, 600_000_000)))
    os._exit(0)
time.sleep(0.2)
os.kill(pid, signal.SIGSTOP)
time.sleep(0.1)
os.kill(pid, signal.SIGCONT)
_, status = os.waitpid(pid, 0)
print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}")
"""


@pytest.mark.parametrize("which", ["loading", "grid"])
def test_a_child_stopped_and_continued_mid_sleep_is_not_taken_for_a_system_call(which):
    """A stop and continue (a class run suspended with Ctrl-Z and resumed) makes the kernel
    resume an interrupted sleep through restart_syscall: without it in the filter, every
    child then loading a module was killed, and its honest learner told that the module
    called the operating system."""
    out = subprocess.run([sys.executable, "-c", SLEEP_STOPPED, which], capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    assert out == "exit 0", f"the child ended by signal {out} (31: SIGSYS, the filter)"


# The report pipe: the filters let the runtime write it, so learner code can reach it too;
# what the parent accepts is the one line headed by a tag drawn afresh for each child.
FIND_PIPE = (
    "__device__ int pipe_fd() {\n"
    '  typedef int (*fcntl_t)(int, int, ...);\n'
    '  fcntl_t fc = (fcntl_t)libc_symbol("fcntl");\n'
    "  for (int fd = 3; fd < 1024; fd++) if (fc(fd, 1) >= 0) return fd;\n"  # F_GETFD
    "  return -1;\n"
    "}\n"
    "static int report_pipe = pipe_fd();  // found at load time, where fcntl is allowed\n"
    "__device__ void say(int fd, const char* line) {\n"
    '  typedef long (*write_t)(int, const void*, unsigned long);\n'
    '  write_t wr = (write_t)libc_symbol("write");\n'
    "  unsigned long n = 0;\n  while (line[n]) n++;\n"
    "  if (fd > 0) wr(fd, line, n);\n"
    "}\n"
)
FORGED_OK = r'"{\"status\":\"ok\",\"kernel_seconds\":0.001,\"analysis\":{\"arrays\":[],' \
    r'\"races\":[],\"banks\":[]}}\n"'


def test_a_kernel_that_writes_a_report_line_of_its_own_is_not_believed():
    src = kernel(f"    say(report_pipe, {FORGED_OK});", FIND_PIPE)
    with pytest.raises(errors.KernelCrash, match="report channel") as e:
        launch(src)
    assert "kernels cannot" in str(e.value)


def test_a_constructor_that_writes_the_load_report_is_not_believed():
    prefix = FIND_PIPE + (
        "__device__ int forge() {\n"
        '  say(report_pipe, "{\\"kernels\\": [], \\"static_shared\\": 0, \\"globals\\": []}\\n");\n'
        '  typedef void (*exit_t)(int);\n'
        '  exit_t ex = (exit_t)libc_symbol("_exit");\n'
        "  if (ex) ex(0);  // before the loader's own report\n"
        "  return 0;\n"
        "}\n"
        "static int forged = forge();\n"
    )
    with pytest.raises(errors.CompileError, match="report channel while loading"):
        launch(kernel("    a[0] = forged;", prefix))


def test_only_the_one_tagged_line_is_a_report():
    tag = native.new_tag()
    assert native.untag(native.tagged(tag, b'{"status": "ok"}'), tag) == (b'{"status": "ok"}',
                                                                          False)
    assert native.untag(b"", tag) == (b"", False)  # no report: the child died first
    for raw in (b'{"status": "ok"}\n', native.tagged(native.new_tag(), b"{}"),
                b'{"status": "ok"}\n' + native.tagged(tag, b"{}"),
                native.tagged(tag, b"{}") + b"x", native.tagged(tag, b"{}")[:-1]):
        assert native.untag(raw, tag) == (b"", True), raw


def test_the_filters_are_libseccomps_for_this_machines_architecture():
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    for prog in (seccomp.loading_filter(), seccomp.grid_filter((1, 2, 9))):
        insns = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
        assert insns[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
        assert insns[1][0] == 0x15 and insns[1][3] == lib.seccomp_arch_native()
    assert seccomp.syscall_name(seccomp._resolve("execve")) == "execve"


RUN_ONE = (
    "import numpy as np\n"
    "from tilelab import emu\n"
    "a = np.zeros(4, np.float32)\n"
    "emu.SourceModule('__global__ void k(float* a) { a[threadIdx.x] = 2.0f; }')"
    ".get_function('k')(emu.InOut(a), block=(4, 1, 1))\n"
    "print('ran', a.sum())\n"
)


def _run_without_libseccomp(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != seccomp.UNCONFINED_ENV}
    env = {**base, "PYTHONPATH": str(Path(__file__).parents[1]),
           seccomp.LIBRARY_ENV: "/nonexistent/libseccomp.so.2", **env}
    return subprocess.run([sys.executable, "-c", RUN_ONE], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_without_libseccomp_the_emulator_refuses_to_run_kernels_and_says_why():
    p = _run_without_libseccomp()
    assert p.returncode != 0 and "ran" not in p.stdout
    assert "Unconfined" in p.stderr and "libseccomp" in p.stderr
    assert "apt install libseccomp2" in p.stderr and "TILELAB_EMU_UNCONFINED=1" in p.stderr


def test_unconfined_runs_only_when_asked():
    p = _run_without_libseccomp(TILELAB_EMU_UNCONFINED="1")
    assert p.returncode == 0 and "ran 8.0" in p.stdout, p.stderr
    assert "no system-call filter" in p.stderr


def test_imports_are_read_from_the_elf_file_as_nm_lists_them(tmp_path):
    (tmp_path / "lib.c").write_text('#include <stdio.h>\n#include <math.h>\n'
                                    '__attribute__((weak)) void w(void);\n'
                                    'void f(void) { puts("x"); if (w) w(); }\n'
                                    'double g(double x) { return sin(x); }\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "lib.c", "-o", "lib.so", "-lm"], cwd=tmp_path,
                   check=True)
    names = hostcalls.undefined_symbols(tmp_path / "lib.so")
    assert {"puts", "sin", "w"} <= names and not {"f", "g"} & names
    assert names == hostcalls.nm_undefined_symbols(tmp_path / "lib.so")
    defined = hostcalls.library_symbols(tmp_path / "lib.so").defined  # the same pass
    assert {"f", "g"} <= defined and not {"puts", "sin", "w"} & defined


def test_a_file_the_reader_does_not_know_goes_to_nm(tmp_path):
    (tmp_path / "lib.so").write_text("INPUT(libc.so.6)\n")  # a linker script, not ELF
    with pytest.raises(errors.CompileError, match=r"nm could not read lib\.so"):
        hostcalls.undefined_symbols(tmp_path / "lib.so")


def test_without_nm_the_message_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_EMU_NM", str(tmp_path / "no-nm"))
    (tmp_path / "lib.so").write_text("INPUT(libc.so.6)\n")
    with pytest.raises(errors.CompileError, match="Install binutils"):
        hostcalls.undefined_symbols(tmp_path / "lib.so")
