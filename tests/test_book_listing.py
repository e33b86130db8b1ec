"""Chapter 6's listings and ablation tables: kernel sections by marker, the lines a step
changed, and a pair of kernels missing from the data reading "not measured yet"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_book_sphinx import EXAMPLES, build

from tilelab.book.listing import SectionError, changed, section
from tilelab.catalog.reference import kernel_file


def test_a_section_is_the_text_between_its_markers_numbered_as_in_the_file():
    text = kernel_file("sgemm_04_warptile.cu")
    start, lines = section(text, "core")
    file_lines = text.split("\n")
    assert file_lines[start - 1:start - 1 + len(lines)] == lines
    assert "[core-begin]" in file_lines[start - 2]
    assert lines[0].strip().startswith("const int tid")
    assert not any("[core-" in ln for ln in lines)


def test_the_lines_a_step_changed_are_the_ones_marked():
    _, warp = section(kernel_file("sgemm_04_warptile.cu"), "core")
    _, vec = section(kernel_file("sgemm_03_vectorized.cu"), "core")
    marked = {warp[i - 1].strip() for i in changed(warp, vec)}
    assert any(ln.startswith("const int wRow") for ln in marked)  # the warp's position
    assert "__syncthreads();  // the tiles are complete" not in marked  # unchanged
    assert changed(vec, vec) == []


def test_a_missing_or_doubled_marker_is_refused():
    with pytest.raises(SectionError):
        section("a\n// [core-begin]\nb\n", "core")
    with pytest.raises(SectionError):
        section("// [x-begin]\n// [x-end]\n// [x-begin]\ny\n// [x-end]\n", "x")


@pytest.mark.slow
def test_an_ablation_without_its_pair_in_the_data_reads_not_measured_yet(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    doc = json.loads((data / "sgemm.json").read_text())
    doc["rows"] = [r for r in doc["rows"] if r["kernel"] != "warptile_bk8"]
    (data / "sgemm.json").write_text(json.dumps(doc))
    page = ("# Ablations\n\n```{ablation-table} sgemm\n:only: bk, interior\n:sizes: 4096\n\n"
            "Two rows.\n```\n\n```{kernel-listing} sgemm_06_async.cu\n:section: core\n"
            ":against: sgemm_05_double_buffer.cu\n```\n")
    html, warnings = build(tmp_path, data, page=page)
    assert warnings == ""
    bk = html[html.index("BK 8 to 16, warp-tiled layout"):][:600]
    assert "not measured yet" in bk  # warptile_bk8 is gone
    interior = html[html.index("unchecked interior loads, 128x128x16<"):][:600]
    assert "not measured yet" not in interior and "×" in interior
    assert 'class="hll"' in html and "copy16(" in html  # step 6's loop, changes marked


def test_no_fence_of_the_book_has_a_backtick_in_its_info_string():
    """CommonMark: a backtick fence whose info string holds a backtick is no fence at all,
    so a directive titled with `code` renders, with everything after it, as plain text
    (it hid chapter 6's steps 4 to 8 and the no-GPU page's backend table once)."""
    root = Path(__file__).resolve().parents[1]
    bad = [f"{p.relative_to(root)}:{i}" for p in sorted((root / "book").rglob("*.md"))
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if (m := line.lstrip()).startswith("```") and "`" in m.lstrip("`")]
    assert not bad, f"a fence's title holds a backtick (use plain text or a ~~~ fence): {bad}"
