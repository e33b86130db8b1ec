"""Seccomp filters for the forked child that runs a learner's kernel, made by libseccomp.

Two filters, stacked (the kernel applies both; the stricter answer wins):

- :func:`install_loading_filter`, in the child before the learner's library is loaded:
  what loading a shared library and the runtime's set-up need (read-only file opens,
  mappings, signal set-up, the report pipe, exit). No process, no socket, no file written,
  no ptrace, no signal to another process. A global constructor in the learner's source
  runs under it.
- :func:`grid_filter`, handed to the runtime, which installs it after its set-up and just
  before the first block runs: memory that is already mapped (plus anonymous mappings for
  the heap), ``write`` to stdout, stderr and the report pipe, the clock, exit. Anything else
  traps into the runtime's handler, which reports the system call and exits.

libseccomp (``libseccomp.so.2``, through ctypes) builds both for the machine's own
architecture (any it supports: x86-64, aarch64, ppc64le, s390x, riscv64, ...), resolving
system calls by name; a call made through another ABI (x32, int 0x80) kills the process.
Where no filter can be made (no libseccomp, a kernel without seccomp) :func:`require` refuses
to run kernels and says why, unless ``TILELAB_EMU_UNCONFINED=1`` accepts running them with no
system-call filter (kernels can then call the operating system: never for grading).

A blocked call made while the grid runs is reported by :func:`describe` in a learner's words.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import tempfile
import warnings
from collections.abc import Iterable

from .errors import EmulatorError

LIBRARY_ENV = "TILELAB_EMU_LIBSECCOMP"  # another path for libseccomp.so.2
UNCONFINED_ENV = "TILELAB_EMU_UNCONFINED"  # "1": run kernels without a filter

_ACT_KILL_PROCESS = 0x80000000
_ACT_TRAP = 0x00030000
_ACT_ALLOW = 0x7FFF0000
_CMP_EQ, _CMP_MASKED_EQ = 4, 7
_ATTR_ACT_BADARCH = 2
_NR_ERROR = -1
_ARCH_NATIVE = 0
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _PR_GET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 21, 2
_O_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_LOW32 = 0xFFFFFFFF

# What loading the library, Python's last steps in the child and the runtime's set-up use
# (names of every architecture: those a machine lacks are left out there). Both lists hold
# restart_syscall: the kernel's own resumption of an allowed sleep or wait that a stop and
# continue (a class run suspended with Ctrl-Z, say) interrupted.
_LOADING = (
    "read", "write", "close", "stat", "fstat", "lstat", "lseek", "mmap", "mprotect", "munmap",
    "brk", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "pread64", "readv", "writev",
    "access", "sched_yield", "mremap", "madvise", "getpid", "exit", "uname", "fcntl",
    "getcwd", "readlink", "gettimeofday", "getrlimit", "getuid", "sigaltstack", "gettid",
    "futex", "getdents64", "clock_gettime", "clock_getres", "clock_nanosleep", "exit_group",
    "newfstatat", "readlinkat", "faccessat", "getrandom", "statx", "faccessat2", "nanosleep",
    "mmap2", "fstat64", "stat64", "lstat64", "fstatat64", "_llseek", "fcntl64", "ugetrlimit",
    "clock_gettime64", "clock_getres_time64", "clock_nanosleep_time64", "futex_time64",
    "sigreturn", "prlimit64", "restart_syscall",
)
# While the grid runs: memory, the clock, exit; write, mmap and mprotect are checked.
_GRID = (
    "brk", "munmap", "mremap", "madvise", "rt_sigreturn", "sigreturn", "exit", "exit_group",
    "clock_gettime", "clock_gettime64", "gettimeofday", "futex", "futex_time64",
    "restart_syscall",
)


class Unconfined(EmulatorError):
    """No system-call filter can be made here, so kernels are not run."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.cache
def _lib() -> ctypes.CDLL | str:
    """libseccomp through ctypes, or why it cannot be used."""
    name = os.environ.get(LIBRARY_ENV) or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        return (f"libseccomp ({name}) could not be loaded ({exc}); install it (Debian/Ubuntu: "
                "apt install libseccomp2; Fedora: dnf install libseccomp)")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p  # malloc'ed char*
    lib.seccomp_syscall_resolve_num_arch.argtypes = [ctypes.c_uint32, ctypes.c_int]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    return lib


@functools.cache
def unavailable() -> str:
    """Why no filter can be made on this machine ("" when one can)."""
    lib = _lib()
    if isinstance(lib, str):
        return lib
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) < 0:
        return (f"this Linux kernel has no seccomp (prctl: {os.strerror(ctypes.get_errno())})")
    try:
        loading_filter()
    except OSError as exc:
        return f"libseccomp could not build a filter for this machine ({exc})"
    return ""


def available() -> bool:
    """Whether kernels run under the system-call filters here."""
    return not unavailable()


def require() -> bool:
    """Before a kernel runs: True when it will run under the filters; False when
    ``TILELAB_EMU_UNCONFINED=1`` accepts running it without them; else :class:`Unconfined`
    saying what is missing."""
    why = unavailable()
    if not why:
        return True
    if os.environ.get(UNCONFINED_ENV) == "1":
        _warn_unconfined(why)
        return False
    raise Unconfined(
        f"The CPU emulator runs kernels only under a system-call filter (seccomp), and none "
        f"can be made here: {why}. Without it a kernel (native code) could call the "
        "operating system: open files, start processes. Fix that, or set "
        f"{UNCONFINED_ENV}=1 to run your own kernels anyway, with no system-call "
        "confinement (never for grading others' code).")


@functools.cache
def _warn_unconfined(why: str) -> None:
    warnings.warn(f"{UNCONFINED_ENV}=1: the CPU emulator runs kernels with no system-call "
                  f"filter ({why}); a kernel can open files, start processes and use the "
                  "network as you.", RuntimeWarning, stacklevel=3)


def _resolve(name: str) -> int:
    lib = _lib()
    assert not isinstance(lib, str)
    return lib.seccomp_syscall_resolve_name(name.encode())


def _build(allowed: Iterable[str], rules: Iterable[tuple[str, tuple[tuple, ...]]]) -> bytes:
    """The BPF program: allow ``allowed`` and each (name, comparisons) rule, trap the rest,
    kill a call made through another ABI. A comparison is (arg, op, a, b)."""
    lib = _lib()
    if isinstance(lib, str):
        raise OSError(lib)
    ctx = lib.seccomp_init(_ACT_TRAP)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        if lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _ACT_KILL_PROCESS) != 0:
            raise OSError("seccomp_attr_set failed")
        for name, cmps in [*((n, ()) for n in allowed), *rules]:
            nr = _resolve(name)
            if nr == _NR_ERROR:
                continue  # a name libseccomp does not know
            arr = (_ArgCmp * max(len(cmps), 1))(*(_ArgCmp(*c) for c in cmps))
            rc = lib.seccomp_rule_add_array(ctx, _ACT_ALLOW, nr, len(cmps), arr)
            if rc not in (0, -17):  # -EEXIST: the same rule twice
                raise OSError(-rc, f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")
        with tempfile.TemporaryFile() as f:
            rc = lib.seccomp_export_bpf(ctx, f.fileno())
            if rc != 0:
                raise OSError(-rc, f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            f.seek(0)
            return f.read()
    finally:
        lib.seccomp_release(ctx)


def _none_of(arg: int, bits: int) -> tuple:
    return (arg, _CMP_MASKED_EQ, bits, 0)


@functools.cache
def loading_filter() -> bytes:
    """The filter for loading the learner's library and the runtime's set-up."""
    return _build(_LOADING, [
        ("openat", (_none_of(2, _O_WRITING),)), ("open", (_none_of(1, _O_WRITING),)),
        ("prctl", ((0, _CMP_EQ, _PR_SET_NO_NEW_PRIVS, 0),)),  # only to install the grid's
        ("prctl", ((0, _CMP_EQ, _PR_SET_SECCOMP, 0),)),
    ])


@functools.cache
def grid_filter(write_fds: tuple[int, ...]) -> bytes:
    """The filter the runtime installs before the first block: ``write`` only to
    ``write_fds``, anonymous non-executable mappings, the clock, exit."""
    anonymous = (4, _CMP_MASKED_EQ, _LOW32, _LOW32)  # fd -1 (an int: its low 32 bits)
    rules = [("write", ((0, _CMP_EQ, fd, 0),)) for fd in write_fds]
    rules += [(m, (anonymous, _none_of(2, mmap.PROT_EXEC))) for m in ("mmap", "mmap2")]
    rules.append(("mprotect", (_none_of(2, mmap.PROT_EXEC),)))
    return _build(_GRID, rules)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Program:
    """A filter in memory, as ``struct sock_fprog`` (kept alive as long as this object)."""

    def __init__(self, code: bytes) -> None:
        self._code = ctypes.create_string_buffer(code, len(code))
        self.fprog = _SockFprog(len(code) // 8, ctypes.addressof(self._code))

    @property
    def address(self) -> int:
        return ctypes.addressof(self.fprog)


def install(code: bytes) -> None:
    """Install a filter on the calling thread (raises OSError when the kernel refuses)."""
    libc = ctypes.CDLL(None, use_errno=True)
    prog = Program(code)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_void_p(prog.address), 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def prepare(confined: bool = True) -> None:
    """Make the loading filter in this process before forking (where :func:`require` said
    filters can be made), so that no child spends its time making it again."""
    if confined:
        loading_filter()


def install_loading_filter(confined: bool = True) -> None:
    """In the forked child, before the learner's library is loaded (where
    :func:`require` said filters can be made)."""
    if confined:
        install(loading_filter())


def syscall_name(nr: int) -> str:
    """The name of system call ``nr`` of this machine's architecture."""
    lib = _lib()
    if not isinstance(lib, str):
        ptr = lib.seccomp_syscall_resolve_num_arch(_ARCH_NATIVE, nr)
        if ptr:
            name = ctypes.string_at(ptr).decode()
            ctypes.CDLL(None).free(ctypes.c_void_p(ptr))
            return name
    return f"system call {nr}"


def describe(kernel: str, nr: int | None, where: str = "") -> str:
    """The learner's message for a blocked system call."""
    what = f" ({syscall_name(nr)})" if nr is not None else ""
    at = f", in {where}" if where else ""
    return (f"kernel '{kernel}': the kernel tried to call the operating system{what}{at}; "
            "kernels cannot. A kernel reads and writes its buffers and shared memory; it "
            "opens no file, starts no process and calls no library function but printf.")
