"""Every data file of the book describes one GPU and today's code (tilelab.experiments.
datacheck): the check itself on small folders made here, then on book/data."""

from __future__ import annotations

import json
from pathlib import Path

from tilelab.catalog import road
from tilelab.catalog.reference import KERNELS
from tilelab.experiments import datacheck, provenance

REPO = Path(__file__).resolve().parents[1]


def _file(folder: Path, name: str, gpu: str | None = "GPU A", kernels=None, **prov) -> None:
    doc = {"experiment": name, "title": name, "description": "made here, not a measurement",
           "provenance": {"gpu": gpu, "revision": "0" * 40, "dirty": False,
                          "code_digest": "x", "kernels": kernels or {}, **prov},
           "columns": {}, "rows": []}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(doc))


def _digests(*keys: str) -> dict[str, str]:
    return {k: provenance.kernel_digest(datacheck.current_source(k)) for k in keys}


def test_one_gpu_and_todays_kernels_is_no_problem(tmp_path):
    _file(tmp_path, "matmul", kernels=_digests("naive", "tiled32"))
    _file(tmp_path, "sgemm", kernels=_digests("ahead", "shapes_64x128x16"))
    _file(tmp_path, "sgemm_ptxas", gpu=None, describes_gpu="GPU A",
          kernels=_digests("file:bank_wide.cu"))
    assert datacheck.problems(tmp_path) == []


def test_two_gpus_are_named_with_their_files(tmp_path):
    _file(tmp_path, "matmul")
    _file(tmp_path, "sgemm", gpu="GPU B")
    _file(tmp_path, "model", gpu=None, describes_gpu="GPU B")
    (found,) = datacheck.problems(tmp_path)
    assert "2 GPUs" in found and "GPU A: matmul" in found and "GPU B: model, sgemm" in found


def test_a_kernel_changed_since_it_was_measured_is_named(tmp_path):
    stale = dict(_digests("naive"), tiled32="0123456789abcdef", gone_kernel="00")
    _file(tmp_path, "matmul", kernels=stale)
    found = datacheck.problems(tmp_path)
    assert any("'tiled32' changed since it was measured" in p for p in found)
    assert any("'gone_kernel' is not in the code" in p for p in found)
    assert not any("'naive'" in p for p in found)


def test_a_file_without_a_revision_or_from_a_dirty_checkout_is_named(tmp_path):
    _file(tmp_path, "matmul", revision=None, code_digest=None)
    _file(tmp_path, "sgemm", dirty=True)
    found = datacheck.problems(tmp_path)
    assert any(p.startswith("matmul.json: names no code revision") for p in found)
    assert any(p.startswith("sgemm.json: measured from a checkout with uncommitted") for p in found)


def test_a_comment_edit_keeps_a_digest_and_a_define_does_not():
    src = KERNELS["tiled32"].source()
    assert provenance.kernel_digest(src) == provenance.kernel_digest(
        src.replace("\n", "\n// a new comment line\n", 1))
    other = road.kernel_refs()["dbuf_checked"].source()
    assert provenance.kernel_digest(road.kernel_refs()["dbuf"].source()) != \
        provenance.kernel_digest(other)


def test_the_book_s_data_describe_one_gpu_and_todays_kernels():
    """Fails until every file of book/data is measured again in one run
    (benchmarks/gpu_session.sh OUT book bookcounters, then OUT/data copied in)."""
    assert list((REPO / "book" / "data").glob("*.json"))
    problems = datacheck.problems(REPO / "book" / "data")
    assert problems == [], "\n".join(problems)
