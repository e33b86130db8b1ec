"""A class over nbgrader: ``tilelab grade`` and ``tilelab release``.

- :mod:`~tilelab.classroom.run` -- ``grade_class``: every submission through the steps
- :mod:`~tilelab.classroom.steps` -- one submission: restore, clean grade, guarded
  autograde, scrub, record, feedback
- :mod:`~tilelab.classroom.course` -- nbgrader's API on this course: config, release,
  gradebook writes, CSV
- :mod:`~tilelab.classroom.submissions` -- notebooks read with nbformat: kernel cells,
  solution lines, leaks, interrupted cells
- :mod:`~tilelab.classroom.guards` -- what keeps one submission from another's grade
"""

from tilelab.classroom.course import config_path, notebook_id, open_api, release
from tilelab.classroom.run import grade_class
from tilelab.classroom.steps import grade_notebook
from tilelab.classroom.submissions import KernelCellError, extract_kernel

__all__ = [
    "KernelCellError",
    "config_path",
    "extract_kernel",
    "grade_class",
    "grade_notebook",
    "notebook_id",
    "open_api",
    "release",
]
