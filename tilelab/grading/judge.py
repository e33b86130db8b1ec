"""The judge: the one place a grade's findings become its verdict.

Each step of a grade (:mod:`tilelab.grading.pipeline`) records what it found as
:class:`Finding`\\ s: a wrong output, a race, a failed launch (:attr:`Kind.WRONG`); the
outputs compared at every graded shape (:attr:`Kind.CHECKED`); a speed run's timing
(:attr:`Kind.TIMED`) and what costs its points (:attr:`Kind.SLOW`); a measurement or a
remark that decides nothing (:attr:`Kind.NOTE`). Steps may record out of turn (work run
beside the GPU's is read late); :func:`judge` puts the findings back in the order the steps
would run one after another, and the first finding that costs correctness ends the grade
there: what the steps after it measured is dropped, by construction. Nothing else sets a
verdict's ``correct`` or ``speed_passed``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelab.grading.verdict import Verdict


class Kind(enum.Enum):
    """What a finding means for the points."""

    NOTE = "note"  # a remark or a measurement: feedback, no points either way
    CHECKED = "checked"  # every graded shape compared: the evidence correctness rests on
    WRONG = "wrong"  # costs correctness, and with it every point
    TIMED = "timed"  # the speed run measured: the gate is passed unless something is SLOW
    SLOW = "slow"  # costs the speed points


@dataclass(frozen=True)
class Finding:
    """One thing a step found: its kind, its sentence for the learner (if any), and the
    verdict fields it measured; ``seq`` is its place among its own step's findings."""

    step: str
    kind: Kind
    message: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0


class Findings(list[Finding]):
    """The findings of one grade, each numbered within its step as it is recorded."""

    def find(self, step: str, kind: Kind, message: str | None = None, **fields: Any) -> None:
        seq = sum(1 for f in self if f.step == step)
        self.append(Finding(step, kind, message, fields, seq))


def in_turn(findings: Iterable[Finding], order: Sequence[str]) -> list[Finding]:
    """The findings as the steps of ``order`` would make them one after another: in their
    steps' order, and none after the step of the first :attr:`Kind.WRONG`."""
    rank = {step: i for i, step in enumerate(order)}
    ranked = sorted(findings, key=lambda f: (rank[f.step], f.seq))
    wrong = next((rank[f.step] for f in ranked if f.kind is Kind.WRONG), len(order))
    return [f for f in ranked if rank[f.step] <= wrong]


def decided_before(findings: Iterable[Finding], order: Sequence[str], step: str) -> bool:
    """Whether a step before ``step`` (in ``order``) found the kernel wrong: whatever
    ``step`` would find is dropped, so it need not run."""
    rank = {s: i for i, s in enumerate(order)}
    return any(f.kind is Kind.WRONG and rank[f.step] < rank[step] for f in findings)


def speed_passed(kept: Sequence[Finding]) -> bool | None:
    """Whether findings (already in turn) pass the speed gate; None: speed not timed."""
    if not any(f.kind is Kind.TIMED for f in kept):
        return None
    return not any(f.kind is Kind.SLOW for f in kept)


def judge(v: Verdict, findings: Iterable[Finding], order: Sequence[str] | None = None) -> Verdict:
    """``v`` given what ``findings`` say, in the turn of ``order`` (by default the order the
    steps first recorded in): their fields and messages in turn, ``correct`` where the
    outputs were compared and nothing found them wrong, ``speed_passed`` where the speed
    run was timed and nothing costs its points."""
    findings = list(findings)
    kept = in_turn(findings, order if order is not None else
                   tuple(dict.fromkeys(f.step for f in findings)))
    for f in kept:
        for name, value in f.fields.items():
            setattr(v, name, value)
        if f.message:
            v.messages.append(f.message)
    v.correct = (any(f.kind is Kind.CHECKED for f in kept)
                 and not any(f.kind is Kind.WRONG for f in kept))
    v.speed_passed = speed_passed(kept) if v.correct else None
    return v


def measured(findings: Iterable[Finding], order: Sequence[str], name: str) -> Any:
    """The value the findings give verdict field ``name`` in turn (None where none does)."""
    value = None
    for f in in_turn(findings, order):
        value = f.fields.get(name, value)
    return value
