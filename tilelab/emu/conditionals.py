"""Which kernels and globals survive the preprocessor's ``#if``/``#ifdef`` (and ``-D``).

The translator finds ``__global__`` functions and device globals in the text; one inside an
``#ifdef`` that is off must not get an entry point (g++ would not know the name). When the
source has conditionals, the learner's code (its ``#include`` lines already blanked) goes
through the C preprocessor alone, with the module's ``-D`` options, and only what is still
there counts.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

from .errors import CompileError

_CONDITIONAL = re.compile(r"^[ \t]*(?:#|%:)[ \t]*if", re.M)


def has_conditionals(masked: str) -> bool:
    """Whether ``masked`` has an ``#if``, ``#ifdef`` or ``#ifndef``."""
    return _CONDITIONAL.search(masked) is not None


def preprocess(body: str, defines: tuple[str, ...]) -> str:
    """``body`` after the C preprocessor (no includes; the CUDA names left as they are)."""
    return _preprocess(body, tuple(defines), os.environ.get("TILELAB_EMU_CXX", "g++"))


@functools.lru_cache(maxsize=16)  # a grading translates one source twice (plain, analysis)
def _preprocess(body: str, defines: tuple[str, ...], cxx: str) -> str:
    try:
        proc = subprocess.run([cxx, "-E", "-P", "-x", "c++", "-std=c++17", "-D__CUDACC__",
                               "-D__NVCC__", *defines, "-"], input=body, capture_output=True,
                              text=True, timeout=60, check=False, env={**os.environ,
                                                                       "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompileError(f"the C preprocessor ({cxx}) could not run: {exc}") from exc
    if proc.returncode != 0:  # a bad #if: g++ reports it with the learner's line later
        return body
    return proc.stdout
