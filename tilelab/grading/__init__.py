"""The grader: one kernel source for one exercise becomes one verdict, then points.

- :mod:`~tilelab.grading.sandbox` -- ``grade_source``: the worker in a clean child, in a
  bubblewrap sandbox where one can be made (the walls: :mod:`tilelab.isolation`)
- :mod:`~tilelab.grading.worker` -- the child's entry point (resource caps, argv, JSON
  out); :mod:`~tilelab.grading.ahead` and :mod:`~tilelab.grading.sidecar`, the GPU's
  tools it starts ahead of the grade
- :mod:`~tilelab.grading.pipeline` -- the step lists, one per backend, and ``evaluate``
- :mod:`~tilelab.grading.steps`, :mod:`~tilelab.grading.emu_steps`,
  :mod:`~tilelab.grading.gpu_steps` -- the steps, each recording findings;
  :mod:`~tilelab.grading.timed` -- the timed run
- :mod:`~tilelab.grading.judge` -- the only place findings become ``correct`` and
  ``speed_passed``
- :mod:`~tilelab.grading.source_checks`, :mod:`~tilelab.grading.subset` -- what a graded
  kernel may be; :mod:`~tilelab.grading.correctness`, :mod:`~tilelab.grading.budget` --
  its outputs checked, within the emulator's time budgets; :mod:`~tilelab.grading.diagnosis`,
  :mod:`~tilelab.grading.kernel_lines` -- why a wrong one is wrong
- :mod:`~tilelab.grading.traffic`, :mod:`~tilelab.grading.counters`,
  :mod:`~tilelab.grading.sanitizer` -- the emulator's traffic, the GPU's counters and
  compute-sanitizer
- :mod:`~tilelab.grading.verdict` -- the data that crosses the process boundary
- :mod:`~tilelab.grading.scoring` -- the only place a verdict becomes points and sentences
- :mod:`~tilelab.grading.cache`, :mod:`~tilelab.grading.gates` -- a class run's verdicts,
  calibrated gates
"""
