"""Seccomp filters for the forked child that runs a learner's kernel (x86-64 Linux).

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

A blocked call made while the grid runs is reported by :func:`describe` in a learner's words.
"""

from __future__ import annotations

import ctypes
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
_RET_KILL_PROCESS = 0x80000000
_RET_TRAP = 0x00030000
_RET_ALLOW = 0x7FFF0000
_LD_ABS_W, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_O_WRITING = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND
_PROT_EXEC = 0x4

#: x86-64 system call numbers, by name (the ones the filters allow, and the ones a
#: kernel is most likely to try; others are reported by number).
SYSCALLS = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6,
    "poll": 7, "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12,
    "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17,
    "pwrite64": 18, "readv": 19, "writev": 20, "access": 21, "pipe": 22, "sched_yield": 24,
    "mremap": 25, "madvise": 28, "dup": 32, "dup2": 33, "nanosleep": 35, "getpid": 39,
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "bind": 49, "listen": 50,
    "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "exit": 60,
    "wait4": 61, "kill": 62, "uname": 63, "fcntl": 72, "truncate": 76, "ftruncate": 77,
    "getdents": 78, "getcwd": 79, "chdir": 80, "rename": 82, "mkdir": 83, "rmdir": 84,
    "creat": 85, "link": 86, "unlink": 87, "symlink": 88, "readlink": 89, "chmod": 90,
    "chown": 92, "umask": 95, "gettimeofday": 96, "getrlimit": 97, "ptrace": 101,
    "getuid": 102, "getppid": 110, "setsid": 112, "sigaltstack": 131, "personality": 135,
    "prctl": 157,
    "arch_prctl": 158, "setrlimit": 160, "chroot": 161, "mount": 165, "gettid": 186,
    "tkill": 200, "time": 201, "futex": 202, "getdents64": 217, "set_tid_address": 218,
    "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230, "exit_group": 231,
    "tgkill": 234, "openat": 257, "mkdirat": 258, "newfstatat": 262, "unlinkat": 263,
    "renameat": 264, "linkat": 265, "symlinkat": 266, "readlinkat": 267, "fchmodat": 268,
    "faccessat": 269, "unshare": 272, "splice": 275, "dup3": 292, "pipe2": 293,
    "prlimit64": 302, "process_vm_readv": 310, "process_vm_writev": 311, "getrandom": 318,
    "memfd_create": 319, "bpf": 321, "execveat": 322, "statx": 332, "rseq": 334,
    "io_uring_setup": 425, "clone3": 435, "close_range": 436, "faccessat2": 439,
}
_NAMES = {v: k for k, v in SYSCALLS.items()}

# What loading the library, Python's last steps in the child and the runtime's set-up use.
_LOADING = (
    "read", "write", "close", "stat", "fstat", "lstat", "lseek", "mmap", "mprotect", "munmap",
    "brk", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "pread64", "readv", "writev",
    "access", "sched_yield", "mremap", "madvise", "getpid", "exit", "uname", "fcntl",
    "getcwd", "readlink", "gettimeofday", "getrlimit", "getuid", "sigaltstack", "gettid",
    "futex", "getdents64", "clock_gettime", "clock_getres", "clock_nanosleep", "exit_group",
    "newfstatat", "readlinkat", "faccessat", "getrandom", "statx", "faccessat2", "nanosleep",
)
# While the grid runs: memory, the clock, exit; write is checked (see grid_filter).
_GRID = (
    "brk", "munmap", "mremap", "madvise", "rt_sigreturn", "exit", "exit_group",
    "clock_gettime", "gettimeofday", "futex",
)


def available() -> bool:
    """Whether this machine's filters can be built (x86-64 Linux)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg_lo(i: int) -> int:
    return 16 + 8 * i  # offsetof(struct seccomp_data, args[i]), low 32 bits (little endian)


def _program(allowed: tuple[str, ...], checks: dict[int, list[bytes]]) -> bytes:
    """Allow ``allowed``; for each number in ``checks`` run its instructions (which end in
    returns, with the system call number no longer in A); trap everything else."""
    prog = [
        _insn(_LD_ABS_W, 0, 0, 4),  # arch
        _insn(_JEQ, 1, 0, AUDIT_ARCH_X86_64),
        _insn(_RET, 0, 0, _RET_KILL_PROCESS),  # another ABI (int 0x80): killed
        _insn(_LD_ABS_W, 0, 0, 0),  # nr
        _insn(_JGE, 0, 1, 0x40000000),
        _insn(_RET, 0, 0, _RET_KILL_PROCESS),  # the x32 ABI: killed
    ]
    for name in allowed:
        prog += [_insn(_JEQ, 0, 1, SYSCALLS[name]), _insn(_RET, 0, 0, _RET_ALLOW)]
    for nr, block in checks.items():
        prog += [_insn(_JEQ, 0, len(block), nr), *block]
    prog.append(_insn(_RET, 0, 0, _RET_TRAP))
    return b"".join(prog)


def _flags_check(arg: int, mask: int) -> list[bytes]:
    """Allow when none of ``mask``'s bits is set in argument ``arg``; else trap."""
    return [_insn(_LD_ABS_W, 0, 0, _arg_lo(arg)), _insn(_JSET, 0, 1, mask),
            _insn(_RET, 0, 0, _RET_TRAP), _insn(_RET, 0, 0, _RET_ALLOW)]


def loading_filter() -> bytes:
    """The filter for loading the learner's library and the runtime's set-up."""
    prctl = [_insn(_LD_ABS_W, 0, 0, _arg_lo(0)),  # only to install the grid's filter
             _insn(_JEQ, 2, 0, _PR_SET_NO_NEW_PRIVS), _insn(_JEQ, 1, 0, _PR_SET_SECCOMP),
             _insn(_RET, 0, 0, _RET_TRAP), _insn(_RET, 0, 0, _RET_ALLOW)]
    return _program(_LOADING, {SYSCALLS["openat"]: _flags_check(2, _O_WRITING),
                               SYSCALLS["open"]: _flags_check(1, _O_WRITING),
                               SYSCALLS["prctl"]: prctl})


def grid_filter(write_fds: tuple[int, ...]) -> bytes:
    """The filter the runtime installs before the first block: ``write`` only to
    ``write_fds``, anonymous non-executable mappings, the clock, exit."""
    write = [_insn(_LD_ABS_W, 0, 0, _arg_lo(0))]
    for i, fd in enumerate(write_fds):
        write.append(_insn(_JEQ, len(write_fds) - i, 0, fd))
    write += [_insn(_RET, 0, 0, _RET_TRAP), _insn(_RET, 0, 0, _RET_ALLOW)]
    mmap = [_insn(_LD_ABS_W, 0, 0, _arg_lo(4)),
            _insn(_JEQ, 1, 0, 0xFFFFFFFF),  # fd -1 (anonymous): go on to the prot check
            _insn(_RET, 0, 0, _RET_TRAP),
            _insn(_LD_ABS_W, 0, 0, _arg_lo(2)),
            _insn(_JSET, 0, 1, _PROT_EXEC),
            _insn(_RET, 0, 0, _RET_TRAP),
            _insn(_RET, 0, 0, _RET_ALLOW)]
    return _program(_GRID, {SYSCALLS["write"]: write, SYSCALLS["mmap"]: mmap,
                            SYSCALLS["mprotect"]: _flags_check(2, _PROT_EXEC)})


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


def install_loading_filter() -> None:
    """In the forked child, before the learner's library is loaded (x86-64 only)."""
    if available():
        install(loading_filter())


def syscall_name(nr: int) -> str:
    return _NAMES.get(nr, f"system call {nr}")


def describe(kernel: str, nr: int | None, where: str = "") -> str:
    """The learner's message for a blocked system call."""
    what = f" ({syscall_name(nr)})" if nr is not None else ""
    at = f", in {where}" if where else ""
    return (f"kernel '{kernel}': the kernel tried to call the operating system{what}{at}; "
            "kernels cannot. A kernel reads and writes its buffers and shared memory; it "
            "opens no file, starts no process and calls no library function but printf.")
