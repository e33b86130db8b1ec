"""Helpers the tests (and benchmarks/) share; not part of the package."""

#: A test's ``record_property(SUMMARY_LINE, text)``: ``text`` is printed at the end of the
#: run (tests/conftest.py), from whichever xdist worker ran the test (a worker's own output
#: is not shown).
SUMMARY_LINE = "summary line"


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
