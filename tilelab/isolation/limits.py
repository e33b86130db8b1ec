"""What a submission may use, and the one place its limits are applied.

A sandbox's limits hold in two layers:

- one cgroup per submission caps its whole tree of processes together: memory
  (``memory.max``, tmpfs pages included, no swap), processes (``pids.max``) and CPU time
  (its accounting, read by the launcher); made by :meth:`Cgroup.make`, removed by
  :meth:`Cgroup.close` after the submission, whatever it did;
- per-process resource limits (file size, open files, CPU time, and on the emulator the
  address space) set by :mod:`tilelab.isolation.enter` before ``bwrap``.

cgroup v2 is used where the grader's own cgroup delegates the memory and pids
controllers, v1 where the grader may write its memory and pids hierarchies; elsewhere
:func:`missing_caps` says which caps are missing and how to get them, before grading.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from tilelab.isolation import enter

MEMORY_LIMIT = 6 * 1024**3  # address space of an emulator grading process
FILE_LIMIT = 64 * 1024**2  # any file the worker writes, its stderr included
CGROUP_ROOT = "/sys/fs/cgroup"
SHIM = str(Path(enter.__file__).resolve())


@dataclass(frozen=True)
class Limits:
    """One sandbox's limits (``None``: not limited)."""

    wall_seconds: float = 600.0  # total budget; the whole process tree is killed after it
    cpu_seconds: int | None = 600  # of the whole tree (cgroup), and RLIMIT_CPU per process
    memory: int | None = 8 << 30  # the whole tree's memory, tmpfs included (cgroup)
    address_space: int | None = None  # RLIMIT_AS, per process; where no cgroup caps memory
    data: int | None = None  # RLIMIT_DATA, per process
    processes: int | None = 256  # pids.max of the tree (and RLIMIT_NPROC)
    file_bytes: int | None = 256 << 20  # RLIMIT_FSIZE: any one file written
    open_files: int | None = 512  # RLIMIT_NOFILE
    output_bytes: int = 1 << 20  # of stdout and of stderr kept; the rest is dropped
    tmp_bytes: int = 512 << 20  # size of each private tmpfs (/tmp, /dev/shm)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def rlimits(limits: Limits) -> list[tuple[str, int]]:
    """The per-process resource limits (the address space only where the caller names
    one: on a GPU, CUDA maps vast ranges it never uses; ``memory`` is the cgroup's)."""
    pairs = (("RLIMIT_CPU", limits.cpu_seconds), ("RLIMIT_AS", limits.address_space),
             ("RLIMIT_DATA", limits.data), ("RLIMIT_NPROC", limits.processes),
             ("RLIMIT_FSIZE", limits.file_bytes), ("RLIMIT_NOFILE", limits.open_files),
             ("RLIMIT_CORE", 0))
    return [(name, value) for name, value in pairs if value is not None]


def shim(limits: Limits, cgroup: Cgroup | None, wall: float | None = None) -> list[str]:
    """The launcher's command line, ``--`` last (the sandbox's command follows)."""
    cmd = [sys.executable, "-S", SHIM, json.dumps(rlimits(limits)),
           json.dumps(cgroup.folders if cgroup else [])]
    if wall is not None:
        cmd += ["--wall", str(wall)]
        if limits.cpu_seconds is not None and cgroup is not None:
            cmd += ["--cpu", str(limits.cpu_seconds)]
    return [*cmd, "--"]


# ------------------------------------------------------------------ cgroups


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    out = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                out[name.removeprefix("name=")] = path
    return out


def _v2_parent() -> tuple[str | None, str]:
    """A v2 cgroup below which the sandboxes' cgroups can have memory and pids, or None
    and why not."""
    if not os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        return None, "no cgroup v2 hierarchy at /sys/fs/cgroup"
    own = os.path.join(CGROUP_ROOT, _own_paths().get("", "/").lstrip("/"))
    if not os.access(own, os.W_OK):
        return None, f"the grader's cgroup {own} is not writable by it (not delegated)"
    wanted = {"memory", "pids"}
    with open(os.path.join(own, "cgroup.controllers")) as f:
        if not wanted <= set(f.read().split()):
            return None, f"the grader's cgroup {own} has no memory and pids controllers"
    with open(os.path.join(own, "cgroup.subtree_control")) as f:
        if wanted <= set(f.read().split()):
            return own, ""
    # a delegated cgroup holding only the grader: the grader moves into a leaf of its own
    # and hands the controllers down (a cgroup with processes cannot)
    if enter.members([own]) - {os.getpid()}:
        return None, (f"the grader's cgroup {own} holds other processes, so it cannot "
                      "hand the memory and pids controllers down")
    try:
        leaf = os.path.join(own, "tilelab-grader")
        os.makedirs(leaf, exist_ok=True)
        enter.join([leaf])
        with open(os.path.join(own, "cgroup.subtree_control"), "w") as f:
            f.write("+memory +pids")
    except OSError as exc:
        return None, f"the memory and pids controllers could not be enabled in {own} ({exc})"
    return own, ""


def _v1_parents() -> dict[str, str]:
    """The v1 hierarchies (memory, pids, cpuacct) this grader may make cgroups in."""
    own = _own_paths()
    out = {}
    for name in ("memory", "pids", "cpuacct"):
        if name not in own:
            continue
        for mount in (name, "cpu,cpuacct", "cpuacct,cpu") if name == "cpuacct" else (name,):
            folder = os.path.join(CGROUP_ROOT, mount, own[name].lstrip("/"))
            if os.access(folder, os.W_OK) and os.path.exists(
                    os.path.join(folder, "cgroup.procs")):
                out[name] = folder
                break
    return out


@functools.cache
def _parents() -> tuple[str, dict[str, str], str]:
    """("v2" or "v1" or "", {controller: parent folder}, why a cap is missing)."""
    v2, why = _v2_parent()
    if v2:
        return "v2", {"": v2}, ""
    v1 = _v1_parents()
    missing = [c for c in ("memory", "pids") if c not in v1]
    if v1 and not missing:
        return "v1", v1, ""
    return ("v1" if v1 else ""), v1, why + (
        f"; cgroup v1: no writable {' or '.join(missing)} hierarchy" if missing else "")


def missing_caps() -> str | None:
    """Which whole-submission caps this machine cannot give a sandbox, and how to get
    them (None: every cap holds)."""
    _, _, why = _parents()
    if not why:
        return None
    return (f"one submission's processes cannot be capped together (memory with tmpfs, "
            f"process count, CPU time): {why}. Each process is still limited on its own "
            "(address space, CPU time, processes, file size). To cap them together, run "
            "the grader in a cgroup v2 that delegates the memory and pids controllers, "
            "alone in it: `systemd-run --scope -p Delegate=yes tilelab grade ...` (as "
            "root) or `systemd-run --user --scope -p Delegate=yes tilelab grade ...`; in a "
            "container, give it a writable cgroup (Docker: --cgroupns=private, and a "
            "systemd or an entry point that delegates memory and pids)")


def sized_folder(folder: str, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes on ``folder`` (shared with a sandbox, written by
    it); False where this process may not mount (the folder then stays on its disk)."""
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"size={size},mode=0700".encode()
    return libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 0, opts) == 0


def unmount(folder: str) -> None:
    """Undo :func:`sized_folder` (lazily: a process may still hold a socket in it)."""
    ctypes.CDLL(None, use_errno=True).umount2(folder.encode(), 2)  # MNT_DETACH


def warn_missing_caps() -> None:
    """Warn (once per process) before grading where a whole-submission cap is missing."""
    why = missing_caps()
    if why:
        warnings.warn(f"tilelab: {why}", RuntimeWarning, stacklevel=2)


@dataclass
class Cgroup:
    """One submission's cgroup: a folder per v1 controller, or one v2 folder."""

    folders: list[str]
    caps_memory: bool

    @classmethod
    def make(cls, limits: Limits) -> Cgroup | None:
        """A fresh cgroup holding ``limits``' memory and process caps (None where none
        can be made here: :func:`missing_caps` says why)."""
        version, parents, _ = _parents()
        made: list[str] = []
        capped = False
        try:
            for controller, parent in parents.items():
                folder = tempfile.mkdtemp(prefix="tilelab-sandbox-", dir=parent)
                made.append(folder)
                if controller in ("", "memory") and limits.memory is not None:
                    capped = _memory(folder, limits.memory, version)
                if controller in ("", "pids") and limits.processes is not None:
                    _write(folder, "pids.max", limits.processes)
        except OSError:
            cls(made, False).close()
            return None
        return cls(made, capped) if made else None

    def cpu_seconds(self) -> float | None:
        return enter.cpu_seconds(self.folders)

    def oom_kills(self) -> int:
        """How many of its processes the kernel has killed for its memory cap."""
        for folder in self.folders:
            for name in ("memory.events", "memory.oom_control"):  # v2, v1
                with contextlib.suppress(OSError, ValueError), \
                        open(os.path.join(folder, name)) as f:
                    for line in f:
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
        return 0

    def close(self) -> None:
        """Kill everything still in it and remove it."""
        enter.kill_tree(None, self.folders)
        for folder in self.folders:
            for _ in range(100):  # the last processes may still be exiting
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write(folder: str, name: str, value: object) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write(str(value))


def _memory(folder: str, limit: int, version: str) -> bool:
    if version == "v2":
        _write(folder, "memory.max", limit)
        with contextlib.suppress(OSError):  # absent without swap accounting: no swap anyway
            _write(folder, "memory.swap.max", 0)
        return True
    _write(folder, "memory.limit_in_bytes", limit)
    try:
        _write(folder, "memory.memsw.limit_in_bytes", limit)  # memory and swap: no swap
    except OSError:
        with contextlib.suppress(OSError):
            _write(folder, "memory.swappiness", 0)
    return True
