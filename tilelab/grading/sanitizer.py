"""compute-sanitizer's racecheck and memcheck over one launch of a kernel, on a GPU.

``run_sanitizers`` starts ``compute-sanitizer --tool T python -m tilelab.grading.worker
--launch-once ...`` for both tools at once (each launches the kernel once, at the small
shape of :data:`SHAPES`) and reads each tool's error summary; :class:`Sanitizers` starts them
(ahead of the grade, if asked: :mod:`tilelab.grading.sidecar`) and lets the grader go on
before it waits.
Where compute-sanitizer is not installed, it says so and checks nothing.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any

from tilelab.catalog import exercises
from tilelab.grading.sidecar import Sidecar

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
        if ln.startswith("=========") and "SUMMARY" not in ln  # its count, not a hazard
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
            print_limit: int = 20, shape: tuple[int, ...] | None = None,
            wait: bool = False) -> list[str]:
    """The command line running ``tool`` over one launch of the kernel in ``source_path``
    as exercise ``exercise_id`` (at ``shape``, else the problem's ``sanitize_shape``), in
    this interpreter (``wait``: the worker waits for go, :mod:`tilelab.grading.sidecar`)."""
    return [exe, "--tool", tool, "--print-limit", str(print_limit), sys.executable,
            "-m", "tilelab.grading.worker", "--launch-once", "--exercise", exercise_id,
            "--source", source_path,
            *(["--shape", ",".join(map(str, shape))] if shape else []),
            *(["--wait"] if wait else [])]


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
    the CPU have room for both; the grader goes on meanwhile). They start at once, before
    the grader has the source to give them: each starts CUDA, then waits for :meth:`go`
    (:mod:`tilelab.grading.sidecar`); :meth:`results` waits for their findings."""

    def __init__(self, exercise_id: str, timeout: float = 300,
                 shape: tuple[int, ...] | None = None) -> None:
        self.timeout = timeout
        self.tools: dict[str, Sidecar] = {}
        self.skipped: dict[str, Any] | None = None
        self.given = False
        self.marks: dict[str, float] = {}  # "<tool>_<step>": seconds (Sidecar.timeline)
        self.not_run: dict[str, dict[str, Any]] = {}  # tools skipped (:meth:`skip`)
        self._tmp = tempfile.TemporaryDirectory(prefix="tilelab-sanitize-")
        self.source = os.path.join(self._tmp.name, "kernel.cu")
        exe = find_sanitizer()
        if exe is None:
            self.skipped = {"skipped": {"errors": 0,
                                        "summary": "compute-sanitizer not installed; not run"}}
            return
        for tool in TOOLS:
            self.tools[tool] = Sidecar(
                command(exe, tool, exercise_id, self.source,
                        shape=shape or grading_shape(exercise_id), wait=True),
                self._tmp.name, tool, merge=True)

    def skip(self, tool: str, why: str) -> None:
        """Run ``tool`` no further (ended now, whatever it was doing), and report it as not
        run, and ``why``."""
        sidecar = self.tools.pop(tool, None)
        if sidecar is not None:
            sidecar.stop()
            self.not_run[tool] = {"tool": tool, "errors": 0,
                                  "summary": f"compute-sanitizer {tool}: not run: {why}"}

    def go(self, source: str) -> None:
        """Give both tools the (validated) source: each launches the kernel once."""
        with open(self.source, "w", encoding="utf-8") as f:
            f.write(source)
        self.given = True
        for sidecar in self.tools.values():
            sidecar.go()

    def results(self) -> dict[str, Any]:
        """Each tool's finding (a tool past the time limit is killed: not judged)."""
        if self.skipped is not None:
            return self.skipped
        if not self.given:
            self.stop()
            raise RuntimeError("the sanitizers were never given the source (go)")
        deadline = time.monotonic() + self.timeout
        results: dict[str, Any] = dict(self.not_run)
        try:
            for tool, sidecar in self.tools.items():
                if not sidecar.wait(deadline - time.monotonic()):
                    results[tool] = {"tool": tool, "errors": 0,
                                     "summary": f"compute-sanitizer {tool} timed out; not judged"}
                    continue
                text = sidecar.output(OUTPUT_LIMIT)[0]
                results[tool] = parse(tool, text)
                self.marks |= sidecar.timeline(tool, [text])
        finally:
            self.stop()
        return results

    def stop(self) -> None:
        """End both tools (and what they started) and remove their folder."""
        for sidecar in self.tools.values():
            sidecar.stop()
        self._tmp.cleanup()


def run_sanitizers(exercise_id: str, source: str, timeout: float = 300,
                   shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """racecheck and memcheck over one launch each of ``source`` (at ``shape``, else
    :func:`grading_shape`), run at once."""
    tools = Sanitizers(exercise_id, timeout, shape)
    tools.go(source)
    return tools.results()
