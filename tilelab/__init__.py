"""tilelab: the package behind the course on CUDA shared memory and tiling in PyCUDA.

One implementation serves the notebooks, the grader, the command line and the book:
a runtime facade (PyCUDA on a GPU, a CPU emulator otherwise), the exercise registry,
correctness checks, benchmarks and grading.
"""

__version__ = "0.1.0"
