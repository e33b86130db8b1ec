"""The computations the exercises ask for: inputs, float64 references, kernel arguments.

A problem knows how to make fresh random inputs for a shape, what the right answer is,
which argument list the kernels take, and how big a launch grid a shape needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Launch:
    """Launch geometry: a fixed block, and a grid that covers the output with tiles.

    ``grid_dims`` names the shape dimension covered along grid x and grid y; ``tile`` is
    how many output elements one block covers along each.
    """

    block: tuple[int, int, int]
    grid_dims: tuple[str, str]
    tile: tuple[int, int]

    def grid(self, sizes: dict[str, int]) -> tuple[int, int]:
        gx, gy = self.grid_dims
        return (
            max(1, math.ceil(sizes[gx] / self.tile[0])),
            max(1, math.ceil(sizes[gy] / self.tile[1])),
        )

    def describe(self) -> str:
        gx, gy = self.grid_dims
        return f"block={self.block}, grid=(ceil({gx}/{self.tile[0]}), ceil({gy}/{self.tile[1]}))"


@dataclass(frozen=True)
class Problem:
    """One computation: names of its shape dimensions, inputs, reference and arguments."""

    name: str
    dims: tuple[str, ...]
    output: str
    make_inputs: Callable[[Shape, np.random.Generator], dict[str, np.ndarray]]
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    output_shape: Callable[[Shape], tuple[int, int]]
    arg_order: tuple[str, ...]  # buffer names then dimension names, as the kernel takes them
    flops: Callable[[Shape], float]
    bytes_moved: Callable[[Shape], float]
    exact: bool = False  # data movement only: results must match bit for bit
    #: the emulator's race and bank-conflict analysis runs one launch at this shape
    analysis_shape: Shape = ()
    #: compute-sanitizer runs one launch at a shape with partial tiles, to expose missing guards
    sanitize_shape: Shape = ()

    def sizes(self, shape: Shape) -> dict[str, int]:
        if len(shape) != len(self.dims):
            raise ValueError(
                f"{self.name} shapes have {len(self.dims)} sizes {self.dims}, got {shape}"
            )
        return dict(zip(self.dims, shape, strict=True))

    def arguments(self, bufs: dict[str, object], shape: Shape) -> list[object]:
        """The kernel's argument list: the buffers in ``bufs`` by name, then the sizes of
        ``shape`` as 32-bit ints, in :attr:`arg_order`."""
        sizes = self.sizes(shape)
        return [bufs[a] if a in bufs else np.int32(sizes[a]) for a in self.arg_order]

    def error_bound(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Per-element scale of an acceptable float32 error (|A|·|B| for a product)."""
        if self.name == "matmul":
            return np.abs(inputs["A"]).astype(np.float64) @ np.abs(inputs["B"]).astype(np.float64)
        return np.zeros(self.output_shape(tuple(inputs["in"].shape)))


def _uniform(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


MATMUL = Problem(
    name="matmul",
    dims=("M", "N", "K"),
    output="C",
    make_inputs=lambda s, rng: {"A": _uniform(rng, (s[0], s[2])), "B": _uniform(rng, (s[2], s[1]))},
    reference=lambda x: x["A"].astype(np.float64) @ x["B"].astype(np.float64),
    output_shape=lambda s: (s[0], s[1]),
    arg_order=("A", "B", "C", "M", "N", "K"),
    flops=lambda s: 2.0 * s[0] * s[1] * s[2],
    bytes_moved=lambda s: 4.0 * (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]),
    analysis_shape=(64, 64, 64),
    sanitize_shape=(50, 70, 40),
)

TRANSPOSE = Problem(
    name="transpose",
    dims=("rows", "cols"),
    output="out",
    make_inputs=lambda s, rng: {"in": _uniform(rng, (s[0], s[1]))},
    reference=lambda x: x["in"].T.astype(np.float64),
    output_shape=lambda s: (s[1], s[0]),
    arg_order=("in", "out", "rows", "cols"),
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 8.0 * s[0] * s[1],
    exact=True,
    analysis_shape=(64, 64),
    sanitize_shape=(50, 70),
)

COPY = Problem(
    name="copy",
    dims=("rows", "cols"),
    output="out",
    make_inputs=lambda s, rng: {"in": _uniform(rng, (s[0], s[1]))},
    reference=lambda x: x["in"].astype(np.float64),
    output_shape=lambda s: (s[0], s[1]),
    arg_order=("in", "out", "rows", "cols"),
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 8.0 * s[0] * s[1],
    exact=True,
)
