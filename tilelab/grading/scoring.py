"""The only place a verdict becomes points, pass/fail and the sentences that say so.

The grading pipeline, the hidden tests (:func:`tilelab.notebook.assert_speed`), the class
run's gradebook and its feedback all ask here, so the points written and the report shown
beside them cannot disagree.

``award`` is the instructor's choice (``tilelab grade --award-speed-without-gpu``): full
speed points for a correct kernel where speed could not be judged (no GPU). The emulator's
analysis (bank conflicts, races, traffic) is feedback: on the emulator every exercise's
speed and lesson points are "not measured: needs a GPU".
"""

from __future__ import annotations

from dataclasses import dataclass

from tilelab import settings
from tilelab.device.backend import Backend
from tilelab.grading.verdict import Verdict

#: The one name of the number a bank-conflict gate judges (``Verdict.bank_degree``): the
#: highest average degree of any one shared-memory access line.
BANK_DEGREE = "worst-line bank-conflict degree"


def worst_bank_line(v: Verdict) -> dict | None:
    """The access line whose degree is ``v.bank_degree`` (from the emulator's analysis)."""
    lines = (v.analysis or {}).get("bank_lines") or []
    return max(lines, key=lambda b: b["avg_degree"], default=None)


def bank_degree_text(v: Verdict) -> str:
    """``worst-line bank-conflict degree 32.00 (line 16: As, write)``."""
    worst = worst_bank_line(v)
    where = f" (line {worst['line']}: {worst['array']}, {worst['kind']})" if worst else ""
    return f"{BANK_DEGREE} {v.bank_degree:.2f}{where}"


#: the speed and lesson points of a kernel no GPU timed (the same for every exercise)
NOT_MEASURED = "not measured: needs a GPU"


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
    """Whether speed (and the lesson) was judged: only by a GPU's timed run. The emulator's
    analysis runs in the kernel's own process: it is feedback, never points."""
    return v.speed_measured and v.speed_passed is not None


def unmeasured(v: Verdict) -> str:
    """Why a verdict has no measured speed."""
    if v.backend != Backend.GPU:
        return NOT_MEASURED
    said = next((m for m in v.messages if m.startswith("speed was not measured")), "")
    return _first_line(said.replace("speed was ", "", 1)) or "not measured (not asked for)"


def awarded(v: Verdict, award: bool) -> bool:
    """Whether the instructor's policy gives this verdict its speed points unmeasured: only
    a verdict graded without a GPU. On a GPU, a speed run that was not measured (the GPU
    stayed busy, the grader's CPU held up its rounds) earns none: the policy is for a
    class with no GPU, never a way round the gate."""
    return award and v.backend != Backend.GPU


def points(v: Verdict, award: bool = False) -> Points:
    """The points a verdict earns."""
    if not v.correct:
        return Points(0.0, 0.0)
    if speed_judged(v):
        speed = v.max_points_speed if v.speed_passed else 0.0
    else:
        speed = v.max_points_speed if awarded(v, award) else 0.0
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
    if awarded(v, award):
        name = settings.AWARD_SPEED_WITHOUT_GPU.name
        return True, f"{unmeasured(v)}; awarded by the instructor's policy ({name}=1)"
    return False, unmeasured(v)


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def correctness_lost(v: Verdict) -> str:
    """Why the correctness points were lost, in a few words ("" when they were not)."""
    if v.correct:
        return ""
    said = [m for m in v.messages if not m.startswith("grading note:")]
    if v.error:
        return f"the grader itself failed ({_first_line(v.error)}), not the kernel"
    if not v.compiled:
        first = said[0] if said else ""
        if first.startswith("the kernel does not compile"):
            return "it does not compile"
        if first.startswith("not graded (0 points): "):
            return "not graded: " + _first_line(first.removeprefix("not graded (0 points): "))
        return "refused before it ran: " + _first_line(first) if first else "not compiled"
    failed = [s for s in v.shapes if not s.get("ok")]
    for s in failed:
        if "wrong" not in s:  # the launch itself failed
            shape = tuple(s.get("shape", ()))
            if "KernelTimeout" in str(s.get("message", "")) or "did not finish" in str(
                    s.get("message", "")):
                return f"timed out at shape {shape} (no result within the time allowed)"
            what = _first_line(str(s.get("message", "")).split(": ", 1)[0], 120)
            return f"the launch failed at shape {shape}: {what} (see below)"
    if failed:
        worst = max(failed, key=lambda s: s.get("total", 0))
        return (f"wrong at {len(failed)} of {len(v.shapes)} shapes (e.g. {worst.get('wrong')} "
                f"of {worst.get('total')} elements at shape {tuple(worst['shape'])})")
    if v.races:
        return "right results, but a race (see below): results depend on timing"
    return _first_line(said[-1]) if said else "not correct"


def speed_lost(v: Verdict, award: bool = False) -> str:
    """Why the speed points were lost, in a few words ("" when they were not)."""
    if points(v, award).speed or not v.max_points_speed:
        return ""
    if not v.correct:
        return "not judged: the kernel is not correct"
    if v.speed_measured and v.speedup is not None:
        if v.gate and v.speedup < v.gate:
            return (f"too slow: {v.speedup:.2f}x over {v.baseline}, the gate is {v.gate:g}x "
                    f"(it needs to run {v.gate / v.speedup:.2f}x faster)")
        return f"{v.speedup:.2f}x is over the gate, but the lesson is skipped (see below)"
    if v.backend == Backend.GPU:
        return unmeasured(v)
    return f"{unmeasured(v)} (the speed test runs on the grading GPU)"


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
    elif not v.max_points_speed:
        lines.append("  speed: not graded (this step is graded for correctness only)")
    elif p.speed:
        name = settings.AWARD_SPEED_WITHOUT_GPU.name
        lines.append(f"  speed: {unmeasured(v)}; awarded by the instructor's policy "
                     f"({name}=1)  {of_speed}")
    else:
        lines.append(f"  speed: {unmeasured(v)}  {of_speed}")
    if not v.speed_measured and v.bank_degree is not None and v.max_bank_degree is not None:
        lines.append(f"  bank conflicts (the emulator's analysis, feedback only): "
                     f"{bank_degree_text(v)} (a padded tile: <= {v.max_bank_degree:g})")
    lost = [(part, p_max - p_got, why) for part, p_max, p_got, why in (
        ("correctness", v.max_points_correct, p.correct, correctness_lost(v)),
        ("speed", v.max_points_speed, p.speed, speed_lost(v, award))) if p_max > p_got]
    for part, n, why in lost:
        lines.append(f"  lost {n:g} {part} point{'s' if n != 1 else ''}: {why}")
    lines.extend(f"  - {m}" for m in v.messages)
    return "\n".join(lines)


def analysis_text(v: Verdict) -> str:
    """The emulator's race and bank-conflict table carried in the verdict ("" when none)."""
    a = v.analysis
    if not a:
        return ""
    if a.get("error"):
        return f"(no shared-memory analysis: {a['error']})"
    table = [ln for ln in str(a["summary"]).splitlines()
             if not ln.startswith("Kernel-wide average degree")]
    if v.bank_degree is not None:  # the gate's number, under its one name
        table.append(bank_degree_text(v)[0].upper() + bank_degree_text(v)[1:])
    return f"At {a['at']}: " + "\n".join(table)


def lost(v: Verdict, award: bool = False) -> str:
    """Why a verdict earns less than its maximum, in one line ("" where nothing is lost): the
    report's "lost" sentences (:func:`correctness_lost`, :func:`speed_lost`), joined."""
    p = points(v, award)
    parts = [why for got, most, why in (
        (p.correct, v.max_points_correct, correctness_lost(v)),
        (p.speed, v.max_points_speed, speed_lost(v, award))) if got < most and why]
    return "; ".join(parts)
