"""Run a submission's code inside a bubblewrap sandbox.

Every process that runs code a learner wrote (the grading worker that compiles and runs a
kernel, the Jupyter kernel that runs a submitted notebook) runs under ``bwrap`` with:

- new user, pid, network, IPC, UTS and cgroup namespaces (``--unshare-all``), an
  unprivileged uid inside, no capabilities, ``--die-with-parent`` and ``--new-session``;
- a read-only view of the system (``/usr`` and the libraries), the Python environment and
  the ``tilelab`` package, and nothing else of the machine or of the course: no home
  folder, no other submission, no gradebook, solutions, release or course config;
- one fresh private writable folder (``/sandbox``) holding only the one submission, and a
  small private ``/tmp``;
- the NVIDIA device nodes bound in when the machine has them (a kernel runs on the GPU
  inside the sandbox): the control nodes and the grader's own GPU only
  (:mod:`tilelab.isolation.gpu_nodes`);
- one cgroup for its whole tree of processes (memory with its tmpfs pages, processes, CPU
  time), per-process limits (file size, open files), sized tmpfs mounts, a total
  wall-clock budget after which the whole tree is killed, and capped output: all applied
  by :mod:`tilelab.isolation.limits` and its launcher :mod:`tilelab.isolation.enter`.

The sandbox's own result comes back on a pipe created here (see :func:`run`) and is read
only after the sandbox's whole pid namespace is gone.
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import glob
import hashlib
import os
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilelab import settings
from tilelab.isolation import enter, gpu_nodes, scratch
from tilelab.isolation.limits import Cgroup, Limits, shim

BWRAP = "bwrap"
DEFAULT = Limits()
#: The uid and gid a submission runs as, inside the sandbox ("nobody").
INSIDE_ID = 65534
#: The submission's private writable folder, as the sandbox sees it.
WORK = "/sandbox"
#: Where the tilelab package is mounted, as the sandbox sees it.
PACKAGE_ROOT = "/opt/tilelab"

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf "
    "install bubblewrap), or run `make sandbox` from the course folder"
)
USERNS_HINT = (
    "bubblewrap needs unprivileged user namespaces: enable them with "
    "`sudo sysctl -w kernel.unprivileged_userns_clone=1` (Debian), "
    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+) or "
    "`sudo sysctl -w user.max_user_namespaces=15000`; inside a container, allow user "
    "namespaces in its seccomp/AppArmor profile"
)

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
)


@dataclass
class Result:
    """How a sandboxed command ended and what it left on its pipes."""

    returncode: int | None  # None when it was killed for its time budget
    stdout: bytes
    stderr: bytes
    channel: bytes  # what the command wrote on the parent-made result pipe (fd 3)
    truncated: bool  # stdout or stderr went past Limits.output_bytes
    timed_out: bool
    seconds: float
    command: list[str] = field(default_factory=list)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the message says what to do."""


@functools.cache
def problem() -> str | None:
    """Why a sandbox cannot be made on this machine, or None when one can: a probe
    sandbox, run once per boot of the machine and version of bubblewrap (a passed probe is
    remembered in the user's cache, :func:`_probe_stamp`; :func:`run` forgets it where
    bubblewrap then fails, and the next process probes again)."""
    exe = shutil.which(BWRAP)
    if exe is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}."
    argv = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--uid",
            str(INSIDE_ID), "--gid", str(INSIDE_ID), *_system_binds(), "--proc", "/proc",
            "--dev", "/dev", "--", "true"]
    stamp = _probe_stamp(argv)
    if stamp is not None and stamp.is_file():
        return None
    try:
        probe = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be run ({exc}): {INSTALL_HINT}."
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return (f"bubblewrap cannot create a sandbox here ({said[-1] if said else 'no reason'}"
                f"): {USERNS_HINT}.")
    if stamp is not None:
        with contextlib.suppress(OSError):
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
    return None


def _probe_stamp(argv: Sequence[str]) -> Path | None:
    """The file that says a probe sandbox ``argv`` was made on this boot of the machine,
    by this user, with this bubblewrap (its path, size and time); None where the boot
    cannot be named (then every process probes)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        st = os.stat(argv[0])
    except OSError:
        return None
    key = hashlib.sha256("\0".join([boot, str(os.getuid()), str(st.st_size),
                                     str(st.st_mtime_ns), *argv]).encode()).hexdigest()[:32]
    return settings.cache_root() / "sandbox" / f"probe-{key}"


def _forget_probe() -> None:
    """After bubblewrap itself failed: every later process probes again (this one keeps
    its answer, as it did before the stamp: a probe failing now for a passing reason, a
    namespace limit under load, must not turn a class run's worker away for its life)."""
    for stamp in (settings.cache_root() / "sandbox").glob("probe-*"):
        with contextlib.suppress(OSError):
            stamp.unlink()


def require() -> None:
    """Raise :class:`SandboxUnavailable` unless a sandbox can be made here."""
    why = problem()
    if why:
        raise SandboxUnavailable(why)


def nvidia_devices() -> list[str]:
    """The NVIDIA device nodes of this machine (none without a GPU)."""
    nodes = glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")
    return sorted({n for n in nodes if not os.path.isdir(n)})


def _system_binds() -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in _ETC_FILES:
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    return args


def python_paths() -> list[str]:
    """The folders the Python interpreter and its installed packages live in."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).resolve().parent.parent)}
    # package folders a .pth file or the environment added (never a course folder: only
    # folders named as installers name them)
    found |= {p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")
              and os.path.isdir(p)}
    return sorted(p for p in found if p and not _covered(p, _SYSTEM_DIRS))


def _covered(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def package_dir() -> str:
    """The folder of the ``tilelab`` package (mounted read-only at ``/opt/tilelab``)."""
    return str(Path(__file__).resolve().parent.parent)


@functools.cache
def byte_compiled(folder: str) -> bool:
    """Byte-compile the Python modules under ``folder`` where it is writable (a checkout,
    an editable install; an installed wheel comes compiled), once per process: a sandbox
    binds it read-only and writes no bytecode, so each of its Python processes would
    compile every module it imports again (measured on an H100 machine: 0.6 s for each of
    a GPU grade's four, the grading worker, both sanitizer tools' and Nsight Compute's).
    False where some could not be written. Where every module is as it was when they were
    last compiled (the stamp :func:`_sources_digest` names), nothing is read again."""
    stamp = Path(folder) / "__pycache__" / f"compiled-{_sources_digest(folder)}"
    if stamp.is_file():
        return True
    done = bool(compileall.compile_dir(folder, quiet=2))
    if done:
        with contextlib.suppress(OSError):
            for old in stamp.parent.glob("compiled-*"):
                old.unlink()
            stamp.touch()
    return done


def _sources_digest(folder: str) -> str:
    """A digest of the path, size and time of every ``.py`` file under ``folder``, and of
    this interpreter's bytecode tag."""
    h = hashlib.sha256(f"{sys.implementation.cache_tag} {sys.flags.optimize}".encode())
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(top, name))
                h.update(f"{top}/{name} {st.st_size} {st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:32]


def cuda_paths() -> list[str]:
    """CUDA toolkit folders outside ``/usr`` (``$CUDA_HOME``, ``/opt/cuda``...)."""
    out = []
    for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/opt/cuda",
              "/opt/nvidia"):
        if p and os.path.isdir(p) and not _covered(p, _SYSTEM_DIRS):
            out.append(os.path.realpath(p))
    return sorted(set(out))


def command(argv: Sequence[str], work: str | os.PathLike, *, env: Mapping[str, str],
            read_only: Sequence[tuple[str, str]] = (), writable: Sequence[tuple[str, str]] = (),
            limits: Limits = DEFAULT, work_read_only: bool = False,
            hidden: Sequence[str] = (), gpu: bool = True) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` with ``work`` as ``/sandbox``.

    ``read_only`` and ``writable`` are extra ``(host path, sandbox path)`` binds (the
    class run binds a kernel's connection folder; nothing of the course is bound).
    ``work_read_only`` binds ``work`` read-only (then only ``/tmp`` is writable);
    ``hidden``: sandbox paths covered by an empty folder; ``gpu`` False: no GPU device
    node at all (CUDA finds no device)."""
    exe = shutil.which(BWRAP) or BWRAP
    byte_compiled(package_dir())
    args = [exe, "--unshare-all", "--die-with-parent", "--new-session",
            "--uid", str(INSIDE_ID), "--gid", str(INSIDE_ID), "--cap-drop", "ALL",
            "--hostname", "sandbox"]
    args += _system_binds()
    # the private /tmp first: an interpreter or package that lives under /tmp (a venv in a
    # clone there) is bound on top of it, read-only, and stays visible
    args += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    for p in python_paths() + cuda_paths():
        args += ["--ro-bind", p, p]
    args += ["--ro-bind", package_dir(), f"{PACKAGE_ROOT}/tilelab"]
    for path in hidden:  # an empty, read-only folder over it
        args += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes),
             "--tmpfs", "/dev/shm"]
    nodes, gpu_env = gpu_nodes.sandbox_gpu(nvidia_devices()) if gpu else ([], {})
    for node in nodes:
        args += ["--dev-bind", node, node]
    if nodes and os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the PCI topology
    args += ["--ro-bind" if work_read_only else "--bind", os.fspath(work), WORK]
    for host, inside in read_only:
        args += ["--ro-bind", os.fspath(host), inside]
    for host, inside in writable:
        args += ["--bind", os.fspath(host), inside]
    # the sandbox's own root (the folders bwrap made for its mount points) is read-only:
    # only /tmp, /dev/shm and the binds named writable above can be written
    args += ["--remount-ro", "/", "--chdir", WORK, "--clearenv"]
    for k, v in sandbox_env({**gpu_env, **env}).items():
        args += ["--setenv", k, v]
    return [*args, "--", *argv]


#: The thread caps of BLAS alone (``tilelab.emu.native.BLAS_THREAD_CAPS``; the emulator is
#: not imported here): 1 in every sandbox where the grader sets no other value.
BLAS_THREAD_CAPS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: Thread-count variables a sandbox inherits from the grader (those Dask's nanny sets).
THREAD_CAPS = ("OMP_NUM_THREADS", *BLAS_THREAD_CAPS)


def sandbox_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment inside: a fixed minimal one plus ``extra`` (never the caller's)."""
    base = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/cuda/bin",
                                 "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": WORK,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": PACKAGE_ROOT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TILELAB_CACHE": f"{WORK}/.cache",
        "TILELAB_SANDBOXED": "1",
    }
    # one thread of BLAS from the start, as the emulator wants it (see
    # tilelab.emu.native.blas_on_one_thread), unless the grader's own caps say otherwise
    base |= dict.fromkeys(BLAS_THREAD_CAPS, "1")
    # the grader's thread caps too (a Dask worker sets them to 1: one task, one core's
    # worth of BLAS, not a thread per core in every worker's sandboxes at once)
    for key in ("CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                "TILELAB_EMU_TIMEOUT", "TILELAB_EMU_CXX", *THREAD_CAPS):
        if os.environ.get(key):
            base[key] = os.environ[key]
    return base | dict(extra)


CHANNEL = "{channel}"  # in ``run``'s argv: replaced by the result pipe's descriptor number


def run(argv: Sequence[str], work: str | os.PathLike, *, limits: Limits = DEFAULT,
        env: Mapping[str, str] | None = None, stdin: bytes | None = None,
        read_only: Sequence[tuple[str, str]] = (),
        writable: Sequence[tuple[str, str]] = ()) -> Result:
    """Run ``argv`` in a sandbox over ``work``; never raises for what the command does.

    The command finds a pipe made here for its result at the descriptor whose number
    replaces :data:`CHANNEL` in ``argv``; everything written on it, on stdout and on stderr
    is read while it runs (stdout and stderr capped) and returned only once the sandbox and
    every process in it has ended. Its whole tree is in one cgroup of its own (where the
    machine gives one: :func:`~tilelab.isolation.limits.missing_caps`), removed at its end."""
    require()
    chan_r, chan_w = os.pipe()
    argv = [a.replace(CHANNEL, str(chan_w)) for a in argv]
    cmd = command(argv, work, env=env or {}, read_only=read_only, writable=writable,
                  limits=limits)
    cgroup = Cgroup.make(limits)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            [*shim(limits, cgroup), *cmd],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(chan_w,),
            start_new_session=True,
        )
    except BaseException:
        os.close(chan_r)
        os.close(chan_w)
        if cgroup:
            cgroup.close()
        raise
    os.close(chan_w)
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.write(stdin)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        out, err, chan, truncated, timed_out = _pump(proc, chan_r, limits, t0, cgroup)
    finally:
        enter.kill_tree(proc.pid, cgroup.folders if cgroup else [])
        proc.wait()
        for f in (proc.stdout, proc.stderr, proc.stdin):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        os.close(chan_r)
        if cgroup:
            cgroup.close()
    if proc.returncode and not chan and err.startswith(b"bwrap: "):
        _forget_probe()  # bubblewrap made no sandbox: the next process asks again
    return Result(None if timed_out else proc.returncode, out, err, chan, truncated,
                  timed_out, time.monotonic() - t0, cmd)


def _pump(proc: subprocess.Popen, chan_r: int, limits: Limits, t0: float,
          cgroup: Cgroup | None) -> tuple[bytes, bytes, bytes, bool, bool]:
    """Read the pipes until they close; ``timed_out`` once the wall budget, or the whole
    tree's CPU time, is spent."""
    assert proc.stdout is not None and proc.stderr is not None
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray(),
            chan_r: bytearray()}
    caps = {proc.stdout.fileno(): limits.output_bytes, proc.stderr.fileno(): limits.output_bytes,
            chan_r: 16 << 20}
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    open_fds = len(bufs)
    try:
        while open_fds:
            left = t0 + limits.wall_seconds - time.monotonic()
            used = cgroup.cpu_seconds() if cgroup and limits.cpu_seconds else None
            if left <= 0 or (used is not None and used > (limits.cpu_seconds or 0)):
                timed_out = True
                break
            for key, _ in sel.select(min(left, 1.0)):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fd)
                    open_fds -= 1
                    continue
                room = caps[key.fd] - len(bufs[key.fd])
                if len(data) > room:
                    truncated = True
                bufs[key.fd] += data[:max(room, 0)]
        if not timed_out:
            left = max(0.0, t0 + limits.wall_seconds - time.monotonic())
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        sel.close()
    return (bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]),
            bytes(bufs[chan_r]), truncated, timed_out)


def private_folder(name: str = "sandbox") -> contextlib.AbstractContextManager[Path]:
    """A fresh folder for one submission, removed afterwards whatever the submission made
    in it (its owner only; see :mod:`tilelab.isolation.scratch`)."""
    return scratch.folder(name)
