"""ctypes views of the runtime's C structures, and running a function in a forked child."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import mmap
import os
import secrets
import selectors
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class ParamDesc(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in (
        "is_pointer", "is_floating", "is_signed", "size", "pointee_size", "pointee_align")]


class KernelDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("nparams", ctypes.c_int),
        ("params", ctypes.POINTER(ParamDesc)),
        ("texts", ctypes.POINTER(ctypes.c_char_p)),
        ("fn", ctypes.c_void_p),
        ("invoke", ctypes.c_void_p),
    ]


class BufSpec(ctypes.Structure):
    _fields_ = [("shared", ctypes.c_void_p), ("nbytes", ctypes.c_uint64),
                ("elem", ctypes.c_uint64), ("align", ctypes.c_uint64)]


class LaunchSpec(ctypes.Structure):
    _fields_ = [
        ("nbuf", ctypes.c_int32),
        ("report_fd", ctypes.c_int32),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
        ("bufs", ctypes.POINTER(BufSpec)),
        ("arg_buf", ctypes.POINTER(ctypes.c_int32)),
        ("arg_off", ctypes.POINTER(ctypes.c_uint64)),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("dyn_shared", ctypes.c_uint64),
        ("nglobals", ctypes.c_int32),
        ("global_buf", ctypes.POINTER(ctypes.c_int32)),
        ("report_tag", ctypes.c_char * 32),
    ]


class GlobalDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("addr", ctypes.c_void_p), ("size", ctypes.c_uint64),
                ("constant", ctypes.c_int)]


def kernel_table(lib: ctypes.CDLL) -> ctypes.Array:
    """The library's exported ``tilelab_kernels`` array."""
    n = ctypes.c_int.in_dll(lib, "tilelab_nkernels").value
    return (KernelDesc * max(n, 1)).in_dll(lib, "tilelab_kernels")[:n]


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def symbol_name(address: int) -> str:
    """The exported symbol at ``address`` (a kernel's mangled name), or ""."""
    libc = ctypes.CDLL(None)
    info = DlInfo()
    if not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_sname:
        return ""
    return info.dli_sname.decode() if info.dli_saddr == address else ""


def describe_library(path: str) -> dict:
    """Kernel and parameter descriptors of a compiled library (call in a child process)."""
    lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    lib.tilelab_static_shared_bytes.restype = ctypes.c_uint64
    kernels = []
    for k in kernel_table(lib):
        params = []
        for i in range(k.nparams):
            p = k.params[i]
            params.append({f: getattr(p, f) for f, _ in ParamDesc._fields_}
                          | {"text": (k.texts[i] or b"").decode()})
        kernels.append({"name": k.name.decode(), "params": params,
                        "symbol": symbol_name(k.fn) or k.name.decode()})
    n = ctypes.c_int.in_dll(lib, "tilelab_nglobals").value
    found = []
    for g in (GlobalDesc * max(n, 1)).in_dll(lib, "tilelab_globals")[:n]:
        init = ctypes.string_at(g.addr, g.size) if g.size else b""
        found.append({"name": g.name.decode(), "size": g.size, "constant": bool(g.constant),
                      "init": init.hex() if init.count(0) != len(init) else ""})  # "": zeros
    return {"kernels": kernels, "static_shared": lib.tilelab_static_shared_bytes(),
            "globals": found}


@dataclass
class ChildResult:
    """What a forked child left: its report (the JSON after the tag), stdout bytes, and how
    it ended. ``forged``: the report pipe held something besides the one tagged line."""

    report: bytes
    stdout: bytes
    stdout_truncated: bool
    status: int | None  # exit code, or None when killed by a signal
    signal: int | None
    timed_out: bool
    seconds: float
    forged: bool = False
    stopped: bool = False  # killed because its caller no longer wanted the result


def new_tag() -> bytes:
    """A fresh tag for one child's report line (no kernel can know it in advance)."""
    return b"tl-" + secrets.token_hex(12).encode()


def tagged(tag: bytes, payload: bytes) -> bytes:
    """The one report line: ``tag``, a space, ``payload`` (one line of JSON), a newline."""
    return tag + b" " + payload.rstrip(b"\n") + b"\n"


def untag(raw: bytes, tag: bytes) -> tuple[bytes, bool]:
    """The payload of a report pipe's contents, and whether anything else was written on it
    (a second line, or a line without ``tag``: a kernel wrote on the pipe)."""
    if not raw:
        return b"", False
    head = tag + b" "
    if raw.startswith(head) and raw.endswith(b"\n") and raw.count(b"\n") == 1:
        return raw[len(head):-1], False
    return b"", True


#: Held while this process forks a child (:func:`run_forked`), and while it makes, lists or
#: removes the children's shared mappings (:func:`shared_region`).
FORK_LOCK = threading.Lock()


#: The variables that cap the threads of NumPy's BLAS (OpenBLAS, or MKL) when a process
#: starts: a grading sandbox sets them to 1 in its environment from its start (see
#: ``tilelab.isolation.bubblewrap.sandbox_env``). Not ``OMP_NUM_THREADS``, which also says
#: how many launches a check runs at once (``tilelab.grading.budget.emu_lanes``).
BLAS_THREAD_CAPS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def blas_on_one_thread() -> None:
    """NumPy's BLAS on the calling thread, for this process's life. A fork made while
    OpenBLAS's thread pool works never returns (its fork handler waits for the pool, and
    the thread that called BLAS waits forever), and any thread of this process may be in
    BLAS when another forks a launch: the grader's own diagnosis, say, beside a launch of
    the next shape. Called when this module loads, so before any thread can be in BLAS
    with a pool while another forks (the limit holds until restored, which nothing does).
    Nothing to do inside a sandbox that started with every cap at 1 where NumPy's BLAS is
    an OpenBLAS on threads of its own (which reads its cap at its start, so never made a
    pool; not an OpenMP build, which reads OMP_NUM_THREADS): there threadpoolctl (some
    30 ms of a check's start) is not even loaded."""
    if os.environ.get("TILELAB_SANDBOXED") == "1" and all(
            os.environ.get(k) == "1" for k in BLAS_THREAD_CAPS) and _openblas_on_pthreads():
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _openblas_on_pthreads() -> bool:
    """Whether NumPy was built with an OpenBLAS that runs its own threads (NumPy's wheels'),
    as its build configuration says."""
    import numpy as np

    blas = getattr(np.__config__, "CONFIG", {}).get("Build Dependencies", {}).get("blas", {})
    return "openblas" in str(blas.get("name", "")).lower() and \
        "OPENMP" not in str(blas.get("openblas configuration", "")).upper()


blas_on_one_thread()


#: Address -> length of each child's shared mapping now in this process (see
#: :func:`shared_region`); made, listed, removed and forked only under :data:`FORK_LOCK`.
_REGIONS: dict[int, int] = {}


@contextlib.contextmanager
def shared_region(length: int) -> Iterator[tuple[mmap.mmap, int]]:
    """An anonymous shared mapping of ``length`` bytes for one child's buffers, and its
    address. Launches run at once, so other children are forked while it exists: each of
    them unmaps it first thing (:func:`run_forked`), and sees no other launch's buffers.
    Every view of it must be gone when the block ends."""
    with FORK_LOCK:
        region = mmap.mmap(-1, length)
        anchor = ctypes.c_char.from_buffer(region)
        base = ctypes.addressof(anchor)
        _REGIONS[base] = length
    try:
        yield region, base
    finally:
        del anchor
        with FORK_LOCK:
            del _REGIONS[base]
            region.close()


def _unmap_regions(keep: int | None) -> None:
    """In a child: unmap every child's shared mapping but ``keep``'s."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    for base, length in _REGIONS.items():
        if base != keep and libc.munmap(base, length) != 0:
            raise OSError(ctypes.get_errno(), "munmap of another launch's buffers failed")


#: The child's report pipe is always this descriptor (its stdout and stderr are 1 and 2), so
#: that a system-call filter naming it can be made once, before any fork.
REPORT_FD = 3


#: How often a child's wait looks at its ``stop`` event (seconds).
STOP_POLL_S = 0.05


def run_forked(child: Callable[[int, bytes], None], timeout: float,
               stdout_cap: int = 1 << 20, region: int | None = None,
               stop: threading.Event | None = None) -> ChildResult:
    """Fork; the child calls ``child(REPORT_FD, tag)`` with its stdout on a pipe, then exits.
    Of the shared mappings :func:`shared_region` made, the child keeps only ``region``'s.

    The child writes one report line on ``report_fd``, headed by ``tag`` (see
    :func:`tagged`); anything else found on that pipe marks the result ``forged``. The
    parent collects the report pipe and the child's stdout (keeping at most ``stdout_cap``
    bytes), kills the child's process group after ``timeout`` seconds, or as soon as
    ``stop`` is set (the result's ``stopped``), and survives whatever the child does.
    """
    tag = new_tag()
    t0 = time.monotonic()
    parent = os.getpid()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (Jupyter)
        with FORK_LOCK:  # no other launch's child inherits this one's pipes
            rep_r, rep_w = os.pipe()
            out_r, out_w = os.pipe()
            pid = os.fork()
            if pid:
                os.close(rep_w)
                os.close(out_w)
    if pid == 0:  # the child: never returns
        code = 70
        # no cyclic collection in the child: it would run the finalizers of whatever the
        # parent's threads had left as garbage at the fork (a temporary folder removed, a
        # process waited for) under the system-call filter, which kills the child for a
        # call the learner's code never made (how an honest kernel, under load, was once
        # refused as calling the operating system while it loaded)
        gc.disable()
        try:
            _detach(parent)
            _unmap_regions(region)
            rep, out = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (rep_w, out_w))
            os.dup2(out, 1)
            os.dup2(out, 2)  # glibc's own complaints join the captured output
            os.dup2(rep, REPORT_FD)
            _close_other_fds(REPORT_FD)
            rep_w = REPORT_FD
            child(REPORT_FD, tag)
            code = 0
        except BaseException as exc:  # report anything, then exit without unwinding
            with contextlib.suppress(BaseException):
                os.write(rep_w, tagged(tag, json.dumps(
                    {"status": "error", "message": repr(exc)}).encode()))
        finally:
            os._exit(code)
    with contextlib.suppress(OSError):  # the child got there first (or already exited)
        os.setpgid(pid, pid)
    report, out = bytearray(), bytearray()
    truncated = timed_out = stopped = False
    sel = selectors.DefaultSelector()
    sel.register(rep_r, selectors.EVENT_READ)
    sel.register(out_r, selectors.EVENT_READ)
    # the child's end is awaited within the time too, even once it has closed both pipes
    # (-1: no pidfd here, before Linux 5.3, or the child has ended)
    pidfd = -1
    with contextlib.suppress(OSError):
        pidfd = os.pidfd_open(pid)
    if pidfd >= 0:
        sel.register(pidfd, selectors.EVENT_READ)
    pipes = 2
    try:
        while pipes or pidfd >= 0:
            left = t0 + timeout - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if stop is not None:
                if stop.is_set():
                    stopped = True
                    break
                left = min(left, STOP_POLL_S)
            for key, _ in sel.select(left):
                if key.fd == pidfd:
                    sel.unregister(pidfd)
                    os.close(pidfd)
                    pidfd = -1
                    continue
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fd)
                    pipes -= 1
                elif key.fd == rep_r:
                    report += data
                else:
                    room = stdout_cap - len(out)
                    truncated = truncated or len(data) > room
                    out += data[:max(room, 0)]
    finally:
        if timed_out or stopped or pipes or pidfd >= 0:
            _kill_group(pid)
        sel.close()
        for fd in (rep_r, out_r, pidfd):
            if fd >= 0:
                os.close(fd)
        _, wstatus = os.waitpid(pid, 0)
    seconds = time.monotonic() - t0
    status = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None
    sig = os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None
    payload, forged = untag(bytes(report), tag)
    return ChildResult(payload, bytes(out), truncated, status, sig, timed_out, seconds, forged,
                       stopped)


def _detach(parent: int) -> None:
    """In the child: own process group, and die with the parent (even by SIGKILL)."""
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(70)


def _close_other_fds(report_fd: int) -> None:
    """Close inherited descriptors (a grader's pipes, a notebook's sockets) but ours."""
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        limit = 4096
    os.closerange(3, report_fd)
    os.closerange(report_fd + 1, max(limit, report_fd + 1))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
