"""``racecheck.json``: compute-sanitizer racecheck on the tiled kernel, with and without
each of its barriers."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tilelab.catalog.problems import MATMUL
from tilelab.catalog.reference import KERNELS, tiled_without_barrier
from tilelab.device.runtime import Runtime
from tilelab.experiments.datafile import write
from tilelab.grading import sanitizer


def variants() -> dict[str, str]:
    """The reference tiled kernel as written and without its first or second barrier."""
    return {
        "both_barriers": KERNELS["tiled32"].source(),
        "no_barrier_1": tiled_without_barrier(1),
        "no_barrier_2": tiled_without_barrier(2),
    }


def run(rt: Runtime, out: Path) -> Path:
    """compute-sanitizer racecheck on each variant, launched once as the ``tiled`` exercise."""
    exe = sanitizer.find_sanitizer()
    if exe is None:
        raise RuntimeError("the racecheck experiment needs compute-sanitizer (CUDA toolkit)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in variants().items():
            path = Path(tmp, f"{name}.cu")
            path.write_text(src, encoding="utf-8")
            p = subprocess.run(
                sanitizer.command(exe, "racecheck", "tiled", str(path), print_limit=5),
                capture_output=True,
                text=True,
                timeout=600,
            )
            res = sanitizer.parse("racecheck", p.stdout + p.stderr)
            rows.append(
                {
                    "variant": name,
                    "tool": "compute-sanitizer racecheck",
                    "hazards": res["errors"],
                    "excerpt": res["excerpt"][-2000:],
                }
            )
    return write(
        out,
        "racecheck",
        "compute-sanitizer racecheck on the tiled kernel",
        "The reference tiled kernel (TILE 32), one launch at (M, N, K) = "
        f"{MATMUL.sanitize_shape}, as written and with its first or second "
        "__syncthreads() removed.",
        {"variant": "", "hazards": "", "excerpt": ""},
        rows,
        method="compute-sanitizer --tool racecheck, one launch",
        kernels={"tiled32": KERNELS["tiled32"].source()},
    )
