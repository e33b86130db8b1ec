"""The read-only caches a grading sandbox starts with.

**The base cache** holds what every build needs first: the emulator prelude's probe and
the prelude precompiled for the graded and the analysis builds (the emulator also counts
a GPU submission's traffic) and, on a GPU, PyCUDA's builds of the
kernels every speed run compiles (the baselines). Only the course's own code builds it, in
a sandbox of its own (so the paths it records are the sandbox's), never a submission. It
lives in the user's cache folder under a name made of its content (the emulator's sources
and prelude, the C++ compiler's and nvcc's files, the backend, and on a GPU the
baselines' sources): built once per machine and course version, by the first check or
class run that needs it, in a temporary folder renamed into place (two processes racing
each build one; the first rename wins, the other's copy is removed).

**The learner's own compile cache** (``tilelab check`` and a notebook's visible check,
never a class run): bound read-only beside the base cache, so a re-check of an unchanged
kernel compiles nothing; what a check compiled comes back into it once the sandbox is gone
(:func:`keep_builds`: only files named as the emulator and PyCUDA name their builds; they
are the learner's own kernels, which the learner's notebook runs outside any sandbox
anyway, and the emulator checks a library's imports again each time it loads one). A
class run never binds it: one learner's builds never reach another's grading.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import tilelab
from tilelab import settings
from tilelab.catalog import exercises
from tilelab.device.backend import Backend
from tilelab.isolation import bubblewrap as bwrap

#: PyCUDA's builds' folder in a cache: :data:`tilelab.device.runtime.PYCUDA_CACHE` (not
#: imported here: the runtime loads the emulator, which a check's own process never needs)
PYCUDA_CACHE = "pycuda"
#: Where a sandbox sees the base cache, and the learner's own compile cache.
BASE = "/opt/tilelab-cache"
OWN = "/opt/tilelab-own-cache"

#: The emulator's sources (read, never imported: a check's own process need not load it).
EMU_DIR = Path(tilelab.__file__).parent / "emu"
#: A build of the emulator's, as :func:`tilelab.emu.compile.build` and the register report
#: name it: only these come back from a learner's check into the learner's cache.
_BUILD_NAME = {
    "emu": re.compile(r"^(?:[0-9a-f]{40}\.(?:so|json)|ptxas-[0-9a-f]{40}\.json)$"),
    PYCUDA_CACHE: re.compile(r"^[0-9a-f]{32}\.cubin$"),  # PyCUDA's compiler cache
}
_BUILD_LIMIT = 64 << 20  # bytes: no build of a kernel comes near it

_WARM_EMULATOR = "from tilelab.emu.compile import warm; warm()"
_WARM_GPU = "from tilelab.grading.timed import compile_speed_kernels as c; c()"


def key(backend: Backend) -> str:
    """The base cache's name: a digest of everything its content depends on."""
    h = hashlib.sha256(f"base 1 {backend}".encode())
    for path in sorted([*EMU_DIR.glob("*.py"), *EMU_DIR.glob("prelude/*.h")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    for tool in (os.environ.get("TILELAB_EMU_CXX", "g++"), "nvcc"):
        h.update(_identity(tool).encode())
    if backend == Backend.GPU:
        for ex in exercises.EXERCISES.values():
            for ref in (ex.baseline, ex.must_beat):
                if ref is not None:
                    h.update(ref.source().encode())
    return h.hexdigest()[:32]


def _identity(tool: str) -> str:
    """A compiler's file: its real path, size and time (a new version is a new file)."""
    found = shutil.which(tool)
    if found is None:
        return f"no {tool}"
    st = os.stat(found)
    return f"{os.path.realpath(found)} {st.st_size} {st.st_mtime_ns}"


def own_cache(part: str = "emu") -> Path:
    """The learner's own compile cache ``part``: the emulator's, as
    :func:`tilelab.emu.compile.cache_dir` finds it outside a sandbox, or PyCUDA's beside it."""
    base = os.environ.get("TILELAB_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "tilelab") / part


@functools.cache
def base_cache(backend: Backend) -> Path | None:
    """The base cache for ``backend``, built now if it is not there yet; None when no
    part of it could be built (each sandbox then builds its own, slower)."""
    top = settings.cache_root() / "base"
    folder = top / key(backend)
    if folder.is_dir():
        return folder
    try:
        top.mkdir(parents=True, exist_ok=True)
        _drop_abandoned(top)
        building = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=top))
    except OSError as exc:
        warnings.warn(f"tilelab: no base cache could be made in {top} ({exc}); every check "
                      "builds its own, slower", RuntimeWarning, stacklevel=2)
        return None
    built, failed = _build(backend, building)
    if failed or not built:  # never installed: the next process tries again
        _discard_later(building)
        return building if built else None
    try:
        building.rename(folder)
    except OSError:  # another process installed it first: theirs is as good
        shutil.rmtree(building, ignore_errors=True)
    return folder


ABANDONED = 3600  # seconds after which a build folder no process renamed was left by a dead one


def _drop_abandoned(top: Path) -> None:
    """Remove the build folders processes killed while building left behind."""
    now = time.time()
    for entry in os.scandir(top):
        if entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > ABANDONED:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _build(backend: Backend, folder: Path) -> tuple[int, int]:
    """Build each part of the base cache into ``folder`` in a sandbox; (built, failed)."""
    parts = [("the emulator's prelude probe and precompiled prelude", _WARM_EMULATOR, {})]
    if backend == Backend.GPU:
        parts.append(("PyCUDA's builds of the speed runs' baselines", _WARM_GPU,
                      {"PYCUDA_CACHE_DIR": f"{bwrap.WORK}/{PYCUDA_CACHE}"}))
    built = failed = 0
    limits = bwrap.Limits(wall_seconds=300, cpu_seconds=305, address_space=None)
    for what, code, env in parts:
        res = bwrap.run([sys.executable, "-c", code], folder, limits=limits,
                        env={"TILELAB_CACHE": bwrap.WORK, **env})
        if res.returncode == 0:
            built += 1
            continue
        failed += 1
        tail = " | ".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-6:])
        warnings.warn(f"tilelab: {what} could not be built once for every check (exit "
                      f"{res.returncode}: {tail}); every check builds its own, slower",
                      RuntimeWarning, stacklevel=3)
    return built, failed


_LEFT: list[Path] = []


def _discard_later(path: Path) -> None:
    if not _LEFT:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _LEFT])
    _LEFT.append(path)


def own_builds_allowed() -> bool:
    """Whether this grading may read and fill the learner's own compile cache: a learner's
    own check, never a class run (nor a notebook a class run executes)."""
    return not (settings.CLASS_GRADING.get() or settings.VERDICT_CACHE.get()
                or settings.SANDBOXED.get())


def binds(backend: Backend, own: bool) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The read-only binds and environment that give a grading sandbox its caches: the
    base cache, and with ``own`` the learner's own compile caches after it (the
    emulator's, and on a GPU PyCUDA's, kept in the sandbox's folder for :func:`keep_builds`)."""
    read_only, bases = [], []
    base = base_cache(backend)
    if base is not None:
        read_only.append((str(base), BASE))
        bases.append(BASE)
    if own:
        for part in _BUILD_NAME:
            if own_cache(part).is_dir():
                read_only.append((str(own_cache(part)), f"{OWN}/{part}"))
        bases.append(OWN)
    env = {"TILELAB_CACHE_BASE": os.pathsep.join(bases)} if bases else {}
    if backend == Backend.GPU:
        env["PYCUDA_CACHE_DIR"] = f"{bwrap.WORK}/.cache/{PYCUDA_CACHE}"
    return read_only, env


def keep_builds(work: Path) -> int:
    """Copy the builds a learner's own check made in its sandbox folder ``work`` into the
    learner's compile caches (once the sandbox is gone): regular files named as the
    emulator and PyCUDA name their builds, none over 64 MiB, none already there (a link
    to a base's build is not one). How many came back."""
    kept = 0
    for part, name in _BUILD_NAME.items():
        try:
            entries = list(os.scandir(work / ".cache" / part))
        except OSError:
            continue
        kept += _keep(entries, name, own_cache(part))
    return kept


def _keep(entries: list[os.DirEntry], name: re.Pattern, target: Path) -> int:
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        return 0
    kept = 0
    for entry in entries:
        if not name.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_size > _BUILD_LIMIT:
            continue
        dest = target / entry.name
        if dest.exists():
            continue
        try:
            tmp = target / f".{entry.name}.{os.getpid()}.tmp"
            shutil.copyfile(entry.path, tmp, follow_symlinks=False)
            os.replace(tmp, dest)
            kept += 1
        except OSError:
            continue
    return kept
