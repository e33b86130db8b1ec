"""nbgrader configuration of the course.

This folder is nbgrader's course root for the commands (run them from here, or use
``tilelab grade``), but the course directory itself is the repository: the notebooks'
source is ``solutions/``, their release is ``exercises/``, and everything a grading run
writes (submissions, autograded copies, feedback, the gradebook, CSV) stays under
``autograder/`` and is git-ignored. Paths are computed from this file's location, so a
clone (or a copy of the course) anywhere works as is.
"""

import os

c = get_config()  # noqa: F821  (nbgrader provides it)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "tilelab"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = os.path.join("autograder", "submitted")
c.CourseDirectory.autograded_directory = os.path.join("autograder", "autograded")
c.CourseDirectory.feedback_directory = os.path.join("autograder", "feedback")
c.CourseDirectory.solution_directory = os.path.join("autograder", "release_solution")
c.CourseDirectory.source_with_tests_directory = os.path.join("autograder", "source_with_tests")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, "autograder", "gradebook.db")

# The learner's kernel is CUDA C inside a Python raw string, between `// BEGIN SOLUTION`
# and `// END SOLUTION` comment lines: the stub must stay valid C there (an empty body,
# which compiles to a kernel that writes nothing, so the check says "never written").
c.ClearSolutions.code_stub = {"python": "// YOUR CODE HERE"}

# Hidden tests grade the kernel in a child process (up to TILELAB_GRADE_TIMEOUT, 300 s).
c.Execute.timeout = 1200
# (ipykernel's warning about unencrypted local TCP would otherwise break the progress bar)
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]

# `nbgrader export` writes grades.csv quoted (a name such as "Abbott, Jr." keeps its row) and
# inert in a spreadsheet (a field that starts like a formula is written as text), as the
# class run does.
c.ExportApp.plugin_class = "tilelab.classroom.grades_csv.QuotedCsvExport"

# formgrader's Autograde button and `nbgrader autograde` are turned off: they would run each
# learner's notebook in the instructor's own process (for the button, the Jupyter server)
# with no sandbox and score it outside the course's clean grade. Grade with `tilelab grade`
# (one submission: `tilelab grade --assignment A --student S --force`); formgrader then shows
# its scores and autograded notebooks. The class run turns autograde back on for itself.
c.Autograde.exporter_class = "tilelab.classroom.formgrader.AutogradeOff"

# formgrader renders each autograded notebook into a page of the instructor's Jupyter
# server, and generate_feedback into a feedback page: a learner's HTML is cleaned then, as
# it is rendered (markdown, HTML outputs, the grader's comment; nothing active, no
# javascript: link, a bounded cost per page). See tilelab/classroom/active_content.py.
c.HTMLExporter.preprocessors = ["tilelab.classroom.active_content.LearnerPage"]
c.HTMLExporter.filters = {"markdown2html": "tilelab.classroom.active_content.learner_markdown"}
