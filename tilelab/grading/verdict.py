"""The grader's verdict on one kernel: what was measured, as plain data.

A :class:`Verdict` is the one thing that crosses the process boundary between the grading
worker and its caller (as JSON). It holds measurements and the grader's messages; how they
become points and a learner's report is :mod:`tilelab.grading.scoring`'s job alone.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelab.catalog.exercises import Exercise


@dataclass
class Verdict:
    """What the grader measured for one exercise; JSON-ready through :meth:`to_dict`."""

    exercise: str
    backend: str
    gpu: str | None = None
    compiled: bool = False
    correct: bool = False
    speed_measured: bool = False
    speed_passed: bool | None = None
    speedup: float | None = None
    gate: float | None = None
    candidate_ms: float | None = None
    baseline_ms: float | None = None
    baseline: str | None = None
    bank_degree: float | None = None
    max_bank_degree: float | None = None
    races: int | None = None
    #: the emulator's global traffic (:func:`tilelab.grading.traffic.summary`)
    traffic: dict[str, Any] | None = None
    #: on a GPU, the lesson's figures from the GPU's own counters (Nsight Compute) at the
    #: speed shape (:func:`tilelab.grading.counters.figures`), or ``error`` when unread
    counters: dict[str, Any] | None = None
    #: the emulator's race and bank-conflict analysis of one launch at the problem's
    #: ``analysis_shape`` (``at``, ``summary`` and the report's data; or ``error``)
    analysis: dict[str, Any] | None = None
    #: on the emulator, what one block's threads read and wrote (the picture's data:
    #: :func:`tilelab.emu.report.AnalysisReport.touch`)
    touch: dict[str, Any] | None = None
    #: beside ``touch``, where the caller asked for it (a notebook's check): the course's
    #: reference kernel's trace at the same shape, the other half of the picture
    reference_touch: dict[str, Any] | None = None
    sanitizer: dict[str, Any] = field(default_factory=dict)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    points_correct: float = 0.0
    points_speed: float = 0.0
    max_points_correct: float = 0.0
    max_points_speed: float = 0.0
    error: str | None = None  # the grader itself failed (not the kernel)
    step_seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step run
    #: when things happened, in seconds: the grading worker's moments from its start
    #: (``worker_*``), each GPU tool's from the tool's (``ncu_*``, ``racecheck_*``...), and
    #: what a step spent waiting, holding or counting within it (``speed_lock_wait``;
    #: ``speed_alone``, the seconds its timed rounds held the GPU alone, in ``speed_holds``
    #: holds; ``counters``)
    timeline: dict[str, float] = field(default_factory=dict)
    #: timed rounds of the speed run run again because the grader's CPU held up a launch
    #: (a busy machine: see tilelab.device.bench.time_checked)
    speed_rounds_redone: int | None = None
    #: why the grader could not measure this kernel's speed (its GPU stayed busy, its CPU
    #: held up the timed rounds): not the submission's fault, so a class run grades it again
    regrade: str | None = None

    @classmethod
    def for_exercise(
        cls, ex: Exercise, backend: str, gpu: str | None = None, message: str | None = None
    ) -> Verdict:
        """A verdict with nothing measured yet (zero points), and ``message`` if given."""
        v = cls(
            exercise=ex.id,
            backend=backend,
            gpu=gpu,
            gate=ex.gate,
            baseline=ex.baseline.label,
            max_bank_degree=ex.max_bank_degree,
            max_points_correct=ex.points_correct,
            max_points_speed=ex.points_speed,
        )
        if message:
            v.messages.append(message)
        return v

    @property
    def passed(self) -> bool:
        """Correct, and over the speed gate where the step has one (a correctness-only
        step passes when it is correct)."""
        return self.correct and (bool(self.speed_passed) or not self.max_points_speed)

    @property
    def points(self) -> float:
        return self.points_correct + self.points_speed

    def to_dict(self) -> dict[str, Any]:
        """Every field, a deep copy (as :func:`dataclasses.asdict` makes, in about a
        twentieth of its time: a snapshot made from it shares nothing with this verdict)."""
        d = pickle.loads(pickle.dumps({f.name: getattr(self, f.name) for f in fields(self)}))
        d["passed"] = self.passed
        d["points"] = self.points
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})
