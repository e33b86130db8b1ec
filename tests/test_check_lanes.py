"""Two emulated launches at once give each shape the result one at a time gives: the same
inputs (drawn first, in order, from the same seed), the same comparisons, the same first
failed launch, after which nothing more is read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "submissions"

# run as the grading worker runs (one BLAS thread, see check_shapes), in a process of its own
SCRIPT = """
import json, sys
import numpy as np
from tilelab.catalog import exercises
from tilelab.device.runtime import get_runtime
from tilelab.grading.correctness import check_shapes
ex, source = exercises.get(sys.argv[1]), open(sys.argv[2]).read()
rt = get_runtime("emu")
fn = rt.SourceModule(source).get_function(ex.kernel)
out = {}
for lanes in (1, 2):
    seen = []
    for shape, res in check_shapes(rt, fn, ex.problem, ex.launch, ex.shapes,
                                   np.random.default_rng(7), quick=True, lanes=lanes):
        if isinstance(res, Exception):
            seen.append([list(shape), type(res).__name__, str(res)[:200]])
            break
        seen.append([list(shape), res.ok, res.wrong, res.message])
    out[lanes] = seen
print(json.dumps(out))
"""


def _both(exercise_id: str, source: str, tmp_path: Path) -> tuple[list, list]:
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "TILELAB_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", SCRIPT, exercise_id, str(path)], env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    return out["1"], out["2"]


@pytest.mark.parametrize("fixture", ["naive-wrong_result", "tiled-no_boundary_guard"])
def test_two_lanes_give_every_shape_the_same_result_as_one(fixture, tmp_path):
    exercise_id = fixture.split("-")[0]
    one, two = _both(exercise_id, (FIXTURES / f"{fixture}.cu").read_text(), tmp_path)
    assert one == two
    assert any(r[1] is not True for r in one)  # each fixture fails somewhere


def test_the_first_failed_launch_ends_the_shapes_with_two_lanes_too(tmp_path):
    src = KERNELS["naive"].source().replace("if (row < M && col < N) {", "{")
    one, two = _both("naive", src, tmp_path)
    assert one == two
    assert one[-1][1] == "OutOfBoundsAccess" and len(one) < len(exercises.get("naive").shapes)
