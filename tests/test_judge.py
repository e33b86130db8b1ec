"""The judge: the findings of a step list, in any order of arrival, give the verdict of the
steps run one after another, each stopping the grade where it finds the kernel wrong."""

from __future__ import annotations

import random

import pytest

from tilelab.catalog import exercises
from tilelab.grading import pipeline
from tilelab.grading.judge import Finding, Findings, Kind, decided_before, judge
from tilelab.grading.verdict import Verdict

EX = exercises.get("tiled")
KINDS = (Kind.NOTE, Kind.NOTE, Kind.CHECKED, Kind.WRONG, Kind.TIMED, Kind.SLOW)


def made(rng: random.Random, order: tuple[str, ...]) -> Findings:
    """Findings of the steps of ``order``: each step a few, of any kind, each with a
    message and a field of its own (the same field set by several steps, too)."""
    found = Findings()
    for step in order:
        for i in range(rng.randrange(3)):
            kind = rng.choice(KINDS)
            found.find(step, kind, f"{step} {i}: {kind.value}",
                       **{rng.choice(("traffic", "counters", "speedup")): f"{step}.{i}"})
    return found


def in_turn(found: Findings, order: tuple[str, ...]) -> Verdict:
    """The verdict as the steps would give it run one after another, written out by hand:
    each step's findings as it makes them, the grade stopped after a step that finds the
    kernel wrong; correct with outputs compared and nothing wrong; the gate passed where
    timed and nothing slow."""
    v = Verdict.for_exercise(EX, "gpu")
    kinds: list[Kind] = []
    for step in order:
        mine = [f for f in found if f.step == step]
        for f in mine:
            kinds.append(f.kind)
            v.messages.append(f.message)
            for name, value in f.fields.items():
                setattr(v, name, value)
        if any(f.kind is Kind.WRONG for f in mine):
            break
    v.correct = Kind.CHECKED in kinds and Kind.WRONG not in kinds
    v.speed_passed = (Kind.SLOW not in kinds) if v.correct and Kind.TIMED in kinds else None
    return v


@pytest.mark.parametrize("steps", [pipeline.GPU_ORDER, pipeline.EMU_STEPS],
                         ids=["on_a_gpu", "on_the_emulator"])
def test_findings_in_any_order_give_the_verdict_of_the_steps_in_turn(steps):
    order = pipeline.names(steps)
    rng = random.Random(49)
    verdicts = set()
    for _ in range(300):
        found = made(rng, order)
        expected = in_turn(found, order).to_dict()
        verdicts.add((expected["correct"], expected["speed_passed"]))
        for _ in range(3):
            arrived = list(found)
            rng.shuffle(arrived)
            assert judge(Verdict.for_exercise(EX, "gpu"), arrived, order).to_dict() == expected
    # the draws reached every outcome: wrong, right and untimed, over and under the gate
    assert verdicts == {(False, None), (True, None), (True, True), (True, False)}


def test_a_step_after_a_wrong_finding_is_not_run_and_one_before_it_is():
    order = pipeline.names(pipeline.GPU_ORDER)
    found = [Finding("time_speed", Kind.WRONG, "a timed launch computed a wrong result")]
    assert decided_before(found, order, "take_traffic")
    assert not decided_before(found, order, "take_sanitizer")  # in turn, it came first
    assert not decided_before(found, order, "time_speed")


def test_every_step_of_a_backend_has_its_place_in_turn():
    assert set(pipeline.GPU_ORDER) == set(pipeline.GPU_STEPS)
    assert len(pipeline.GPU_ORDER) == len(pipeline.GPU_STEPS)
    assert pipeline.GPU_ORDER.index(pipeline.gpu_steps.take_schedules) < \
        pipeline.GPU_ORDER.index(pipeline.gpu_steps.time_speed)
