"""Grade a kernel source in a fresh child process with time and memory limits.

The hidden tests, the ``tilelab check`` command and the class pipeline all call
:func:`grade_source`. The child (``tilelab.grade_worker``) sees only the kernel source,
so a learner's Python cannot patch the grader that scores it; a crash, an endless loop or
a flood of output in the child becomes a verdict, never an exception here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tilelab import backend, exercises, sandbox
from tilelab.verdict import Verdict

#: A folder of verdicts already measured by a class run's clean process (see
#: :func:`cache_verdict`); set by :mod:`tilelab.classroom` while nbgrader runs notebooks.
CACHE_ENV = "TILELAB_VERDICT_CACHE"
DEFAULT_TIMEOUT = float(os.environ.get("TILELAB_GRADE_TIMEOUT", "300"))
MEMORY_LIMIT = 6 * 1024**3  # address space of an emulator grading process
OUTPUT_LIMIT = 64 * 1024  # of the child's stderr, read back for a crash report
FILE_LIMIT = 64 * 1024**2  # any file the child writes, its stderr included


def _limits(backend_name: str) -> None:
    """Run in the child before exec: own process group, caps on files and memory."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if backend_name == "emu":  # CUDA maps huge address ranges; cap only the emulator
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def grade_source(
    exercise_id: str,
    source: str | bytes,
    *,
    backend_name: str | None = None,
    timeout: float | None = None,
    speed: bool = True,
    sanitize: bool = True,
    gate: float | None = None,
    sandboxed: bool | None = None,
) -> Verdict:
    """Grade ``source`` for an exercise in a clean child process; always returns a Verdict.

    ``sandboxed``: True grades in a bubblewrap sandbox (raises
    :class:`~tilelab.sandbox.SandboxUnavailable` where none can be made), False in a plain
    child process, None (the default) in a sandbox wherever one can be made.

    During a class run (``TILELAB_VERDICT_CACHE`` set) a source the class grader has
    already graded gets that verdict back instead of being graded a second time."""
    ex = exercises.get(exercise_id)
    cached = _cached(exercise_id, source)
    if cached is not None:
        return cached
    chosen = backend_name or backend.active()
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    args = ["--exercise", ex.id, "--backend", chosen]
    args += ["--no-speed"] if not speed else []
    args += ["--no-sanitize"] if not sanitize else []
    args += ["--gate", str(gate)] if gate is not None else []
    if use_sandbox(sandboxed):
        return _grade_sandboxed(ex, chosen, data, args, timeout)
    return _grade_in_child(ex, chosen, data, args, timeout)


def use_sandbox(wanted: bool | None) -> bool:
    """Whether to grade in a bubblewrap sandbox: ``wanted`` if given (True raises
    :class:`~tilelab.sandbox.SandboxUnavailable` where none can be made), else where one
    can be made and this process is not already inside one."""
    if wanted is not None:
        if wanted:
            sandbox.require()
        return wanted
    if os.environ.get("TILELAB_SANDBOXED"):
        return False  # already inside one (a notebook in a class run)
    return sandbox.problem() is None


def sandbox_limits(backend_name: str, timeout: float) -> sandbox.Limits:
    """The grading worker's limits: its time budget, memory (the address space on the
    emulator; none on a GPU, where CUDA maps vast ranges and no learner code runs on the
    host), files, output."""
    emu = backend_name == "emu"
    return sandbox.Limits(
        wall_seconds=timeout,
        cpu_seconds=int(timeout) + 5,
        address_space=MEMORY_LIMIT if emu else None,
        data=None,
        file_bytes=FILE_LIMIT,
        output_bytes=OUTPUT_LIMIT,
    )


def _grade_sandboxed(ex: exercises.Exercise, chosen: str, data: bytes, args: list[str],
                     timeout: float) -> Verdict:
    """The worker in a sandbox over a fresh folder holding only the kernel source; the
    verdict comes back on the pipe the sandbox module made, read once every process of
    the sandbox is gone (never from a file the submission could write)."""
    base = _base_cache(chosen)
    with sandbox.private_folder(prefix="tilelab-grade-") as work:
        (work / "kernel.cu").write_bytes(data)
        cmd = [sys.executable, "-m", "tilelab.grade_worker", "--source",
               f"{sandbox.WORK}/kernel.cu", "--out", f"fd:{sandbox.CHANNEL}", *args]
        res = sandbox.run(cmd, work, limits=sandbox_limits(chosen, timeout),
                          read_only=[(str(base), BASE_CACHE)] if base else [],
                          env={"TILELAB_CACHE_BASE": BASE_CACHE} if base else {})
    if res.timed_out:
        return _failed(ex, chosen, _too_long(timeout))
    if res.channel:
        try:
            return Verdict.from_dict(json.loads(res.channel.decode("utf-8")))
        except (ValueError, TypeError) as exc:
            return _failed(ex, chosen, f"the grader's verdict could not be read: {exc}")
    tail = " | ".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-8:])
    return _failed(ex, chosen, _death(res.returncode or 0, tail))


BASE_CACHE = "/opt/tilelab-cache"  # where a sandbox sees the prelude's probe results


@functools.cache
def _base_cache(backend_name: str) -> Path | None:
    """A folder holding what every emulator build needs first (the prelude's probe), built
    once in a sandbox of its own, read-only to every grading sandbox after it (no
    submission ever writes it). None on a GPU, or when it could not be built."""
    if backend_name != "emu":
        return None
    folder = Path(tempfile.mkdtemp(prefix="tilelab-sandbox-cache-"))
    warm = [sys.executable, "-c", "from tilelab.emu.compile import prelude_needs as p; "
            "p(False); p(True)"]
    res = sandbox.run(warm, folder, env={"TILELAB_CACHE": sandbox.WORK},
                      limits=sandbox.Limits(wall_seconds=300))
    return folder if res.returncode == 0 else None


def _too_long(timeout: float) -> str:
    return (f"grading took longer than {timeout:g} s and was stopped "
            "(an endless loop in the kernel, or a barrier some threads never reach?)")


def _grade_in_child(ex: exercises.Exercise, chosen: str, data: bytes, args: list[str],
                    timeout: float) -> Verdict:
    """The worker as a plain child process (no sandbox: a learner's own checks)."""
    with tempfile.TemporaryDirectory(prefix="tilelab-grade-") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        out = os.path.join(tmp, "verdict.json")
        with open(src, "wb") as f:
            f.write(data)
        cmd = [sys.executable, "-m", "tilelab.grade_worker", "--source", src, "--out", out,
               *args]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        log = os.path.join(tmp, "stderr.txt")
        with open(log, "wb") as err:
            # stdout is dropped (a printf flood must not fill this process's memory); the
            # child's stderr goes to a file, capped by RLIMIT_FSIZE, for a crash report
            proc = subprocess.Popen(
                cmd,
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=lambda: _limits(chosen),
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return _failed(ex, chosen, _too_long(timeout))
            finally:
                _kill_group(proc)  # a timed-out child, and anything it started, ends here
        if os.path.exists(out):
            try:
                with open(out, encoding="utf-8") as f:
                    return Verdict.from_dict(json.load(f))
            except (OSError, ValueError, TypeError) as exc:
                return _failed(ex, chosen, f"the grader's verdict could not be read: {exc}")
        return _failed(ex, chosen, _death(proc.returncode, _tail(log)))


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - OUTPUT_LIMIT))
        lines = f.read().decode("utf-8", "replace").strip().splitlines()[-8:]
    return " | ".join(lines)


def _death(returncode: int, tail: str) -> str:
    """Why the grading process ended without a verdict, in a learner's words."""
    if returncode == -signal.SIGXFSZ:
        return (
            f"the grading process was stopped: it wrote more than {FILE_LIMIT >> 20} MiB of "
            "output (a printf in a loop, or in every thread?). Remove or limit the printf calls."
        )
    if returncode < 0:
        how = f"signal {signal.Signals(-returncode).name}"
    else:
        how = f"exit status {returncode}"
    return f"the grading process died ({how}) before writing a verdict" + (
        f": {tail}" if tail else ""
    )


def _cache_file(folder: str | Path, exercise_id: str, source: str | bytes) -> Path:
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    return Path(folder) / f"{exercise_id}-{hashlib.sha256(data).hexdigest()[:32]}.json"


def cache_verdict(folder: str | Path, source: str | bytes, verdict: Verdict) -> Path:
    """Keep ``verdict`` of ``source`` in ``folder`` for :func:`grade_source` to return."""
    path = _cache_file(folder, verdict.exercise, source)
    path.write_text(json.dumps(verdict.to_dict()), encoding="utf-8")
    return path


def _cached(exercise_id: str, source: str | bytes) -> Verdict | None:
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return None
    try:
        path = _cache_file(folder, exercise_id, source)
        v = Verdict.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    v.messages.append("(graded once, by the class grader's clean process)")
    return v


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _failed(ex: exercises.Exercise, backend_name: str, message: str) -> Verdict:
    v = Verdict(
        exercise=ex.id,
        backend=backend_name,
        gate=ex.gate,
        max_points_correct=ex.points_correct,
        max_points_speed=ex.points_speed,
    )
    v.messages.append(message)
    return v
