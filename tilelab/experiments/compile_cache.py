"""Kernels compiled ahead, in parallel, into PyCUDA's compiler cache.

PyCUDA's ``SourceModule`` runs nvcc once per source and keeps the cubin in its cache; the
road to cuBLAS alone has some seventy sources of one to several seconds of nvcc each,
which one process would compile one after another. :func:`warm` runs nvcc for all of them
at once (one thread per CPU, each waiting on its nvcc), with the options ``SourceModule``
uses in the current context, so each later ``SourceModule`` of the same source finds its
cubin in the cache.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor


def warm(sources: Iterable[str], workers: int | None = None) -> int:
    """Compile every distinct source (for the current context's GPU) into PyCUDA's cache;
    how many there were. A source nvcc refuses is left for ``SourceModule`` to report."""
    import pycuda.driver as cuda
    from pycuda.compiler import compile as nvcc

    major, minor = cuda.Context.get_device().compute_capability()
    arch = f"sm_{major}{minor}"
    todo = sorted(set(sources))

    def one(source: str) -> None:
        with contextlib.suppress(Exception):  # SourceModule says what is wrong, in order
            nvcc(source, arch=arch)

    with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        list(pool.map(one, todo))
    return len(todo)
