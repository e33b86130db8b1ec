"""Shared fixtures and the ``gpu`` marker: tests that need a GPU are skipped without one.

``make test`` runs the suite on three pytest-xdist workers, a test module on one worker (its
module-scoped class run or corpus is made once); the modules that take longest start first
(:data:`FIRST`), so no worker is left alone with one of them at the end."""

from __future__ import annotations

import importlib.util

import pytest
from support import SUMMARY_LINE

from tilelab.device import backend

#: The modules that take longest (class runs, the hostile corpus), in the order a parallel
#: run starts them; the other modules follow in their own order.
FIRST = ("test_corpus.py", "test_corpus_cells.py", "test_classroom.py", "test_class_cluster.py",
         "test_term.py", "test_package.py", "test_notebooks.py", "test_class_instructor.py",
         "test_gradebook_postgres.py", "test_sgemm.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the longest modules first
        rank = {name: i for i, name in enumerate(FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))
    ok, why = backend.gpu_probe()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    """A fresh random generator for each test, seeded differently on every run."""
    import numpy as np

    return np.random.default_rng()


# The cluster run's tests need Dask (requirements.txt); a GPU machine set up with only
# requirements-gpu.txt's PyCUDA and nbgrader runs the rest.
collect_ignore = [] if importlib.util.find_spec("distributed") else [
    "test_class_cluster.py", "test_gradebook_postgres.py"]

_summary: list[str] = []  # the SUMMARY_LINE properties of the tests that ran


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _summary.extend(text for name, text in report.user_properties if name == SUMMARY_LINE)


def pytest_terminal_summary(terminalreporter) -> None:
    for text in _summary:
        terminalreporter.write_line(text)
