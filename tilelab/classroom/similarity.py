"""``tilelab similarity``: pairs of learners whose kernels are unusually alike. Advisory only.

Each submitted kernel (read from its notebook's kernel cell, never run) is fingerprinted by
copydetect (winnowing over Pygments' CUDA tokens, names and literals folded, comments and
spacing ignored). What every learner was given or shown is boilerplate, and its fingerprints
are dropped before any comparison: the released stub of each exercise and the book's printed
listings (every ``tilelab/kernels/*.cu`` the chapters include, which holds each step's
reference); so is what many learners of the class wrote alike (a fingerprint held by more
than a tenth of an exercise's kernels, and by more than three: a frequent mistake, a popular
idiom), as MOSS's ``-m`` does. Two kernels that agree beyond that are a pair, per exercise,
with the lines that match; across exercises, a pair alike in several of them. It is a list
for an instructor to read, never a grade: kernels this short converge, and a pair is a
question, not a finding. Every learner-derived string is escaped where it is shown."""

from __future__ import annotations

import glob
import html
import io
import itertools
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from copydetect import CodeFingerprint, compare_files
from nbgrader.coursedir import CourseDirectory

from tilelab.catalog import exercises
from tilelab.classroom import course, submissions
from tilelab.classroom.escape import terminal_text

NOISE = 25  # copydetect's k: the shortest match counted, in characters of folded tokens
GUARANTEE = 30  # a match at least this long is always found
THRESHOLD = 0.6  # of either kernel, the share of its own (non-boilerplate) fingerprints matched
#: and at least this many characters of folded tokens matched: a kernel that is the
#: reference under other names keeps a fingerprint or two, which would match at 100 %
MIN_SHARED = 40
COMMON_SHARE = 0.1  # a fingerprint in more than this share of an exercise's kernels ...
COMMON_AT_LEAST = 3  # ... and in more than this many is dropped as common
ACROSS_MIN = 2  # a pair alike in at least this many exercises is listed across them
KERNELS = Path(__file__).resolve().parents[1] / "kernels"
LISTING = re.compile(r"```\{(?:literalinclude|kernel-listing)\}\s+(\S+\.cu)")


@dataclass
class Kernel:
    student: str
    exercise: str
    source: str
    print: CodeFingerprint


def fingerprint(source: str, boilerplate: Any = None) -> CodeFingerprint:
    return CodeFingerprint("kernel.cu", NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate,
                           language="cuda", fp=io.StringIO(source))


def listings(course_root: Path) -> list[Path]:
    """The kernels the book prints (its chapters' listings); every kernel the package
    ships where the course has no book/."""
    book = course_root / "book"
    named = {m.group(1).rsplit("/", 1)[-1] for md in sorted(book.glob("*.md"))
             for m in LISTING.finditer(md.read_text(encoding="utf-8"))}
    if not named:
        return sorted(KERNELS.glob("*.cu"))
    return sorted(p for p in KERNELS.glob("*.cu") if p.name in named)


def boilerplate(cd: CourseDirectory) -> tuple[Any, int]:
    """The fingerprints of what every learner had: the released stubs and the book's
    listings; and how many texts they came from."""
    texts = [p.read_text(encoding="utf-8") for p in listings(Path(cd.root))]
    for assignment, ids in exercises.ASSIGNMENTS.items():
        released = Path(cd.format_path(cd.release_directory, ".", assignment)) / (
            f"{course.notebook_id(assignment)}.ipynb")
        for exercise_id in ids:
            try:
                texts.append(submissions.extract_kernel(released, exercise_id))
            except (submissions.KernelCellError, OSError):
                continue
    every = [CodeFingerprint("kernel.cu", NOISE, 1, language="cuda", fp=io.StringIO(t)).hashes
             for t in texts]  # every k-gram, not a winnowed sample (as copydetect does)
    return np.unique(np.array([h for hashes in every for h in hashes], dtype=np.int64)), len(texts)


def kernels(cd: CourseDirectory, bp: Any, assignments: list[str] | None = None) -> list[Kernel]:
    """Every kernel a learner wrote (not the untouched stub), from the submitted notebooks."""
    out = []
    for assignment in assignments or list(exercises.ASSIGNMENTS):
        nb = f"{course.notebook_id(assignment)}.ipynb"
        submitted = Path(cd.format_path(cd.submitted_directory, ".", ".")).resolve()
        for folder in sorted(submitted.glob(f"*/{glob.escape(assignment)}")):
            path = folder / nb
            if path.is_symlink() or not path.is_file():
                continue
            for exercise_id in exercises.ASSIGNMENTS[assignment]:
                try:
                    source = submissions.extract_kernel(path, exercise_id)
                except (submissions.KernelCellError, OSError, ValueError):
                    continue
                if submissions.empty_kernel(source, exercises.get(exercise_id).kernel):
                    continue
                out.append(Kernel(folder.parent.name, exercise_id, source,
                                  fingerprint(source, bp)))
    return out


def _lines(source: str, slices: np.ndarray) -> list[tuple[int, int]]:
    """The 1-based line ranges of ``source`` that copydetect's character slices cover."""
    starts = [0, *itertools.accumulate(len(ln) + 1 for ln in source.split("\n"))]
    out = []
    for a, b in zip(*slices, strict=True):
        first = next(i for i, s in enumerate(starts) if s > a)
        last = next((i for i, s in enumerate(starts) if s >= b), len(starts) - 1)
        out.append((first, max(first, last)))
    return out


def compare(a: Kernel, b: Kernel) -> dict[str, Any] | None:
    """A pair's similarity (copydetect's: of each side, the share of its fingerprints
    beyond the boilerplate that the other holds), how much matched (characters of folded
    tokens) and the matched lines; None where nothing beyond the boilerplate matches."""
    tokens, (sa, sb), (la, lb) = compare_files(a.print, b.print)
    if not tokens:
        return None
    return {
        "exercise": a.exercise,
        "students": [a.student, b.student],
        "shared": int(tokens),
        "similarity": [round(min(1.0, float(sa)), 3), round(min(1.0, float(sb)), 3)],
        "lines": [_lines(a.source, la), _lines(b.source, lb)],
        "sources": [a.source, b.source],
    }


def holders(ks: list[Kernel]) -> dict[int, set[int]]:
    """Each fingerprint, and the kernels (by index) that hold it."""
    index: dict[int, set[int]] = defaultdict(set)
    for i, k in enumerate(ks):
        for h in k.print.hashes:
            index[int(h)].add(i)
    return index


def common_limit(kernels: int) -> int:
    """A fingerprint held by more kernels of an exercise than this is common to the class
    (a frequent mistake, a popular idiom) and dropped like the boilerplate: MOSS's ``-m``."""
    return max(COMMON_AT_LEAST, math.ceil(COMMON_SHARE * kernels))


def find(cd: CourseDirectory, assignments: list[str] | None = None,
         threshold: float = THRESHOLD) -> dict[str, Any]:
    """Per exercise, the pairs whose larger share is at least ``threshold`` (with each
    exercise's median share, to judge "unusually"); across exercises, the pairs listed in
    at least :data:`ACROSS_MIN` of them."""
    bp, n_bp = boilerplate(cd)
    by_exercise: dict[str, list[Kernel]] = defaultdict(list)
    for k in kernels(cd, bp, assignments):
        by_exercise[k.exercise].append(k)
    pairs, medians, dropped = [], {}, {}
    for exercise_id, ks in by_exercise.items():
        shares = []
        index = holders(ks)
        most = common_limit(len(ks))
        common = [h for h, held in index.items() if len(held) > most]
        if common:  # what many learners wrote alike is everyone's: boilerplate too
            dropped[exercise_id] = len(common)
            extra = np.unique(np.concatenate([bp, np.array(common, dtype=np.int64)]))
            ks[:] = [Kernel(k.student, k.exercise, k.source, fingerprint(k.source, extra))
                     for k in ks]
            index = holders(ks)
        candidates = {(i, j) for held in index.values() for i, j in
                      itertools.combinations(sorted(held), 2)}
        for i, j in sorted(candidates):
            found = compare(ks[i], ks[j])
            share = max(found["similarity"]) if found and found["shared"] >= MIN_SHARED else 0.0
            shares.append(share)
            if found and share >= threshold:
                pairs.append(found)
        n = len(ks) * (len(ks) - 1) // 2
        shares += [0.0] * (n - len(shares))  # pairs with no fingerprint in common
        medians[exercise_id] = round(statistics.median(shares), 3) if shares else 0.0
    pairs.sort(key=lambda p: (-max(p["similarity"]), p["exercise"], p["students"]))
    across: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for p in pairs:
        across[tuple(sorted(p["students"]))].append(p)
    return {
        "threshold": threshold,
        "boilerplate_texts": n_bp,
        "kernels": sum(len(ks) for ks in by_exercise.values()),
        "medians": medians,
        "common_dropped": dropped,
        "pairs": pairs,
        "across": [{"students": list(s), "exercises": [p["exercise"] for p in ps],
                    "mean_similarity": round(statistics.fmean(max(p["similarity"])
                                                              for p in ps), 3)}
                   for s, ps in sorted(across.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                   if len(ps) >= ACROSS_MIN],
        "advisory": "similar kernels are a question for a conversation, never a grade",
    }


def _quoted(source: str, ranges: list[tuple[int, int]], most: int = 12) -> list[str]:
    lines = source.split("\n")
    shown = sorted({i for a, b in ranges for i in range(a, b + 1)})
    return [f"{i:4d}| {lines[i - 1]}" for i in shown[:most] if 0 < i <= len(lines)]


def text(found: dict[str, Any], quote: bool = True) -> str:
    """The pairs on a terminal (learner text escaped)."""
    out = [f"similarity (advisory, never a grade): {found['kernels']} kernel(s), "
           f"{found['boilerplate_texts']} boilerplate text(s) (released stubs, the book's "
           f"listings) left out; pairs at >= {found['threshold']:.0%} of either kernel"]
    if not found["pairs"]:
        out.append("no pair above the threshold")
    for p in found["pairs"]:
        (a, b), (sa, sb) = p["students"], p["similarity"]
        out.append(f"{p['exercise']}: {a} ~ {b}: {sa:.0%} of {a}'s, {sb:.0%} of {b}'s "
                   f"(class median {found['medians'].get(p['exercise'], 0):.0%})")
        if quote:
            for who, src, ranges in zip(p["students"], p["sources"], p["lines"], strict=True):
                out.append(f"  {who}, matched lines:")
                out += [f"    {ln}" for ln in _quoted(src, ranges)]
    if found["across"]:
        out.append("alike in several exercises:")
        out += [f"  {' ~ '.join(c['students'])}: {', '.join(c['exercises'])} "
                f"(mean {c['mean_similarity']:.0%})" for c in found["across"]]
    return "\n".join(map(terminal_text, out))


def page(found: dict[str, Any]) -> str:
    """A static HTML page of the pairs, side by side, matched lines marked; every string
    escaped, no script."""
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'\">",
             "<title>Kernel similarity (advisory)</title><style>body{font-family:sans-serif}"
             "pre{background:#f6f6f6;padding:4px;white-space:pre-wrap}.m{background:#fd8}"
             ".pair{display:flex;gap:1em}.pair>div{flex:1;min-width:0}</style></head><body>",
             "<h1>Kernel similarity</h1>",
             f"<p>Advisory, never a grade. {found['kernels']} kernels; released stubs and the "
             f"book's listings ({found['boilerplate_texts']} texts) are boilerplate; pairs at "
             f"&ge; {found['threshold']:.0%} of either kernel.</p>"]
    for p in found["pairs"]:
        parts.append(f"<h2>{esc(p['exercise'])}: {esc(p['students'][0])} ~ "
                     f"{esc(p['students'][1])} ({p['similarity'][0]:.0%} / "
                     f"{p['similarity'][1]:.0%})</h2><div class=\"pair\">")
        for who, src, ranges in zip(p["students"], p["sources"], p["lines"], strict=True):
            marked = {i for a, b in ranges for i in range(a, b + 1)}
            body = "\n".join(f'<span class="m">{esc(ln)}</span>' if i in marked else esc(ln)
                             for i, ln in enumerate(src.split("\n"), 1))
            parts.append(f"<div><h3>{esc(who)}</h3><pre>{body}</pre></div>")
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
