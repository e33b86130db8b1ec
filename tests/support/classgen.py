"""A generated class of 01-naive submissions, for the instructor's tools (tests and
``benchmarks/instructor_tools.py``).

Each learner's two kernels are drawn with a seeded generator: the reference, a recorded
mistake (``tests/data/mistakes/naive``), a fixture (wrong, slow, not compiling) or the
stub, each written in a style of the learner's own (names of the index variables and the
accumulator, and with half the learners a helper of their own: an index function, an
extra local, a different loop form), so that honest kernels differ as learners' do. A few
learners are copiers: each hands in another learner's kernels with every name changed and
the spacing redone, the pairs ``tilelab similarity`` should find (:attr:`Class.copied`).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MISTAKES = sorted((TESTS / "data" / "mistakes" / "naive").glob("*.cu"))
FIXTURES = [TESTS / "fixtures" / "submissions" / f"naive-{n}.cu"
            for n in ("wrong_result", "uncoalesced", "compile_error")]
NAMES = {"row": ["row", "r", "i", "y", "rowIdx"], "col": ["col", "c", "j", "x", "colIdx"],
         "acc": ["acc", "sum", "total", "s", "dot"], "k": ["k", "t", "p", "kk", "step"]}
HELPERS = [
    ("__device__ int at{u}(int r, int c, int n) {{ return r * n + c; }}\n",
     [(r"A\[(\w+) \* K \+ (\w+)\]", r"A[at{u}(\1, \2, K)]"),
      (r"B\[(\w+) \* N \+ (\w+)\]", r"B[at{u}(\1, \2, N)]")]),
    ("", [(r"(\w+) \+= A\[([^\]]+)\] \* B\[([^\]]+)\];",
           "{{ float prod{u} = A[\\2];\n            prod{u} *= B[\\3];\n"
           "            \\1 += prod{u}; }}")]),
    ("", [(r"for \(int (\w+) = 0; \1 < K; \+\+\1\)\n(\s+)(.*);",
           r"int \1 = 0;\n\2while (\1 < K) {{\n\2    \3;\n\2    \1 += 1;\n\2}}")]),
]


@dataclass
class Class:
    notebooks: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> cells
    kinds: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> exercise -> kind
    copied: list[tuple[str, str]] = field(default_factory=list)  # (original, copier)


#: the small choices a learner makes writing the same line: each site, its ways
WAYS = [
    (r"(\w+) \* K \+ (\w+)\]", [r"\1 * K + \2]", r"\2 + \1 * K]", r"K * \1 + \2]"]),
    (r"(\w+) \* N \+ (\w+)\]", [r"\1 * N + \2]", r"\2 + \1 * N]", r"N * \1 + \2]"]),
    (r"(\w+) \+= (A\[[^\]]+\]) \* (B\[[^\]]+\]);",
     [r"\1 += \2 * \3;", r"\1 += \3 * \2;", r"\1 = \1 + \2 * \3;"]),
    (r"= 0\.0f;", ["= 0.0f;", "= 0.f;", "= 0;"]),
    (r"\+\+(\w+)\)", [r"++\1)", r"\1++)", r"\1 += 1)"]),
    (r"if \((\w+) < M && (\w+) < N\)", [r"if (\1 < M && \2 < N)", r"if (\2 < N && \1 < M)",
                                           r"if (!(\1 >= M || \2 >= N))"]),
    (r"int (\w+) = blockIdx", [r"int \1 = blockIdx", r"const int \1 = blockIdx"]),
]


def styled(source: str, rng: random.Random, uid: str, helper: bool) -> str:
    """``source`` with the learner's own names and ways of writing a line, and maybe a
    helper of their own."""
    out = source
    if helper:
        prelude, edits = rng.choice(HELPERS)
        for pattern, repl in edits:
            out = re.sub(pattern, repl.format(u=uid), out)
        out = prelude.format(u=uid) + out
    for pattern, ways in WAYS:
        out = re.sub(pattern, rng.choice(ways), out)
    for name, choices in NAMES.items():
        out = re.sub(rf"(?<![.\w]){name}\b", rng.choice(choices), out)
    return out


def renamed(source: str, rng: random.Random) -> str:
    """A copy disguised: every identifier of the learner's changed, spacing redone."""
    words = sorted(set(re.findall(r"\b(?:r|c|i|j|x|y|s|t|p|kk|dot|sum|total|acc|row|col|k|"
                                  r"step|rowIdx|colIdx|prod\w*|at\w*)\b", source)))
    table = {w: f"v{rng.randrange(10**6)}_{n}" for n, w in enumerate(words)}
    out = re.sub(r"(?<![.\w])\w+\b", lambda m: table.get(m.group(0), m.group(0)), source)
    out = re.sub(r"[ \t]+", lambda m: " " * rng.choice((1, 1, 2)), out)
    return out.replace("{\n", "{\n\n", 1)


def generate(students: int, seed: int, solution: dict[str, str], stub: dict[str, str],
             copiers: int = 2) -> Class:
    """``students`` learners (``copiers`` of them copying the learner before them)."""
    rng = random.Random(seed)
    out = Class()
    names = [f"learner{n:03d}" for n in range(students)]
    step = max(2, students // max(1, copiers))
    copying = {n for n in range(step - 1, students, step)}
    copying = set(sorted(copying)[:copiers])
    for n, student in enumerate(names):
        if n in copying:
            original = names[n - 1]
            out.notebooks[student] = {e: renamed(src, rng)
                                      for e, src in out.notebooks[original].items()}
            out.kinds[student] = {e: f"copy of {original}" for e in out.notebooks[student]}
            out.copied.append((original, student))
            continue
        helper = rng.random() < 0.5 or n + 1 in copying  # a copied kernel is the learner's own
        draws = ([("reference", None)] * 4 + [("mistake", p) for p in MISTAKES]
                 + [("fixture", p) for p in FIXTURES] + [("stub", None)])
        kind, path = ("reference", None) if n + 1 in copying else rng.choice(draws)
        naive = (stub["naive"] if kind == "stub" else solution["naive"] if path is None
                 else path.read_text(encoding="utf-8"))
        add2d = solution["add2d"] if rng.random() < 0.8 else stub["add2d"]
        out.notebooks[student] = {
            "add2d": add2d if add2d == stub["add2d"] else styled(add2d, rng, str(n), False),
            "naive": naive if kind == "stub" else styled(naive, rng, str(n), helper),
        }
        out.kinds[student] = {"add2d": "stub" if add2d == stub["add2d"] else "reference",
                              "naive": (kind if path is None else f"{kind} {path.stem}")
                              + (" with a helper" if helper and kind != "stub" else "")}
    return out


def notebook_bytes(submission, kernel_cell, released_stub, cells: dict[str, str]) -> bytes:
    """The released 01-naive notebook with these kernels in its kernel cells."""
    return json.dumps(submission("01-naive", {e: kernel_cell(released_stub(e), src)
                                              for e, src in cells.items()})).encode()
