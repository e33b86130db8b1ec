"""``tilelab.grading.scoring``: the points and the sentences beside them never disagree."""

from __future__ import annotations

import re

import pytest

from tilelab.catalog import exercises
from tilelab.grading import scoring
from tilelab.grading.verdict import Verdict


def verdict(exercise_id: str = "naive", **kw) -> Verdict:
    v = Verdict.for_exercise(exercises.get(exercise_id), "emu")
    v.compiled = v.correct = True
    for k, value in kw.items():
        setattr(v, k, value)
    return v


def reported_points(report: str) -> list[float]:
    """The points each line of a report states (correctness, then speed)."""
    return [float(x) for x in re.findall(r"\((\d+(?:\.\d+)?)/\d+(?:\.\d+)? points\)", report)]


CASES = {
    "no GPU, correct": {},
    "no GPU, wrong": {"correct": False},
    "bank gate passed": {"speed_passed": True, "bank_degree": 1.0, "max_bank_degree": 1.1},
    "bank gate failed": {"speed_passed": False, "bank_degree": 16.5, "max_bank_degree": 1.1},
    "GPU, fast": {"backend": "gpu", "gpu": "G", "speed_measured": True, "speed_passed": True,
                  "speedup": 3.0, "candidate_ms": 1.0, "baseline_ms": 3.0},
    "GPU, slow": {"backend": "gpu", "gpu": "G", "speed_measured": True, "speed_passed": False,
                  "speedup": 1.1, "candidate_ms": 1.0, "baseline_ms": 1.1},
    "GPU, not measured": {"backend": "gpu", "gpu": "G", "messages": [
        "speed was not measured: this machine's CPU held up 21 of the timed rounds; "
        "grade it again"]},
}


@pytest.mark.parametrize("award", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_the_report_states_the_points_awarded(case, award):
    v = verdict(**CASES[case])
    p = scoring.points(v, award)
    assert reported_points(scoring.report(v, award)) == [p.correct, p.speed]
    ok, _ = scoring.speed_status(v, award)
    assert ok == (p.speed > 0)


def test_awarded_speed_is_reported_as_awarded():
    v = verdict()
    assert scoring.points(v, award=True).speed == v.max_points_speed > 0
    report = scoring.report(v, award=True)
    assert f"awarded by the instructor's policy (TILELAB_AWARD_SPEED_WITHOUT_GPU=1)  " \
        f"({v.max_points_speed:g}/" in report
    assert "speed: not measured: needs a GPU  (0/" in scoring.report(v, award=False)
    assert scoring.points(v, award=False).speed == 0


def test_the_award_never_gives_speed_points_to_a_gpu_run_that_was_not_measured():
    """The policy is for a class without a GPU: on a GPU, a speed run the grader could not
    measure (a GPU that stayed busy, rounds the CPU held up, both of which a submission may
    bring about) earns no speed points, and the report says why it was not measured."""
    v = verdict(**CASES["GPU, not measured"])
    assert scoring.points(v, award=True).speed == 0 == scoring.points(v, award=False).speed
    assert scoring.speed_status(v, award=True)[0] is False
    report = scoring.report(v, award=True)
    assert "speed: not measured: this machine's CPU held up 21 of the timed rounds" in report
    assert "awarded" not in report
    assert scoring.points(verdict(), award=True).speed > 0  # without a GPU: awarded


def test_a_zero_verdict_names_the_exercise_and_its_maxima():
    ex = exercises.get("transpose_padded")
    v = Verdict.for_exercise(ex, "emu", None, "not graded (0 points): why")
    assert (v.max_points_correct, v.max_points_speed) == (ex.points_correct, ex.points_speed)
    assert v.max_bank_degree == ex.max_bank_degree and v.messages == ["not graded (0 points): why"]
    assert scoring.points(v, award=True).total == 0


LOST = {  # a verdict, and what the report must say of each lost part
    "not compiled": ({"compiled": False, "correct": False,
                      "messages": ["the kernel does not compile:\nkernel.cu:3: error"]},
                     ["lost 3 correctness points: it does not compile",
                      "lost 2 speed points: not judged: the kernel is not correct"]),
    "refused": ({"compiled": False, "correct": False,
                 "messages": ["the kernel calls malloc, which a graded kernel may not use"]},
                ["lost 3 correctness points: refused before it ran: the kernel calls malloc"]),
    "timed out": ({"correct": False, "shapes": [
        {"shape": [1, 1, 1], "ok": False,
         "message": "kernel 'matmul_naive' did not finish within 5 s"}]},
        ["lost 3 correctness points: timed out at shape (1, 1, 1)"]),
    "wrong": ({"correct": False, "shapes": [
        {"shape": [1, 1, 1], "ok": True},
        {"shape": [37, 53, 29], "ok": False, "wrong": 40, "total": 1961}]},
        ["lost 3 correctness points: wrong at 1 of 2 shapes (e.g. 40 of 1961 elements at "
         "shape (37, 53, 29))"]),
    "no GPU": ({}, ["lost 2 speed points: not measured: needs a GPU"]),
    "slow": (CASES["GPU, slow"], ["lost 2 speed points: too slow: 1.10x over", "the gate is "
                                  "2.3x (it needs to run 2.09x faster)"]),
}


@pytest.mark.parametrize("case", list(LOST))
def test_every_lost_point_is_explained(case):
    kw, says = LOST[case]
    v = verdict(**kw)
    report = scoring.report(v)
    for s in says:
        assert s in report, report
    p = scoring.points(v)
    lost = {m.group(2): float(m.group(1))
            for m in re.finditer(r"lost (\d+(?:\.\d+)?) (correctness|speed) points?", report)}
    assert lost.get("correctness", 0) == v.max_points_correct - p.correct
    assert lost.get("speed", 0) == v.max_points_speed - p.speed


def test_a_full_score_loses_nothing():
    v = verdict(**CASES["GPU, fast"])
    assert "lost" not in scoring.report(v)


@pytest.mark.parametrize("exercise_id", [e.id for e in exercises.EXERCISES.values()
                                         if e.speed_graded])
@pytest.mark.parametrize("degree", [None, 1.0, 16.5])
def test_on_the_emulator_no_exercise_earns_speed_points_from_its_analysis(exercise_id, degree):
    """Whatever the emulator's analysis found (even a verdict claiming a passed gate), the
    same for all six: "not measured: needs a GPU", 0 speed points unless awarded."""
    v = verdict(exercise_id, bank_degree=degree, speed_passed=True)
    assert scoring.points(v).speed == 0
    assert "speed: not measured: needs a GPU  (0/" in scoring.report(v)
    assert scoring.speed_status(v) == (False, "not measured: needs a GPU")
    assert scoring.points(v, award=True).speed == v.max_points_speed
    assert "awarded by the instructor's policy" in scoring.report(v, award=True)


@pytest.mark.parametrize("exercise_id", [e.id for e in exercises.EXERCISES.values()
                                         if not e.speed_graded])
def test_a_correctness_only_step_says_so_and_has_no_speed_points_to_award(exercise_id):
    v = verdict(exercise_id, speed_passed=None)
    assert v.max_points_speed == 0
    assert "speed: not graded (this step is graded for correctness only)" in scoring.report(v)
    assert scoring.points(v, award=True).speed == 0
    assert scoring.lost(v) == ""
    # `tilelab check --json` says passed where the report says PASS: correct is enough
    assert v.passed and v.to_dict()["passed"]
    v.correct = False
    assert not v.passed
    timed = verdict("naive", speed_passed=None)  # a step with a gate: it must be passed too
    assert timed.max_points_speed > 0 and not timed.passed
