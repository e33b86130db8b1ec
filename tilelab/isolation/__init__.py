"""The walls every submission's code runs inside, shared by the grader and the class run.

Nothing here grades: it knows how to run a process so that it sees only what it is
given, is capped and killed as a tree, and leaves nothing behind.

- :mod:`~tilelab.isolation.bubblewrap` -- the OS sandbox (no network, only its own files,
  a result channel the sandbox cannot write)
- :mod:`~tilelab.isolation.enter` -- the one launcher and killer of a sandbox's tree
- :mod:`~tilelab.isolation.limits` -- cgroups, per-process limits and private tmpfs
- :mod:`~tilelab.isolation.scratch` -- temporary folders that are removed, whatever happens
- :mod:`~tilelab.isolation.basecache` -- the read-only caches a grading sandbox starts with
- :mod:`~tilelab.isolation.gpulock` -- one GPU shared by several tasks, timed work alone
- :mod:`~tilelab.isolation.gpu_nodes` -- the device nodes of one GPU, for one sandbox
"""
