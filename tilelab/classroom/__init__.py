"""A class over nbgrader: ``tilelab grade`` and ``tilelab release``.

- :mod:`~tilelab.classroom.run` -- ``grade_class``: the one driver (work list, resume,
  the executor handed in, the writer, the summary, the CSVs)
- :mod:`~tilelab.classroom.task` -- the unit of work: one submission graded in a private
  course, writing nothing shared; :mod:`~tilelab.classroom.inline` runs tasks here
  (:mod:`tilelab.cluster` on Dask)
- :mod:`~tilelab.classroom.writer` -- the one writer of the gradebook and the feedback;
  :mod:`~tilelab.classroom.resume` -- content hashes, what is up to date
- :mod:`~tilelab.classroom.summary` -- the run's summary and its short table;
  :mod:`~tilelab.classroom.kernel_csv` -- every kernel's points and why any were lost
- :mod:`~tilelab.classroom.steps` -- one submission: clean grade, guarded autograde,
  scrub, record, feedback
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
