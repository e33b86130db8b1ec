"""Checks on a submitted kernel source before any compiler sees it."""

from __future__ import annotations

import re

MAX_SOURCE_BYTES = 256 * 1024
ALLOWED_INCLUDES = frozenset(
    {
        "stdio.h",
        "math.h",
        "stdint.h",
        "float.h",
        "limits.h",
        "cstdio",
        "cmath",
        "cstdint",
        "cuda_runtime.h",
        "cuda.h",
        "device_launch_parameters.h",
    }
)
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]*)[>"]', re.MULTILINE)


class SourceRejected(ValueError):
    """The source cannot be graded; the message says why and what to do."""


def validate_source(source: str | bytes) -> str:
    """Return the source as text, or raise :class:`SourceRejected` with a clear reason."""
    if isinstance(source, bytes):
        if len(source) > MAX_SOURCE_BYTES:
            raise SourceRejected(_too_big(len(source)))
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceRejected(
                f"the kernel source is not valid UTF-8 text (byte {exc.start}); save the "
                "notebook or .cu file as UTF-8 and remove binary characters."
            ) from None
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        raise SourceRejected(_too_big(size))
    if "\x00" in source:
        raise SourceRejected("the kernel source contains a NUL byte; remove binary characters.")
    if not source.strip():
        raise SourceRejected("the kernel source is empty; write the kernel in the kernel cell.")
    for match in _INCLUDE.finditer(source):
        header = match.group(2).strip()
        if header not in ALLOWED_INCLUDES:
            line = source.count("\n", 0, match.start()) + 1
            raise SourceRejected(
                f"line {line}: #include of {header!r} is not allowed; kernels may include only "
                f"{', '.join(sorted(ALLOWED_INCLUDES))}. "
                "Put everything the kernel needs in its cell."
            )
    return source


def _too_big(size: int) -> str:
    return (
        f"the kernel source is {size} bytes, more than the {MAX_SOURCE_BYTES} allowed; "
        "a kernel for this course fits in a few kilobytes."
    )
