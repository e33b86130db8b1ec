"""Grade a class on a Dask cluster: one task per (student, assignment), one writer.

- :mod:`tilelab.cluster.start`: a local cluster (one worker per GPU, or emulator workers)
  or any running scheduler; the Slurm recipe with dask-jobqueue;
- :mod:`tilelab.cluster.tasks`: what a task receives and returns, and the task itself
  (grading one submission in a private copy of the course);
- :mod:`tilelab.cluster.writer`: the coordinator's single writer into nbgrader's gradebook
  and the feedback folders;
- :mod:`tilelab.cluster.resume`: content hashes, so a rerun grades only what changed;
- :mod:`tilelab.cluster.run`: the run loop that ties them together (its progress:
  :mod:`tilelab.classroom.progress`).
"""
