"""The course's reference kernels (``tilelab/kernels/*.cu``), named and ready to launch."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from tilelab.problems import COPY, MATMUL, TRANSPOSE, Launch, Problem


def kernel_file(name: str) -> str:
    """The text of a shipped ``.cu`` file."""
    return resources.files("tilelab").joinpath("kernels", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class KernelRef:
    """A reference kernel: where its source is, its name, launch geometry and problem."""

    key: str
    file: str
    name: str
    problem: Problem
    launch: Launch
    label: str
    defines: tuple[tuple[str, str], ...] = ()

    def source(self) -> str:
        """The kernel file with its tunables set: each ``#define NAME default`` line of the
        file's defaults is rewritten in place, so every line keeps its number in the file
        (the line numbers the emulator, nvcc and compute-sanitizer report are the file's)."""
        text = kernel_file(self.file)
        for name, value in self.defines:
            pattern = re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{name})[ \t]+\S.*$", re.M)
            if len(pattern.findall(text)) != 1:
                raise ValueError(
                    f"{self.file} must define {name} with a default exactly once "
                    f"(#ifndef {name} / #define {name} ... / #endif) for {self.key} to set it"
                )
            text = pattern.sub(lambda m, v=value: f"{m.group(1)} {v}", text)
        return text


def _sq(b: int) -> Launch:
    return Launch(block=(b, b, 1), grid_dims=("N", "M"), tile=(b, b))


_T32x8 = Launch(block=(32, 8, 1), grid_dims=("cols", "rows"), tile=(32, 32))

KERNELS: dict[str, KernelRef] = {
    k.key: k
    for k in (
        KernelRef(
            "naive",
            "matmul_naive.cu",
            "matmul_naive",
            MATMUL,
            _sq(16),
            "naive, threadIdx.x along columns (coalesced)",
        ),
        KernelRef(
            "naive_xrow",
            "matmul_naive_xrow.cu",
            "matmul_naive_xrow",
            MATMUL,
            Launch(block=(16, 16, 1), grid_dims=("M", "N"), tile=(16, 16)),
            "naive, threadIdx.x along rows (uncoalesced)",
        ),
        KernelRef(
            "tiled16",
            "matmul_tiled.cu",
            "matmul_tiled",
            MATMUL,
            _sq(16),
            "tiled, TILE 16",
            (("TILE", "16"),),
        ),
        KernelRef(
            "tiled32",
            "matmul_tiled.cu",
            "matmul_tiled",
            MATMUL,
            _sq(32),
            "tiled, TILE 32",
            (("TILE", "32"),),
        ),
        KernelRef(
            "tiled32_padded",
            "matmul_tiled_padded.cu",
            "matmul_tiled_padded",
            MATMUL,
            _sq(32),
            "tiled 32, both tiles padded [32][33]",
            (("TILE", "32"),),
        ),
        KernelRef(
            "tiled32_at",
            "matmul_tiled_at.cu",
            "matmul_tiled_at",
            MATMUL,
            _sq(32),
            "tiled 32, A tile stored transposed [32][32]",
            (("TILE", "32"), ("PAD", "0")),
        ),
        KernelRef(
            "tiled32_at_padded",
            "matmul_tiled_at.cu",
            "matmul_tiled_at",
            MATMUL,
            _sq(32),
            "tiled 32, A tile transposed, padded [32][33]",
            (("TILE", "32"), ("PAD", "1")),
        ),
        KernelRef(
            "copy", "transpose.cu", "copy_tile", COPY, _T32x8, "copy (same traffic, no transpose)"
        ),
        KernelRef(
            "transpose_naive",
            "transpose.cu",
            "transpose_naive",
            TRANSPOSE,
            _T32x8,
            "naive transpose (strided writes)",
        ),
        KernelRef(
            "transpose_shared",
            "transpose.cu",
            "transpose_shared",
            TRANSPOSE,
            _T32x8,
            "transpose through a [32][32] shared tile",
        ),
        KernelRef(
            "transpose_padded",
            "transpose.cu",
            "transpose_padded",
            TRANSPOSE,
            _T32x8,
            "transpose through a padded [32][33] shared tile",
        ),
    )
}


BARRIER_MARKS = {1: "__syncthreads();  // 1:", 2: "__syncthreads();  // 2:"}


def tiled_without_barrier(which: int, tile: int = 32) -> str:
    """The reference tiled kernel with its first or second ``__syncthreads()`` removed.

    The line stays (as a comment), so line numbers in reports match the full kernel.
    """
    src = KERNELS[f"tiled{tile}"].source()
    mark = BARRIER_MARKS[which]
    if mark not in src:
        raise ValueError(f"barrier {which} not found in the reference tiled kernel")
    return src.replace(mark, "/* barrier removed */ //")


def slow_but_right(exercise_id: str) -> str:
    """A correct kernel for the exercise, under its name and launch, that skips the
    exercise's lesson: the speed gate must fail it. naive: threadIdx.x walks rows
    (uncoalesced); tiled: the naive kernel (untiled); the padded ones: unpadded."""
    if exercise_id == "naive":
        return (
            KERNELS["naive_xrow"].source()
            .replace("matmul_naive_xrow", "matmul_naive")
            .replace("int row = blockIdx.x * blockDim.x + threadIdx.x;",
                     "int row = blockIdx.y * blockDim.y + threadIdx.x;")
            .replace("int col = blockIdx.y * blockDim.y + threadIdx.y;",
                     "int col = blockIdx.x * blockDim.x + threadIdx.y;")
        )
    if exercise_id == "tiled":
        return KERNELS["naive"].source().replace("matmul_naive", "matmul_tiled")
    if exercise_id == "transpose_shared":
        return (
            KERNELS["transpose_naive"].source()
            .replace("transpose_shared", "transpose_unused")
            .replace("transpose_naive", "transpose_shared")
        )
    if exercise_id == "transpose_padded":
        return (
            KERNELS["transpose_shared"].source()
            .replace("transpose_padded", "transpose_unused")
            .replace("transpose_shared", "transpose_padded")
        )
    if exercise_id == "matmul_at_padded":
        return KERNELS["tiled32_at"].source()
    raise KeyError(f"no slow-but-right kernel for {exercise_id!r}")
