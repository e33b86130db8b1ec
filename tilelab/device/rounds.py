"""How many launches a timed run makes of each kernel: a few to warm up, then the timed
ones. A module of its own, importing nothing, so that the grading worker can start its GPU
tools (:mod:`tilelab.grading.counters` draws the launch Nsight Compute counts from these)
before it loads NumPy."""

WARMUP = 5
REPEAT = 20
