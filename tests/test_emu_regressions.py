"""The emulator against answers a GPU gave: kernels the differential harness found divergent
(benchmarks/fidelity_diff.py), each kept with the GPU's recorded outcome and outputs in
tests/fidelity/regressions/*.json, run here on the emulator and judged as the harness judges
them, so CI checks them without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fidelity.corpus import Case, modules_of
from fidelity.outcome import Outcome, verdict
from fidelity.runner import emu_run

HERE = Path(__file__).resolve().parent / "fidelity"
FILES = sorted((HERE / "regressions").glob("*.json"))


def _load(path: Path) -> list[tuple[Case, Outcome]]:
    data = json.loads(path.read_text())
    rows = data["cases"] if isinstance(data, dict) else data
    return [(Case.from_json(r["case"]), Outcome.from_json(r["gpu"])) for r in rows]


def test_every_kept_case_has_the_gpus_answer_for_its_own_kernel():
    assert FILES
    for path in FILES:
        for case, gpu in _load(path):
            assert gpu.status in ("ok", "fault", "refused", "launch"), (path.name, case.id)
            if gpu.status == "ok":
                assert any(a.compared for a in case.args) and gpu.outputs, case.id


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_emulator_agrees_with_the_gpu(path: Path):
    kept = _load(path)
    got: dict[str, Outcome] = {}
    for m in modules_of([c for c, _ in kept]):
        got.update(emu_run(m))
    bad = [v for v in (verdict(c, got[c.id], g) for c, g in kept) if v.klass != "agree"]
    assert not bad, "\n".join(f"{v.case} ({v.klass}): {v.detail}" for v in bad)
