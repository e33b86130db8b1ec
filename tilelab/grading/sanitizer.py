"""compute-sanitizer's racecheck and memcheck over one launch of a kernel, on a GPU.

``run_sanitizers`` starts ``compute-sanitizer --tool T python -m tilelab.grading.worker
--launch-once ...`` for both tools at once (each launches the kernel once, at the small
shape of :data:`SHAPES`) and reads each tool's error summary; :class:`Sanitizers` starts them
and lets the grader do CPU work before it waits.
Where compute-sanitizer is not installed, it says so and checks nothing.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from tilelab.catalog import exercises

TOOLS = ("racecheck", "memcheck")
OUTPUT_LIMIT = 1 << 20  # bytes of a tool's report read back
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:errors?|hazards?)")


def find_sanitizer() -> str | None:
    """The compute-sanitizer executable, from PATH or the CUDA toolkit folder."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_ROOT"), "/usr/local/cuda"):
        if root and os.path.exists(p := os.path.join(root, "bin", "compute-sanitizer")):
            return p
    return None


def parse(tool: str, output: str) -> dict[str, Any]:
    counts = [int(n) for n in _SUMMARY.findall(output)]
    errors = max(counts, default=0)
    hazards = [
        ln.strip()
        for ln in output.splitlines()
        if ln.startswith("=========")
        and ("hazard" in ln or "Invalid" in ln or "Race reported" in ln)
    ]
    summary = f"compute-sanitizer {tool}: {errors} problem(s)" + (
        f"; first: {hazards[0].lstrip('= ')}" if hazards else ""
    )
    return {
        "tool": tool,
        "errors": errors,
        "summary": summary,
        "excerpt": "\n".join(output.splitlines()[:40]),
    }


#: The grader's one launch per tool, per problem: one or two tiles of every tile size the
#: course uses (8 to 64) in each output dimension, each dimension ending in a partial tile
#: (the same remainders as the problem's ``sanitize_shape``: 18 = 50 - 32, 38 = 70 - 32),
#: and at least two steps of the K loop for a 32-wide tile (a missing second barrier races
#: between steps). A problem not named launches at its ``sanitize_shape``.
SHAPES: dict[str, tuple[int, ...]] = {"matmul": (18, 38, 40), "transpose": (18, 38)}


def command(exe: str, tool: str, exercise_id: str, source_path: str,
            print_limit: int = 20, shape: tuple[int, ...] | None = None) -> list[str]:
    """The command line running ``tool`` over one launch of the kernel in ``source_path``
    as exercise ``exercise_id`` (at ``shape``, else the problem's ``sanitize_shape``), in
    this interpreter."""
    return [exe, "--tool", tool, "--print-limit", str(print_limit), sys.executable,
            "-m", "tilelab.grading.worker", "--launch-once", "--exercise", exercise_id,
            "--source", source_path,
            *(["--shape", ",".join(map(str, shape))] if shape else [])]


WHOLE_TILE = 32  # an exercise whose every graded size is a multiple of it grades whole tiles


def grading_shape(exercise_id: str) -> tuple[int, ...]:
    """The shape the grader's sanitizer launches ``exercise_id``'s kernel at: the small one
    of :data:`SHAPES`; for an exercise graded on whole tiles only (a partial tile is out of
    its bounds by design), its own smallest graded shape of more than one tile."""
    ex = exercises.get(exercise_id)
    if ex.shapes and all(d % WHOLE_TILE == 0 for s in ex.shapes for d in s):
        more = [s for s in ex.shapes if math.prod(s) > WHOLE_TILE ** len(s)]
        return min(more, key=math.prod) if more else ex.shapes[0]
    return SHAPES.get(ex.problem.name, ex.problem.sanitize_shape)


class Sanitizers:
    """Both tools over one launch each, running at once in the background (the GPU and
    the CPU have room for both; the grader counts the lesson's traffic meanwhile);
    :meth:`results` waits for them. Nothing may be timed on the GPU until then."""

    def __init__(self, exercise_id: str, source: str, timeout: float = 300,
                 shape: tuple[int, ...] | None = None) -> None:
        self.timeout = timeout
        self.procs: dict[str, subprocess.Popen] = {}
        self.skipped: dict[str, Any] | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="tilelab-sanitize-")
        exe = find_sanitizer()
        if exe is None:
            self.skipped = {"skipped": {"errors": 0,
                                        "summary": "compute-sanitizer not installed; not run"}}
            return
        src = os.path.join(self._tmp.name, "kernel.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        for tool in TOOLS:
            with open(os.path.join(self._tmp.name, f"{tool}.txt"), "wb") as out:
                self.procs[tool] = subprocess.Popen(
                    command(exe, tool, exercise_id, src,
                            shape=shape or grading_shape(exercise_id)), stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def results(self) -> dict[str, Any]:
        """Each tool's finding (a tool past the time limit is killed: not judged)."""
        if self.skipped is not None:
            return self.skipped
        deadline = time.monotonic() + self.timeout
        results: dict[str, Any] = {}
        try:
            for tool, proc in self.procs.items():
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    results[tool] = {"tool": tool, "errors": 0,
                                     "summary": f"compute-sanitizer {tool} timed out; not judged"}
                    continue
                with open(os.path.join(self._tmp.name, f"{tool}.txt"), "rb") as f:
                    results[tool] = parse(tool, f.read(OUTPUT_LIMIT).decode("utf-8", "replace"))
        finally:
            self.stop()
        return results

    def stop(self) -> None:
        """End both tools (and what they started) and remove their folder."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self._tmp.cleanup()


def run_sanitizers(exercise_id: str, source: str, timeout: float = 300,
                   shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """racecheck and memcheck over one launch each of ``source`` (at ``shape``, else
    :func:`grading_shape`), run at once."""
    return Sanitizers(exercise_id, source, timeout, shape).results()
