"""Checks on a submitted kernel source before any compiler sees it.

The ``#include`` allow-list is the emulator's (one list: a kernel the emulator runs is never
refused by the grader); every header on it is one nvcc provides too.
"""

from __future__ import annotations

import re

from tilelab.emu import ALLOWED_INCLUDES, file_directives, find_kernels, mask, param_name
from tilelab.emu import source as emu_source

MAX_SOURCE_BYTES = 256 * 1024


class SourceRejected(ValueError):
    """The source cannot be graded; the message says why and what to do."""


def validate_source(source: str | bytes) -> str:
    """The source as the text to compile (normal form, see :mod:`tilelab.emu.source`), or
    raise :class:`SourceRejected` with a clear reason."""
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
    try:
        source = emu_source.prepare(source)  # what nvcc and g++ read: BOM, CR, \f, \v
        masked = mask(source)
        emu_source.check_reserved(masked)
        emu_source.check_pasting(masked)
    except (emu_source.SourceTooComplex, emu_source.ReservedName) as exc:
        raise SourceRejected(str(exc)) from None
    _check_includes(source)
    return source


def _check_includes(source: str) -> None:
    """Every file-reading directive, as the preprocessor reads it, names an allowed header
    literally (never a macro), so no other file is ever opened; none is ever shown."""
    for d, shown, header in file_directives(source):
        if header not in ALLOWED_INCLUDES:
            what = repr(header) if header else shown[:80] or "a computed name"
            raise SourceRejected(
                f"line {d.line}: #{d.name} of {what} is not allowed; kernels may include "
                f"only {', '.join(sorted(ALLOWED_INCLUDES))}, named literally. "
                "Put everything the kernel needs in its cell."
            )


def _too_big(size: int) -> str:
    return (
        f"the kernel source is {size} bytes, more than the {MAX_SOURCE_BYTES} allowed; "
        "a kernel for this course fits in a few kilobytes."
    )


_TYPE_NOISE = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b")


def parameter_types(params: tuple[str, ...] | list[str]) -> list[str]:
    """``("const float* __restrict__ A", "int M")`` -> ``["float*", "int"]``: what the launch
    passes (qualifiers and names dropped; ``float A[]`` is ``float*``)."""
    out = []
    for i, text in enumerate(params):
        name = param_name(text, i)
        text = _TYPE_NOISE.sub(" ", re.sub(r"\[[^\]]*\]", "*", text))  # float A[] is float*
        words = re.findall(r"[A-Za-z_]\w*|\*", text)
        if name in words:
            del words[len(words) - 1 - words[::-1].index(name)]  # the parameter's name
        out.append(" ".join(w for w in words if w != "*") + "*" * words.count("*"))
    return out


def check_signature(source: str, kernel: str, signature: str) -> None:
    """Raise :class:`SourceRejected` when ``kernel`` is defined in ``source`` with parameter
    types other than ``signature``'s (a launch would pass it the wrong data). A kernel the
    scan cannot find (say, named by a macro) is left for the compiler to find."""
    found = {k.name: k for k in find_kernels(mask(source))}
    expected = find_kernels(mask(signature + " {}"))[0]
    if kernel not in found:
        if found and not re.search(r"^\s*(?:#|%:)\s*define\b", source, re.M):
            raise SourceRejected(
                f"no kernel named {kernel!r}: the source defines "
                f"{', '.join(repr(n) for n in found)}. The exercise fixes the name and the "
                f"signature: {signature}"
            )
        return
    got, want = parameter_types(found[kernel].params), parameter_types(expected.params)
    if got == want:
        return
    if len(got) != len(want):
        what = f"it takes {len(got)} parameters, the exercise passes {len(want)}"
    else:
        i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
        what = (
            f"parameter {i + 1} ({found[kernel].params[i]!r}) is {got[i]}, the launch "
            f"passes {want[i]}"
        )
    raise SourceRejected(
        f"line {found[kernel].line}: {kernel} has the wrong signature: {what}. "
        f"Declare it exactly as given: {signature}"
    )
