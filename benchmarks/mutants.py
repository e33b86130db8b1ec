"""The feedback's mutation benchmark: reference kernels mutated one edit at a time, graded on
the emulator, and each verdict rated against the mutation.

Every exercise's learner source (the solution notebook's kernel cell) is mutated by
``tests/support/mutants.py`` (index terms swapped, off by one, wrong stride, guard changed
or removed, barrier removed or moved, accumulator reset, assigned or not initialised, tile
loads swapped, vector width or alignment broken, shared array shrunk, atomic made plain);
each mutant is graded as ``tilelab check --backend emu`` grades a file (in this process's
workers: :func:`tilelab.grading.pipeline.evaluate`, as tests/test_mistakes.py does) and
rated by ``tests/support/mutant_rating.py``, whose docstring states the class ->
acceptable-cause mapping and the rules: ``equivalent`` (graded correct: discarded),
``compile`` (refused before it ran; whether the refusal names the line is counted),
``right`` (the mutated line and a cause of the class named), ``vague`` (right verdict, no
line or no matching cause), ``wrong`` (advice that cannot fix it, another cause asserted,
another line named as the cause, or a wrong mutant graded correct).

Prints a tally per exercise and per class and the totals: right, vague and wrong as a
share of the non-equivalent mutants that ran (compile refusals are counted apart), and
the time taken. ``--json OUT`` writes every mutant's edit, rating, cause and messages.

    python benchmarks/mutants.py [--sample N] [--seed S] [--jobs J] [--exercise E ...]
                                 [--class C ...] [--json OUT] [--list]

``--sample N`` draws N mutants with ``--seed`` (each class shuffled, the classes taken in
turn: a small sample holds every class); without it every mutant runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from support import mutant_rating, mutants  # noqa: E402

SHOWN = ("right", "vague", "wrong")


def _one(m: mutants.Mutant) -> dict[str, Any]:
    v = mutant_rating.grade(m)
    r = mutant_rating.rate(m, v)
    return {**m.to_dict(), "rating": r.rating, "why": r.why, "cause": r.cause,
            "named": list(r.named), "seconds": v["seconds"], "compiled": v.get("compiled"),
            "correct": v.get("correct"), "error": v.get("error"),
            "messages": v.get("messages")}


def run(chosen: list[mutants.Mutant], jobs: int, progress: bool = True) -> list[dict[str, Any]]:
    """Every mutant of ``chosen`` graded and rated, in ``jobs`` worker processes."""
    out: list[dict[str, Any]] = []
    t0 = time.monotonic()
    if jobs <= 1:
        results = map(_one, chosen)
    else:
        pool = ProcessPoolExecutor(jobs)
        results = pool.map(_one, chosen, chunksize=1)
    try:
        for i, res in enumerate(results, 1):
            out.append(res)
            if progress and (i % 10 == 0 or i == len(chosen)):
                print(f"  {i}/{len(chosen)} graded, {time.monotonic() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    return out


def tally(results: list[dict[str, Any]], key: str) -> dict[str, Counter[str]]:
    """Counts of each rating, by ``key`` (exercise or class), and "total"."""
    out: dict[str, Counter[str]] = {}
    for r in results:
        out.setdefault(r[key], Counter())[r["rating"]] += 1
        if r["rating"] == "compile":
            named = r["line"] in r["named"]
            out[r[key]]["compile, line named" if named else "compile, no line"] += 1
    total: Counter[str] = Counter()
    for c in out.values():
        total.update(c)
    return dict(sorted(out.items())) | {"total": total}


def share(c: Counter[str], rating: str) -> float | None:
    """``rating``'s percentage of the non-equivalent mutants that ran (compile apart)."""
    n = sum(c[k] for k in SHOWN)
    return round(100.0 * c[rating] / n, 1) if n else None


def table(title: str, rows: dict[str, Counter[str]]) -> str:
    head = (f"{title:<28} {'n':>5} {'equiv':>6} {'compile':>8} {'right':>6} {'vague':>6} "
            f"{'wrong':>6} {'error':>6}  {'right%':>6} {'wrong%':>6}")
    lines = [head, "-" * len(head)]
    for name, c in rows.items():
        n = sum(c[k] for k in mutant_rating.RATINGS)
        pct = [share(c, k) for k in ("right", "wrong")]
        lines.append(f"{name:<28} {n:>5} {c['equivalent']:>6} {c['compile']:>8} "
                     f"{c['right']:>6} {c['vague']:>6} {c['wrong']:>6} {c['error']:>6}  "
                     + " ".join(f"{'-' if p is None else f'{p:.1f}':>6}" for p in pct))
    return "\n".join(lines)


def report(results: list[dict[str, Any]]) -> tuple[dict, dict]:
    """Print the tables and the totals; the tallies by exercise and by class."""
    by_ex, by_class = tally(results, "exercise"), tally(results, "class")
    print(table("exercise", by_ex))
    print()
    print(table("mutation class", by_class))
    total = by_ex["total"]
    ran = sum(total[k] for k in SHOWN)
    print(f"\ntotals: {ran} non-equivalent mutants ran ({total['equivalent']} equivalent, "
          f"{total['compile']} refused at compile, {total['compile, line named']} of them "
          f"naming the line, {total['error']} grader errors): right {total['right']} "
          f"({share(total, 'right')}%), vague {total['vague']} ({share(total, 'vague')}%), "
          f"wrong {total['wrong']} ({share(total, 'wrong')}%)")
    return by_ex, by_class


def rerate(path: Path) -> int:
    """Rate again the verdicts of a --json run (the rules changed; nothing is graded)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    results = []
    known = {m.id: m for m in mutants.all_mutants(sorted({r["exercise"] for r in doc["mutants"]}))}
    for r in doc["mutants"]:
        m = known.get(r["id"]) or mutants.Mutant(r["exercise"], r["class"], r["line"],
                                                 r["before"], r["after"], "", tuple(r["lines"]))
        v = {"compiled": r["compiled"], "correct": r["correct"], "messages": r["messages"],
             "error": r["error"]}
        new = mutant_rating.rate(m, v)
        results.append({**r, "rating": new.rating, "why": new.why, "cause": new.cause,
                        "named": list(new.named)})
    print(f"{len(results)} verdicts of {doc['command']!r} rated again")
    report(results)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sample", type=int, default=None, help="mutants drawn (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--exercise", action="append", default=None, help="only this exercise")
    p.add_argument("--class", dest="classes", action="append", default=None,
                   help="only this mutation class")
    p.add_argument("--json", default=None, help="write every mutant's result here")
    p.add_argument("--list", action="store_true", help="count the mutants; grade none")
    p.add_argument("--rerate", default=None, metavar="JSON",
                   help="rate again the verdicts a --json run kept (no grading)")
    a = p.parse_args(argv)
    if a.rerate:
        return rerate(Path(a.rerate))
    pool = mutants.all_mutants(a.exercise)
    if a.classes:
        unknown = set(a.classes) - set(mutants.CLASSES)
        if unknown:
            p.error(f"no class {sorted(unknown)}; the classes are {', '.join(mutants.CLASSES)}")
        pool = [m for m in pool if m.klass in a.classes]
    chosen = mutants.sample(pool, a.sample, a.seed)
    print(f"{len(pool)} mutants of {len({m.exercise for m in pool})} exercises; "
          f"grading {len(chosen)} (seed {a.seed}, {a.jobs} job(s))")
    if a.list:
        for key in ("exercise", "klass"):
            print(Counter(getattr(m, key) for m in pool).most_common())
        return 0
    os.environ.setdefault("TILELAB_BACKEND", "emu")
    t0 = time.monotonic()
    results = run(chosen, a.jobs)
    elapsed = time.monotonic() - t0
    by_ex, by_class = report(results)
    print(f"time: {elapsed:.0f} s for {len(results)} mutants "
          f"({elapsed / max(1, len(results)):.2f} s each, {a.jobs} job(s))")
    if a.json:
        doc = {"command": " ".join(["python", "benchmarks/mutants.py", *(argv or sys.argv[1:])]),
               "seed": a.seed, "sample": a.sample, "jobs": a.jobs, "pool": len(pool),
               "elapsed_s": round(elapsed, 1),
               "tally": {"exercise": by_ex, "class": by_class},
               "mutants": results}
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
