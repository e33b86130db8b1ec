"""Dump the emulator's verdicts over the kernels of three test corpora, for a before/after diff.

    PYTHONPATH=$PWD:$PWD/tests python benchmarks/verdicts.py OUT.json [--only corpus,mistakes]
    python benchmarks/verdicts.py --compare BEFORE.json AFTER.json [NOISE.json]

The kernels are those of ``tests/test_corpus.py`` (its cases and its evidence fixtures),
``tests/test_mistakes.py`` and ``tests/test_variants.py``, each graded once on the emulator
through :func:`tilelab.grading.sandbox.grade_source` (in the grading sandbox where one can
be made), as those tests grade them. What a run's timing or its random inputs decide is
left out (``step_seconds``, ``timeline``, each shape's errors and values, the numbers in
messages, which block and which threads the analysis names: the emulator runs blocks in a
varied order), so that two checkouts' files can be compared. ``--compare`` prints each
verdict field that differs; given a second run of the first checkout (``NOISE.json``), it
leaves out the fields that differed between those two runs as well.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

#: verdict fields a run's timing decides
TIMINGS = ("step_seconds", "timeline")
#: a shape's fields its random inputs decide
RANDOM_SHAPE = ("max_error", "got", "expected", "first_wrong", "wrong", "message", "cause")
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|\bnan\b|\binf\b", re.I)
#: what a message draws from its inputs or from the order blocks ran in: element counts,
#: indices, threads and blocks ("3 of 99 elements", "C[4][7]", "thread (3, 1, 0)")
COUNTED = re.compile(r"\b\d+ of \d+ (?:elements|sampled)|\b\d+ elements|\[\d+\]\[\d+\]"
                     r"|\bline \d+: \d+|\(\d+, ?\d+, ?\d+\)|\[\d+ time\(s\)\]|\[\d+\]"
                     r"|\d+ element\(s\) past|= \d+ along")
#: a race's fields that name which block and threads the analysis saw first
RACE_SEEN = ("block", "threads", "other_block", "index", "count")


def kernels(only: set[str]) -> list[tuple[str, str, str]]:
    """(label, exercise, source) of every kernel graded."""
    out: list[tuple[str, str, str]] = []
    if "corpus" in only:
        import test_corpus

        out += [(f"corpus/{c.student}", c.exercise, c.kernel) for c in test_corpus.CASES
                if c.kernel is not None]
        out += [(f"evidence/{s}-{name}", ex, test_corpus.fixture(name))
                for s, name, ex, _m, _p in test_corpus.EVIDENCE_CASES]
    if "mistakes" in only:
        import test_mistakes

        out += [(f"mistakes/{c['file']}", c["exercise"],
                 (test_mistakes.DATA / c["file"]).read_text()) for c in test_mistakes.CASES]
    if "variants" in only:
        import test_variants

        out += [(f"variants/{e}-{v.key}", e, v.source()) for e, v in test_variants.ALL]
    return out


def _text(m: str) -> str:
    return COUNTED.sub("#", NUMBER.sub("#", m))


def _trace(t: dict[str, Any] | None) -> Any:
    """A trace without which block it drew, or which warp's words."""
    if not t or "block" not in t:  # none, or made stable before
        return t
    return {"global": sorted([g["param"], g["kind"]] for g in t.get("global", [])),
            "warps": sorted([w["array"], w["kind"], w["line"]] for w in t.get("warps", []))}


def stable(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without what timing, random inputs or the blocks' order decide."""
    d = {k: v for k, v in d.items() if k not in TIMINGS}
    d["shapes"] = [{k: v for k, v in s.items() if k not in RANDOM_SHAPE}
                   for s in d.get("shapes") or []]
    d["messages"] = [_text(m) for m in d.get("messages") or []]
    for key in ("touch", "reference_touch"):
        d[key] = _trace(d.get(key))
    if d.get("analysis"):
        a = dict(d["analysis"])
        a["summary"] = _text(str(a.get("summary", "")))
        a["touch"] = _trace(a.get("touch"))
        a["races"] = [{k: v for k, v in r.items() if k not in RACE_SEEN}
                      for r in a.get("races") or []]
        d["analysis"] = a
    return d


def compare(before: str, after: str, noise: str | None = None) -> int:
    """Print the fields that differ between two dumps (not those ``noise`` shows moving)."""
    a, b = (json.loads(Path(f).read_text()) for f in (before, after))
    n = json.loads(Path(noise).read_text()) if noise else a
    moved = 0
    for label in sorted(set(a) | set(b)):
        x, y, z = (stable(d.get(label) or {}) for d in (a, b, n))
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key) and x.get(key) == z.get(key):
                moved += 1
                print(f"{label}: {key}\n  before: {str(x.get(key))[:400]}\n"
                      f"  after:  {str(y.get(key))[:400]}")
    print(f"{moved} field(s) differ over {len(set(a) | set(b))} verdicts")
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?")
    p.add_argument("--only", default="corpus,mistakes,variants")
    p.add_argument("--compare", nargs="+", metavar="JSON")
    a = p.parse_args()
    if a.compare:
        return compare(*a.compare[:3])
    from tilelab.grading.sandbox import grade_source

    try:
        from tilelab.device.backend import resolve
        emu: Any = resolve("emu")
    except ImportError:  # a checkout before the backend was an object
        emu = "emu"
    found: dict[str, Any] = {}
    todo = kernels(set(a.only.split(",")))
    t0 = time.monotonic()
    for i, (label, exercise, source) in enumerate(todo, 1):
        v = grade_source(exercise, source, backend_name=emu, speed=False)
        found[label] = stable(v.to_dict())
        print(f"[{i}/{len(todo)} {time.monotonic() - t0:.0f}s] {label}: "
              f"{v.points_correct:g}+{v.points_speed:g}", file=sys.stderr, flush=True)
    Path(a.out).write_text(json.dumps(found, indent=1, sort_keys=True, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
