"""The mutation benchmark's generator and rating, and a fixed subset of its mutants graded.

``tests/support/mutants.py`` mutates each exercise's learner source one edit at a time;
``tests/support/mutant_rating.py`` rates the grader's verdict on a mutant (right, vague,
wrong...). The fast tests check the generator (every class, one edit each, lines kept),
the rating's rules on verdicts written here, and a few mutants graded on the emulator whose
feedback names the line and the cause; the slow one grades a fixed sample and holds the
tally to the floor of right and the ceiling of wrong measured when it was written
(``python benchmarks/mutants.py --sample 300 --seed 1`` is the whole measure).
"""

from __future__ import annotations

from collections import Counter

import pytest
from support import mutant_rating, mutants

from tilelab.catalog import exercises
from tilelab.grading.diagnosis import CAUSES

ALL = mutants.all_mutants()


def test_every_exercise_and_class_has_mutants_and_there_are_thousands():
    assert len(ALL) >= 2000
    assert {m.exercise for m in ALL} == set(exercises.EXERCISES)
    # no reference kernel has an atomic: that class alone is empty
    assert {m.klass for m in ALL} == set(mutants.CLASSES) - {"atomic replaced"}
    assert len({m.source for m in ALL}) == len(ALL)
    assert len({m.id for m in ALL}) == len(ALL)


def test_each_mutant_is_one_edit_of_a_line_the_learner_writes():
    for m in ALL:
        source, mine = mutants.learner_source(m.exercise)
        old, new = source.splitlines(), m.source.splitlines()
        assert len(old) == len(new), m.id
        changed = [n for n, (a, b) in enumerate(zip(old, new, strict=True), 1) if a != b]
        assert changed and set(changed) <= set(m.lines) <= mine, m.id
        assert len(changed) == (2 if m.klass == "barrier moved" else 1), m.id
        assert m.line == m.lines[0] and old[m.line - 1] == m.before, m.id
        assert new[m.line - 1] == m.after, m.id


def test_the_learner_source_is_the_notebook_kernel_without_its_markers():
    source, mine = mutants.learner_source("tiled")
    lines = source.splitlines()
    assert lines[0] == "#define TILE 32" and "SOLUTION" not in source
    assert "__global__ void matmul_tiled(" in lines[min(mine) - 3]  # the signature is given
    assert lines[max(mine) - 1].strip() == "C[row * N + col] = acc;"


def test_generation_and_sampling_are_deterministic():
    again = mutants.all_mutants()
    assert [m.id for m in again] == [m.id for m in ALL]
    a, b = mutants.sample(ALL, 60, 5), mutants.sample(ALL, 60, 5)
    assert [m.id for m in a] == [m.id for m in b] != [m.id for m in mutants.sample(ALL, 60, 6)]
    assert {m.klass for m in a} == {m.klass for m in ALL}  # each class taken in turn


def test_the_class_to_cause_table_names_only_causes_the_diagnosis_has():
    assert set(mutant_rating.ACCEPTABLE) == set(mutants.CLASSES)
    causes = set().union(*mutant_rating.ACCEPTABLE.values())
    assert causes <= set(CAUSES) | {"misaligned", *mutant_rating.LAUNCH_ERRORS.values()}
    assert not causes & mutant_rating.CATCH_ALL


def _mutant(klass: str, line: int, exercise: str = "tiled") -> mutants.Mutant:
    return next(m for m in mutants.mutants(exercise) if m.klass == klass and m.line == line)


def _verdict(message: str, correct: bool = False) -> dict:
    return {"compiled": True, "correct": correct, "messages": [message]}


def test_the_rating_rules():
    removed = _mutant("barrier removed", 18)  # the tiled kernel's first barrier
    race = ("shape x: wrong. Likely cause: race: the emulator's analysis found Bs[1][2]: write "
            "on line 17 by thread (1, 2, 0) and read on line 20 by thread (3, 4, 0) (block (0, "
            "0, 0); no barrier between them); put __syncthreads() between the accesses.")
    assert mutant_rating.rate(removed, _verdict(race)).rating == "right"  # 17 < 18 < 20
    assert mutant_rating.rate(removed, _verdict("correct", True)).rating == "wrong"
    assert mutant_rating.rate(removed, _verdict(race.replace("__syncthreads", "__syncwarp"))
                              ).rating == "wrong"
    swap = _mutant("index swap", 20)
    assert mutant_rating.rate(swap, _verdict(race)).rating == "wrong"  # a barrier for an index
    assert mutant_rating.rate(swap, _verdict("correct", True)).rating == "equivalent"
    tile = "x. Likely cause: tile index: the product reads B's tile transposed (line {}: `...`)."
    assert mutant_rating.rate(swap, _verdict(tile.format(20))).rating == "right"
    assert mutant_rating.rate(swap, _verdict(tile.format(16))).rating == "wrong"  # not line 20
    assert mutant_rating.rate(swap, _verdict("x. Likely cause: indexing: 90% of C is wrong")
                              ).rating == "vague"
    assert mutant_rating.rate(swap, _verdict("x. Likely cause: start value: off by 1 (line 20)")
                              ).rating == "wrong"
    oob = ("shape (1, 1, 1): the launch failed: OutOfBoundsAccess: Out-of-bounds read at "
           "kernel.cu line 16: A[7000], past the end of A")
    assert mutant_rating.rate(_mutant("guard changed", 16), _verdict(oob)).rating == "right"
    assert mutant_rating.rate(_mutant("guard changed", 23), _verdict(oob)).rating == "vague"
    refused = {"compiled": False, "correct": False, "messages": ["kernel.cu:16:5: error: x"]}
    r = mutant_rating.rate(_mutant("guard changed", 16), refused)
    assert r.rating == "compile" and 16 in r.named


#: mutants whose feedback names their line and cause on main (quick to grade), by id
RIGHT = ("naive:accumulator_assigned:L10:846afd46", "tiled:wrong_stride:L24:4cbe2bc4",
         "transpose_shared:barrier_removed:L15:551a160e",
         "transpose_shared:off_by_one:L20:5a69d52e")


@pytest.mark.parametrize("mid", RIGHT)
def test_these_mutants_are_told_their_line_and_cause(mid):
    m = next(m for m in ALL if m.id == mid)
    v = mutant_rating.grade(m)
    r = mutant_rating.rate(m, v)
    assert r.rating == "right", f"{m.edit}: {r.why}\n" + "\n".join(v["messages"] or [])


#: the slow subset's floor of right and ceiling of wrong, measured on main
SLOW_SAMPLE, SLOW_SEED, RIGHT_FLOOR, WRONG_CEILING = 40, 1, 0, 40


@pytest.mark.slow
def test_a_fixed_sample_keeps_its_tally():
    chosen = mutants.sample(ALL, SLOW_SAMPLE, SLOW_SEED)
    tally = Counter(mutant_rating.rate(m, mutant_rating.grade(m)).rating for m in chosen)
    assert tally["error"] == 0, tally
    assert tally["right"] >= RIGHT_FLOOR, tally
    assert tally["wrong"] <= WRONG_CEILING, tally
