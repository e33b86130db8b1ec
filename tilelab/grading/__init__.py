"""The grader: one kernel source for one exercise becomes one verdict, then points.

- :mod:`~tilelab.grading.sandbox` -- ``grade_source``: run the worker in a clean child
  (in a bubblewrap sandbox where one can be made)
- :mod:`~tilelab.grading.bubblewrap` -- the OS sandbox every submission's code runs in
- :mod:`~tilelab.grading.worker` -- the child's entry point (resource caps, argv, JSON out)
- :mod:`~tilelab.grading.pipeline` -- the steps, in order: validate, compile, correctness,
  analysis | sanitizer, speed | bank gate
- :mod:`~tilelab.grading.source_checks`, :mod:`~tilelab.grading.correctness`,
  :mod:`~tilelab.grading.sanitizer` -- what the steps use
- :mod:`~tilelab.grading.verdict` -- the data that crosses the process boundary
- :mod:`~tilelab.grading.scoring` -- the only place a verdict becomes points and sentences
- :mod:`~tilelab.grading.cache`, :mod:`~tilelab.grading.gates` -- a class run's verdicts,
  calibrated gates
"""
