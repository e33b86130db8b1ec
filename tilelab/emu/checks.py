"""Checks made before compiling: allowed ``#include``s and CUDA features the emulator lacks."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .errors import CompileError, UnsupportedConstruct
from .lexer import Directive, directives, line_of, mask, splice

# Headers a kernel may include: the prelude already provides everything they declare.
ALLOWED_INCLUDES = (
    "stdio.h", "math.h", "stdint.h", "float.h", "limits.h", "assert.h",
    "cstdio", "cmath", "cstdint", "cfloat", "climits", "cassert",
    "cuda_runtime.h", "cuda.h", "device_launch_parameters.h",
    "cooperative_groups.h", "cooperative_groups/reduce.h", "cooperative_groups/scan.h",
    "cooperative_groups/memcpy_async.h",
)
_HALF_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")
#: headers of asynchronous copies the emulator does not run, and what to write instead
_ASYNC_HEADERS = ("cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda/pipeline",
                  "cuda/barrier", "cuda_awbarrier.h", "cuda/annotated_ptr")
_ASYNC_ADVICE = (
    "the CPU emulator does not run its asynchronous copies (__pipeline_memcpy_async, "
    "__pipeline_commit, __pipeline_wait_prior, cuda::memcpy_async, cuda::pipeline). Copy the "
    "tile with a loop and a barrier, which every GPU and the emulator run the same: "
    "for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = src[i]; __syncthreads(); "
    "(or, with SourceModule(..., no_extern_c=True) and an extern \"C\" kernel, "
    "#include <cooperative_groups.h> and <cooperative_groups/memcpy_async.h>, then "
    "cooperative_groups::memcpy_async(block, tile, src, bytes); "
    "cooperative_groups::wait(block);, which the emulator runs)")

# (pattern, construct, hint) — the first match in the masked source is reported.
_UNSUPPORTED = (
    (r"\b__(?:shfl(?:_up|_down|_xor)?|ballot|any|all)\b", "{m} without _sync (removed in CUDA 9)",
     " (nvcc rejects it for Volta and later too): write the _sync form, e.g. "
     "__shfl_down_sync(0xffffffff, v, 16)"),
    (r"\b(?:this_grid|grid_group|this_multi_grid|multi_grid_group|this_cluster|cluster_group)\b"
     r"|\bcudaLaunchCooperativeKernel\w*",
     "{m} (a barrier across blocks: blocks that wait on each other)",
     ", or split the kernel into two launches where the grid would sync (the end of a "
     "launch is a barrier for the whole grid): the CPU emulator runs one block at a time, "
     "so no block can wait for another"),
    (r"\btex(?:1D|2D|3D|1Dfetch)\w*|\btexture\s*<|\bsurf(?:1D|2D|3D)\w*|\bcudaTextureObject_t\b",
     "{m} (textures and surfaces)", ""),
    (r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile|__volatile__)?\s*\(", "inline assembly ({m})", ""),
    (r"\bnvcuda\b|\bwmma\s*::|\bmma(?:_sync)?\s*\(", "{m} (tensor-core matrix operations)", ""),
    (r"\bcudaMalloc\w*|\bcudaFree\b|\bcudaMemcpy\w*", "{m} inside device code", ""),
    (r"<<<", "dynamic parallelism (a kernel launch <<<...>>> inside the kernel source)", ""),
    (r"\b__half2?\b|\b__nv_bfloat16\w*|\b__\w*b?float16\w*|\b__\w*half\w*"
     r"|\b__h(?:add|sub|mul|fma|div|neg|abs|max|min|eq|ne|lt|le|gt|ge)2\b|\b__h(?:mul|fma|div|neg|abs)\b"
     r"|(?:^|[;{}(,])[ \t]*(?:const\s+)?half2?\s*[*&]?\s*[A-Za-z_]",
     "half precision (__half/half)", " (or use float)"),
)


FILE_DIRECTIVES = ("include", "include_next", "import", "embed")


def file_directives(
    src: str, masked: str | None = None
) -> Iterator[tuple[Directive, str, str]]:
    """Each directive that reads a file, as the preprocessor sees it (comments blanked,
    lines spliced): the directive, its target as written (``<h>``, ``"h"`` or the argument
    text) and the header it names literally with ``#include`` ("" for anything else)."""
    masked = mask(src) if masked is None else masked
    for d in directives(masked):
        if d.name in FILE_DIRECTIVES:
            span = masked[d.start:d.end]
            start = d.start + len(span) - len(span.lstrip())  # the '#', past any comment
            m = re.match(r'\s*(?:#|%:)\s*\w*\s*(<[^>\n]*>|"[^"\n]*")', splice(src[start:d.end]))
            target = m.group(1)[1:-1].strip() if m and d.name == "include" else ""
            yield d, (m.group(1) if m else d.arg), target


def check_includes(src: str, masked: str) -> list[tuple[int, int]]:
    """Spans of the allowed ``#include`` and ``#pragma unroll`` lines to blank out.

    Raises ``CompileError`` for any other include (never opening the file) and
    ``UnsupportedConstruct`` for the half-precision headers. Directives are read as g++
    reads them, after splicing backslash-newlines.
    """
    blanks = []
    allowed = ", ".join(f"<{h}>" for h in ALLOWED_INCLUDES)
    for d, shown, target in file_directives(src, masked):
        if target in _HALF_HEADERS:
            raise UnsupportedConstruct(f"half precision ({target})", d.line, " (or use float)")
        if target in _ASYNC_HEADERS:
            raise CompileError(f"kernel.cu line {d.line}: #include <{target}>: "
                               + _ASYNC_ADVICE + ".", lines=(d.line,))
        if target not in ALLOWED_INCLUDES:
            raise CompileError(
                f"kernel.cu line {d.line}: #{d.name} {shown[:80]} is not allowed in kernels run "
                f"by the CPU emulator. Allowed: {allowed} (the prelude already declares "
                "what they do). Put the code you need into the kernel source itself.",
                lines=(d.line,),
            )
        blanks.append((d.start, d.end))
    for d in directives(masked):
        if d.name == "pragma" and re.match(r"unroll\b", d.arg):
            blanks.append((d.start, d.end))
        elif d.name == "line":
            blanks.append((d.start, d.end))  # would break the line mapping
    return blanks


def check_unsupported(masked: str) -> None:
    """Raise ``UnsupportedConstruct`` for the first CUDA feature the emulator cannot run."""
    code = "\n".join(
        "" if re.match(r"\s*(#|%:)\s*(include|pragma)\b", ln) else ln
        for ln in masked.split("\n")
    )
    found = []
    for pattern, construct, hint in _UNSUPPORTED:
        m = re.search(pattern, code, re.M)
        if m:
            token = m.group(0).strip(" \t;{}(,")
            found.append((m.start(), construct.format(m=token), hint))
    if found:
        pos, construct, hint = min(found)
        raise UnsupportedConstruct(construct, line_of(code, pos), hint)
