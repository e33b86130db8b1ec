"""The class as its gradebook holds it: every student, every assignment, each score.

The one reading of the gradebook that the class run's closing table, the missing
submissions it names and the exports (:mod:`tilelab.classroom.export`) share: a student
with no submission of an assignment has ``None`` there (not a zero: nothing was graded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nbgrader.coursedir import CourseDirectory

from tilelab.catalog import exercises
from tilelab.classroom import course


@dataclass(frozen=True)
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""

    @property
    def name(self) -> str:
        return " ".join(x for x in (self.first_name, self.last_name) if x) or self.id


@dataclass
class Standing:
    students: list[Student] = field(default_factory=list)
    assignments: dict[str, float] = field(default_factory=dict)  # name -> max score
    scores: dict[tuple[str, str], float] = field(default_factory=dict)  # (student, a)

    def score(self, student: str, assignment: str) -> float | None:
        return self.scores.get((student, assignment))

    def total(self, assignments: list[str] | None = None) -> tuple[float, float]:
        """Points the class holds and the most it could hold, over ``assignments``."""
        names = assignments if assignments is not None else list(self.assignments)
        got = sum(v for (_, a), v in self.scores.items() if a in names)
        return got, sum(self.assignments.get(a, 0.0) for a in names) * len(self.students)


def read(cd: CourseDirectory) -> Standing:
    """Every student and assignment of the gradebook (the course's assignments first, in
    their order) and each submission's score; an empty standing where there is no
    gradebook yet."""
    out = Standing()
    try:
        gb = course.gradebook(cd)
    except Exception:
        return out
    with gb:
        out.students = [Student(s.id, s.first_name or "", s.last_name or "", s.email or "",
                                s.lms_user_id or "") for s in sorted(gb.students,
                                                                     key=lambda s: s.id)]
        order = {a: i for i, a in enumerate(exercises.ASSIGNMENTS)}
        for a in sorted(gb.assignments, key=lambda a: (order.get(a.name, len(order)), a.name)):
            out.assignments[a.name] = float(a.max_score or 0.0)
            for sub in a.submissions:
                out.scores[(sub.student.id, a.name)] = float(sub.score or 0.0)
    return out

