"""The variants that place the speed gates: every one correct, each exercise with kernels
that must pass and kernels that must fail, and the data the calibration writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelab.catalog import exercises
from tilelab.catalog.reference import slow_but_right
from tilelab.catalog.variants import VARIANTS
from tilelab.experiments.calibration import COLUMNS, rows, table
from tilelab.grading.sandbox import grade_source

ALL = [(e, v) for e, vs in VARIANTS.items() for v in vs]


def test_each_exercise_lists_variants_that_must_pass_and_must_fail():
    assert set(VARIANTS) == {e.id for e in exercises.EXERCISES.values() if e.speed_graded}
    for ex_id, vs in VARIANTS.items():
        must = {v.must for v in vs}
        assert must == {"pass", "fail"}, ex_id
        assert any(v.key == "reference" and v.must == "pass" for v in vs), ex_id
        # the baseline resubmitted (the lesson skipped) is always a must-fail
        assert any(v.must == "fail" and v.source() == slow_but_right(ex_id) for v in vs), ex_id
        assert len({v.key for v in vs}) == len(vs)


@pytest.mark.slow
@pytest.mark.parametrize(("exercise_id", "variant"), ALL,
                         ids=[f"{e}-{v.key}" for e, v in ALL])
def test_every_variant_is_correct_on_the_emulator(exercise_id, variant):
    v = grade_source(exercise_id, variant.source(), backend_name="emu", speed=False)
    assert v.correct, "\n".join(v.messages)
    ex = exercises.get(exercise_id)
    if ex.max_bank_degree is not None:  # the emulator's feedback agrees with `must`
        assert v.speed_passed is None and v.points_speed == 0
        assert (v.bank_degree is not None and v.bank_degree <= ex.max_bank_degree) is (
            variant.must == "pass"), "\n".join(v.messages)


def _doc() -> dict:
    """A calibration document shaped as `calibrate` returns it (speedups made up)."""
    gates = {}
    for ex_id, vs in VARIANTS.items():
        speed = {v.key: (2.0 if v.must == "pass" else 1.0) for v in vs}
        gates[ex_id] = {"gate": 1.414, "margin": 1.414, "slowest_pass": vs[0].key,
                        "fastest_fail": next(v.key for v in vs if v.must == "fail"),
                        "refused": None, "default_gate": exercises.get(ex_id).gate,
                        "baseline": "b", "baseline_ms": 1.0, "shape": [8, 8],
                        "variants": {k: {"ms": 1 / s, "speedup": s} for k, s in speed.items()}}
    return {"gates": gates, "refused": []}


def test_the_data_file_holds_one_row_per_variant():
    found = rows(_doc())  # what write_data writes (on a GPU, with its provenance)
    assert len(found) == len(ALL)
    assert {r["must"] for r in found} == {"pass", "fail"}
    assert set(found[0]) == set(COLUMNS)
    assert "tiled" in table(_doc()) and "1.41x" in table(_doc())


def test_the_instructors_page_shows_the_calibration_columns():
    page = (Path(__file__).resolve().parents[1] / "book/appendix/instructors.md").read_text()
    block = page[page.index("{measured-table} calibration"):]
    shown = block[block.index(":columns:") + 9:].splitlines()[0]
    assert {c.strip() for c in shown.split(",")} <= set(COLUMNS)
    example = json.loads((Path(__file__).parent / "data/book/calibration.json").read_text())
    assert set(example["columns"]) == set(COLUMNS)
