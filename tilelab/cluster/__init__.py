"""Where a class run's tasks run when one process is not enough: a Dask cluster.

- :mod:`tilelab.cluster.start`: a local cluster (one worker per GPU, or emulator workers)
  or any running scheduler; the Slurm recipe with dask-jobqueue;
- :mod:`tilelab.cluster.run`: the executor (:func:`~tilelab.cluster.run.on_dask`) that
  :func:`tilelab.classroom.grade_class` is handed: each task
  (:func:`tilelab.classroom.task.grade`) on a worker, a twice-killed worker's task 0 points.
"""
