"""The ``exercise-table`` directive: the exercise registry, as the grader sees it."""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from tilelab.book import context
from tilelab.book.data import DataError
from tilelab.book.directives import build_table
from tilelab.catalog import exercises

HEADS = ["exercise (assignment: kernel)", "what it teaches", "speed gate on a GPU",
         "on the emulator", "points (correct + speed)"]


def rows() -> list[list[str]]:
    """One row per exercise of :mod:`tilelab.catalog.exercises` (policy, not measurements)."""
    out = []
    for ex in exercises.EXERCISES.values():
        d = ex.to_dict()
        emu = (f"correctness; as feedback, the worst access line's average bank-conflict "
               f"degree (a padded tile: ≤ {d['max_bank_degree']})"
               if d.get("max_bank_degree") else "correctness only")
        shape = " × ".join(str(s) for s in d["speed_shape"])
        pts = d["points"]
        optional = " — optional" if d.get("optional") else ""
        gate = (f"≥ {d['gate']}× over {d['baseline']}, at {shape}" if ex.speed_graded
                else "none: correctness only")
        out.append([f"{d['id']} ({d['assignment']}: {d['kernel']}){optional}", ex.teaches,
                    gate, emu, f"{pts['correctness']:g} + {pts['speed']:g}"])
    for assignment, ids in exercises.ASSIGNMENTS.items():
        total = sum(exercises.get(i).points_correct + exercises.get(i).points_speed
                    for i in ids)
        out.append([f"{assignment}: {len(ids)} steps", "", "", "", f"{total:g} in all"])
    return out


class ExerciseTable(SphinxDirective):
    """The graded exercises, their default gates and points."""

    def run(self) -> list[nodes.Node]:
        try:
            cells = rows()
        except Exception as exc:  # the registry is another module: say what broke
            context.report(self.env, DataError(f"exercise registry: {exc}"),
                           self.get_location())
            return []
        return [build_table(HEADS, cells, [False] * len(HEADS))]
