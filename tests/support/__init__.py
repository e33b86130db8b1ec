"""Helpers the tests (and benchmarks/) share; not part of the package."""

#: A test's ``record_property(SUMMARY_LINE, text)``: ``text`` is printed at the end of the
#: run (tests/conftest.py), from whichever xdist worker ran the test (a worker's own output
#: is not shown).
SUMMARY_LINE = "summary line"
