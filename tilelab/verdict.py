"""The grader's verdict on one kernel: correctness, checks, speed, points, messages."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    traffic: dict[str, Any] | None = None  # emulator: global traffic (tilelab.traffic.summary)
    sanitizer: dict[str, Any] = field(default_factory=dict)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    points_correct: float = 0.0
    points_speed: float = 0.0
    max_points_correct: float = 0.0
    max_points_speed: float = 0.0
    error: str | None = None  # the grader itself failed (not the kernel)

    @property
    def passed(self) -> bool:
        return self.correct and bool(self.speed_passed)

    @property
    def points(self) -> float:
        return self.points_correct + self.points_speed

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        d["points"] = self.points
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def report(self) -> str:
        """A learner-facing summary: what passed, what failed and why."""
        where = f"GPU: {self.gpu}" if self.gpu else "CPU emulator (no GPU)"
        lines = [f"Exercise {self.exercise!r} on {where}"]
        lines.append(
            f"  correctness: {'PASS' if self.correct else 'FAIL'}"
            f"  ({self.points_correct:g}/{self.max_points_correct:g} points)"
        )
        if self.speed_measured and self.speedup is not None:
            lines.append(
                f"  speed: {'PASS' if self.speed_passed else 'FAIL'}  {self.speedup:.2f}x over "
                f"{self.baseline} (gate {self.gate:g}x; yours {self.candidate_ms:.3f} ms, "
                f"baseline {self.baseline_ms:.3f} ms)  "
                f"({self.points_speed:g}/{self.max_points_speed:g} points)"
            )
        elif self.bank_degree is not None and self.max_bank_degree is not None:
            lines.append(
                f"  bank conflicts: {'PASS' if self.speed_passed else 'FAIL'}  average degree "
                f"{self.bank_degree:.2f} (gate <= {self.max_bank_degree:g})  "
                f"({self.points_speed:g}/{self.max_points_speed:g} points)"
            )
        else:
            lines.append(f"  speed: not measured  (0/{self.max_points_speed:g} points)")
        lines.extend(f"  - {m}" for m in self.messages)
        return "\n".join(lines)
