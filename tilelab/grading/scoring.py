"""The only place a verdict becomes points, pass/fail and the sentences that say so.

The grading pipeline, the hidden tests (:func:`tilelab.notebook.assert_speed`), the class
run's gradebook and its feedback all ask here, so the points written and the report shown
beside them cannot disagree.

``award`` is the instructor's choice (``tilelab grade --award-speed-without-gpu``): full
speed points for a correct kernel where speed could not be judged (no GPU, and no
emulated bank-conflict gate for the exercise).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilelab import settings
from tilelab.grading.verdict import Verdict


@dataclass(frozen=True)
class Points:
    """The points of one kernel's two hidden tests."""

    correct: float
    speed: float

    @property
    def total(self) -> float:
        return self.correct + self.speed

    def as_dict(self) -> dict[str, float]:
        return {"correct": self.correct, "speed": self.speed}


def speed_judged(v: Verdict) -> bool:
    """Whether speed was judged: measured on a GPU, or gated by the emulated bank degree."""
    return v.speed_passed is not None


def points(v: Verdict, award: bool = False) -> Points:
    """The points a verdict earns."""
    if not v.correct:
        return Points(0.0, 0.0)
    if speed_judged(v):
        speed = v.max_points_speed if v.speed_passed else 0.0
    else:
        speed = v.max_points_speed if award else 0.0
    return Points(v.max_points_correct, speed)


def speed_status(v: Verdict, award: bool = False) -> tuple[bool, str]:
    """Whether the speed test passes, and a sentence saying why."""
    if not v.correct:
        return False, "no speed points: the kernel is not correct yet (see the test above)"
    if v.speed_measured and v.speedup is not None:
        return bool(v.speed_passed), (
            f"{v.speedup:.2f}x over {v.baseline} on {v.gpu} "
            f"(gate {v.gate:g}x; yours {v.candidate_ms:.3f} ms, "
            f"baseline {v.baseline_ms:.3f} ms)"
        )
    if speed_judged(v):
        return bool(v.speed_passed), (
            f"speed not measured (no GPU); graded by the emulator's bank-conflict degree: "
            f"{v.bank_degree:.2f} (gate <= {v.max_bank_degree:g})"
        )
    if award:
        name = settings.AWARD_SPEED_WITHOUT_GPU.name
        return True, f"speed not measured: no GPU; awarded because {name}=1"
    return False, "speed not measured: no GPU"


def report(v: Verdict, award: bool = False) -> str:
    """A learner-facing summary: what passed, what failed and why, with the points."""
    p = points(v, award)
    where = f"GPU: {v.gpu}" if v.gpu else "CPU emulator (no GPU)"
    lines = [
        f"Exercise {v.exercise!r} on {where}",
        f"  correctness: {'PASS' if v.correct else 'FAIL'}"
        f"  ({p.correct:g}/{v.max_points_correct:g} points)",
    ]
    of_speed = f"({p.speed:g}/{v.max_points_speed:g} points)"
    if v.speed_measured and v.speedup is not None:
        lines.append(
            f"  speed: {'PASS' if v.speed_passed else 'FAIL'}  {v.speedup:.2f}x over "
            f"{v.baseline} (gate {v.gate:g}x; yours {v.candidate_ms:.3f} ms, "
            f"baseline {v.baseline_ms:.3f} ms)  {of_speed}"
        )
    elif v.bank_degree is not None and v.max_bank_degree is not None:
        lines.append(
            f"  bank conflicts: {'PASS' if v.speed_passed else 'FAIL'}  average degree "
            f"{v.bank_degree:.2f} (gate <= {v.max_bank_degree:g})  {of_speed}"
        )
    elif not v.max_points_speed:
        lines.append("  speed: not graded (this step is graded for correctness only)")
    elif p.speed:
        lines.append(f"  speed: not measured (no GPU); awarded by the instructor  {of_speed}")
    else:
        lines.append(f"  speed: not measured  {of_speed}")
    lines.extend(f"  - {m}" for m in v.messages)
    return "\n".join(lines)


def analysis_text(v: Verdict) -> str:
    """The emulator's race and bank-conflict table carried in the verdict ("" when none)."""
    a = v.analysis
    if not a:
        return ""
    if a.get("error"):
        return f"(no shared-memory analysis: {a['error']})"
    return f"At {a['at']}: {a['summary']}"
