"""Helpers the tests (and benchmarks/) share; not part of the package."""
