"""compute-sanitizer's racecheck and memcheck over one launch of a kernel, on a GPU.

``run_sanitizers`` starts ``compute-sanitizer --tool T python -m tilelab.grading.worker
--launch-once ...``, which launches the kernel once at the problem's ``sanitize_shape``, and
reads the tool's error summary.
Where compute-sanitizer is not installed, it says so and checks nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

TOOLS = ("racecheck", "memcheck")
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


def command(exe: str, tool: str, exercise_id: str, source_path: str,
            print_limit: int = 20) -> list[str]:
    """The command line running ``tool`` over one launch of the kernel in ``source_path``
    as exercise ``exercise_id``, in this interpreter."""
    return [exe, "--tool", tool, "--print-limit", str(print_limit), sys.executable,
            "-m", "tilelab.grading.worker", "--launch-once", "--exercise", exercise_id,
            "--source", source_path]


def run_sanitizers(exercise_id: str, source: str, timeout: float = 300) -> dict[str, Any]:
    exe = find_sanitizer()
    if exe is None:
        return {"skipped": {"errors": 0, "summary": "compute-sanitizer not installed; not run"}}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        for tool in TOOLS:
            cmd = command(exe, tool, exercise_id, src)
            try:
                p = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=timeout, errors="replace"
                )
                results[tool] = parse(tool, p.stdout + p.stderr)
            except subprocess.TimeoutExpired:
                results[tool] = {
                    "tool": tool,
                    "errors": 0,
                    "summary": f"compute-sanitizer {tool} timed out; not judged",
                }
    return results
