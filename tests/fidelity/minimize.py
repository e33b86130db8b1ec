"""Delta debugging of disagreements: the statements of a kernel's body deleted, chunk by
chunk (Zeller's ddmin), while the emulator and the GPU still disagree in the same way.

All the disagreements are minimised together, a round at a time: each round's candidates
(every case's body without one chunk of its statements) are built and run in one batch on
each side, so a round costs one build of a few modules per side, not one per candidate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from .corpus import Case, modules_of
from .outcome import Outcome, verdict
from .runner import emu_run

Side = Callable[[list[Case]], dict[str, Outcome]]


def emu_side(cases: list[Case]) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for m in modules_of(cases):
        out.update(emu_run(m))
    return out


def without(case: Case, drop: set[int], new_id: str) -> Case:
    """``case`` without the source lines ``drop``, renamed ``new_id`` (as long as its id, so a
    mangled name's length prefix still holds)."""
    assert len(new_id) == len(case.id)
    src = case.source.splitlines()
    keep = [ln for i, ln in enumerate(src) if i not in drop]
    kept_lines = tuple(j for j, i in enumerate(k for k in range(len(src)) if k not in drop)
                       if i in case.lines)
    text = "\n".join(keep).replace(case.id, new_id) + "\n"
    return replace(case, id=new_id, symbol=case.symbol.replace(case.id, new_id), source=text,
                   lines=tuple(sorted(kept_lines)))


def _chunks(lines: list[int], n: int) -> list[list[int]]:
    size = max(1, -(-len(lines) // n))
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def ddmin_cases(cases: list[Case], gpu_truth: dict[str, Outcome], gpu_side: Side | None,
                emu: Side = emu_side, rounds: int = 12,
                seconds: float = math.inf) -> dict[str, tuple[Case, Outcome]]:
    """Each case of ``cases`` minimised: ``{id: (smallest case still disagreeing, the GPU's
    outcome on it)}``, in at most ``rounds`` rounds, none begun after ``seconds``. Without
    ``gpu_side`` (no GPU at hand) the cases stay as they are: a smaller kernel's answer on
    a GPU is not known."""
    ends = time.monotonic() + seconds
    state = {c.id: (c, gpu_truth[c.id], 2) for c in cases}
    if gpu_side is None:
        return {k: (c, g) for k, (c, g, _) in state.items()}
    first = emu(cases)
    klass = {c.id: verdict(c, first.get(c.id, Outcome("missing")), gpu_truth[c.id]).klass
             for c in cases}
    serial = 0
    for _ in range(rounds):
        if time.monotonic() > ends:
            break
        batch: dict[str, tuple[str, Case]] = {}
        for k, (c, _, n) in state.items():
            if n > len(c.lines) or len(c.lines) <= 1:
                continue
            for chunk in _chunks(list(c.lines), n):
                serial += 1
                new = f"q{serial:0{len(c.id) - 1}d}"
                batch[new] = (k, without(c, set(chunk), new))
        if not batch:
            break
        cands = [c for _, c in batch.values()]
        e, g = emu(cands), gpu_side(cands)
        moved = set()
        for new, (k, cand) in batch.items():
            if k in moved or new not in e or new not in g:
                continue
            v = verdict(cand, e[new], g[new])
            if v.klass == klass[k] and v.klass != "agree":
                n = state[k][2]
                state[k] = (cand, g[new], max(n - 1, 2))
                moved.add(k)
        for k, (c, go, n) in state.items():
            if k not in moved:
                state[k] = (c, go, n * 2)
    return {k: (replace(c, id=k, symbol=c.symbol.replace(c.id, k),
                        source=c.source.replace(c.id, k)), go)
            for k, (c, go, _) in state.items()}
