"""nbgrader's own autograde, turned off in this course: formgrader's Autograde button and
``nbgrader autograde`` say to run ``tilelab grade``.

Both would run a learner's notebook inside the instructor's process (for the button, the
instructor's Jupyter server, whose terminals are a shell as the instructor) with no
sandbox, no cap on its outputs or its time, and score it from the notebook's own hidden
tests, outside the clean grade that gives this course's points. ``tilelab grade`` runs
the same nbgrader steps sandboxed and capped, and records its points in the same
gradebook formgrader shows. The course's ``nbgrader_config.py`` names
:class:`AutogradeOff` as autograde's exporter; nbgrader makes it before it reads, copies
or removes anything of the submission, so a click changes nothing.
"""

from __future__ import annotations

from typing import Any

from nbconvert.exporters import NotebookExporter
from nbgrader.converters.base import NbGraderException

MESSAGE = (
    "nbgrader's autograde is turned off in this course (autograder/nbgrader_config.py): it "
    "would run the learner's notebook in this process, with no sandbox and outside the "
    "course's clean grade. Grade with `tilelab grade` from the course folder (one "
    "submission: `tilelab grade --assignment ASSIGNMENT --student STUDENT --force`); "
    "formgrader then shows its scores, comments and autograded notebook."
)


class AutogradeOff(NotebookExporter):
    """The exporter of a turned-off autograde: made first, it says why and stops."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log.error(MESSAGE)
        raise NbGraderException(MESSAGE)


def turned_on(config: Any) -> None:
    """nbgrader's autograde as nbgrader makes it, for the class run's own sandboxed use
    (the course's config turns it off for everyone else)."""
    if "exporter_class" in config.Autograde:
        del config.Autograde["exporter_class"]
