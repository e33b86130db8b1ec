"""The picture of what a kernel's threads touched: the emulator's trace of one block,
carried back in the verdict, drawn beside the reference's."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tilelab import picture
from tilelab.catalog import exercises
from tilelab.grading.emu_steps import reference_trace
from tilelab.grading.sandbox import grade_source


def elements(trace: dict, param: str, kind: str) -> dict[int, int]:
    """Element -> phase mask of one buffer and direction."""
    g = next(g for g in trace["global"] if (g["param"], g["kind"]) == (param, kind))
    return {i: m for s, n, m in g["runs"] for i in range(s, s + n)}


def test_the_tiled_reference_reads_one_row_band_of_a_tile_by_tile():
    ex = exercises.get("tiled")
    t = reference_trace(ex)  # M = N = K = 64: block (1, 0) owns C[0:32, 32:64]
    assert t["block"] == [1, 0, 0]
    a = elements(t, "A", "read")
    assert set(a) == {r * 64 + k for r in range(32) for k in range(64)}
    first, second = a[0], a[32]  # K's first tile, then its second, a phase (barriers) later
    assert first != second and all(a[r * 64 + k] == (first if k < 32 else second)
                                   for r in range(32) for k in range(64))
    c = elements(t, "C", "write")
    assert set(c) == {r * 64 + 32 + j for r in range(32) for j in range(32)}


def test_a_column_read_puts_the_lanes_of_a_warp_in_one_bank():
    t = reference_trace(exercises.get("transpose_shared"))
    reads = [w for w in t["warps"] if w["array"] == "tile" and w["kind"] == "read"]
    assert reads and len({w % 32 for w in reads[0]["words"] if w >= 0}) == 1
    t = reference_trace(exercises.get("transpose_padded"))
    reads = [w for w in t["warps"] if w["array"] == "tile" and w["kind"] == "read"]
    assert len({w % 32 for w in reads[0]["words"] if w >= 0}) == 32


@pytest.mark.slow
def test_a_learner_kernel_s_trace_and_the_reference_s_come_back_in_the_verdict_and_are_drawn():
    ex = exercises.get("add2d")
    swapped = (ex.reference.source()
               .replace("blockIdx.y * blockDim.y + threadIdx.y;", "ROW;")
               .replace("blockIdx.x * blockDim.x + threadIdx.x;",
                        "blockIdx.y * blockDim.y + threadIdx.y;")
               .replace("ROW;", "blockIdx.x * blockDim.x + threadIdx.x;"))
    v = grade_source("add2d", swapped, backend_name="emu", trace_reference=True)
    assert not v.correct and v.touch  # a wrong kernel without shared memory: traced too
    ref = v.reference_touch  # traced in the grading child, beside the kernel's
    assert ref and not picture.differs(ref, reference_trace(ex))
    assert grade_source("add2d", swapped, backend_name="emu").reference_touch is None  # unasked
    assert picture.differs(v.touch, ref)
    assert not picture.differs(ref, ref)
    png = picture.draw(ex, v.touch, ref)
    img = Image.open(io.BytesIO(png))
    assert img.width <= 1280 and img.height <= 1400  # readable at 1280 px, unscaled
    # the two halves differ: the learner's block covers other elements than the reference's
    px = np.asarray(img.convert("L"))
    assert not np.array_equal(px[:, : img.width // 2], px[:, img.width // 2 : 2 * (img.width // 2)])


@pytest.mark.slow
def test_every_step_s_reference_picture_draws():
    for ex_id in ("stencil", "block_sum", "matmul_at"):
        ex = exercises.get(ex_id)
        ref = reference_trace(ex)
        png = picture.draw(ex, ref, ref)
        assert Image.open(io.BytesIO(png)).width <= 1280


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_every_step_s_page_shows_the_current_reference_picture(folder):
    """Each step's notebook (a page of the book) shows its reference's picture, drawn from
    the reference kernel the registry names now (`tilelab release` redraws a stale one)."""
    import json
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    for assignment, ids in exercises.ASSIGNMENTS.items():
        nb = next((repo / folder / assignment).glob("*.ipynb"))
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                       if c["cell_type"] == "markdown")
        for ex_id in ids:
            ex = exercises.get(ex_id)
            assert f"](pictures/{ex_id}.png)" in text, (assignment, ex_id)
            path = picture.picture_path(nb.parent, ex)
            assert picture.is_current(path, ex), f"{path} is stale: run  tilelab release"
            assert Image.open(path).width <= 1280
