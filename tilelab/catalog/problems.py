"""The computations the exercises ask for: inputs, float64 references, kernel arguments.

A problem knows how to make fresh random inputs for a shape, what the right answer is,
which argument list the kernels take, and how big a launch grid a shape needs.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:
    class _Numpy(ModuleType):
        """numpy, loaded at its first use: a process that only reads the problems (the
        command line's own process, which grades in a child) never loads it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy"), name)

    np = _Numpy("numpy")

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
        """The grid for these sizes; a grid dimension named ``ONE`` is a single block."""
        gx, gy = self.grid_dims
        return (
            max(1, math.ceil(sizes.get(gx, 1) / self.tile[0])),
            max(1, math.ceil(sizes.get(gy, 1) / self.tile[1])),
        )

    def describe(self) -> str:
        gx, gy = self.grid_dims
        y = "1" if gy == ONE else f"ceil({gy}/{self.tile[1]})"
        return f"block={self.block}, grid=(ceil({gx}/{self.tile[0]}), {y})"


ONE = "1"  # a grid dimension of one block (a 1-D problem)


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
    #: per-element scale of an acceptable float32 error (None: |A|·|B| for a product, 0
    #: for data movement)
    bound: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None

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

    def work(self, shape: Shape) -> float:
        """The larger of the flops and the bytes moved at ``shape``: what an emulated
        launch's time grows with."""
        return max(self.flops(shape), self.bytes_moved(shape))

    def error_bound(self, inputs: dict[str, np.ndarray],
                    magnitude: Callable[[str], np.ndarray] | None = None) -> np.ndarray:
        """Per-element scale of an acceptable float32 error (|A|·|B| for a product;
        ``magnitude``: an input's absolute values in float64 by its name, where they were
        made before)."""
        if self.bound is not None:
            return self.bound(inputs)
        if self.name == "matmul":
            mag = magnitude or (lambda k: np.abs(_wide(inputs[k])))
            return mag("A") @ mag("B")
        return np.zeros(self.output_shape(tuple(inputs["in"].shape)))


def _wide(a: np.ndarray) -> np.ndarray:
    """``a`` in float64 (itself where it is already)."""
    return np.asarray(a, dtype=np.float64)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values drawn uniformly from [-1, 1) (drawn as float32: five times faster than
    drawing float64 and converting, at a speed run's sizes)."""
    a = rng.random(shape, dtype=np.float32)
    a *= 2
    a -= 1
    return a


MATMUL = Problem(
    name="matmul",
    dims=("M", "N", "K"),
    output="C",
    make_inputs=lambda s, rng: {"A": _uniform(rng, (s[0], s[2])), "B": _uniform(rng, (s[2], s[1]))},
    reference=lambda x: _wide(x["A"]) @ _wide(x["B"]),
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


# ---------------------------------------------------------------- the small steps' problems
# Each asks for one idea before the matrix multiply asks for all of them at once.

BLOCK_1D = 256  # threads per block of the 1-D steps (the reduction and the stencil)
STENCIL_RADIUS = 2  # the stencil reads 2 neighbours on each side


def _abs_sum(x: dict[str, np.ndarray], *names: str) -> np.ndarray:
    return sum(np.abs(x[n]).astype(np.float64) for n in names)  # type: ignore[return-value]


ADD2D = Problem(
    name="add2d",
    dims=("M", "N"),
    output="C",
    make_inputs=lambda s, rng: {"A": _uniform(rng, (s[0], s[1])), "B": _uniform(rng, (s[0], s[1]))},
    reference=lambda x: x["A"].astype(np.float64) + x["B"].astype(np.float64),
    output_shape=lambda s: (s[0], s[1]),
    arg_order=("A", "B", "C", "M", "N"),
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 12.0 * s[0] * s[1],
    analysis_shape=(40, 70),
    sanitize_shape=(50, 70),
    bound=lambda x: _abs_sum(x, "A", "B"),
)


def _block_sums(x: np.ndarray) -> np.ndarray:
    """float64 sums of consecutive chunks of BLOCK_1D values (the last one partial)."""
    n = x.shape[0]
    pad = np.zeros(-(-n // BLOCK_1D) * BLOCK_1D)
    pad[:n] = x
    return pad.reshape(-1, BLOCK_1D).sum(axis=1).reshape(1, -1)


BLOCK_SUM = Problem(
    name="block_sum",
    dims=("n",),
    output="sums",
    make_inputs=lambda s, rng: {"x": rng.uniform(-1.0, 1.0, size=s[0]).astype(np.float32)},
    reference=lambda x: _block_sums(x["x"].astype(np.float64)),
    output_shape=lambda s: (1, max(1, -(-s[0] // BLOCK_1D))),
    arg_order=("x", "sums", "n"),
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 4.0 * s[0],
    analysis_shape=(600,),
    sanitize_shape=(300,),
    bound=lambda x: _block_sums(np.abs(x["x"]).astype(np.float64)),
)


def _box(x: np.ndarray) -> np.ndarray:
    """y[i] = x[i-R] + ... + x[i+R], zeros outside x (R = STENCIL_RADIUS)."""
    r = STENCIL_RADIUS
    pad = np.concatenate([np.zeros(r), x, np.zeros(r)])
    return sum(pad[d : d + x.shape[0]] for d in range(2 * r + 1)).reshape(1, -1)


STENCIL = Problem(
    name="stencil",
    dims=("n",),
    output="y",
    make_inputs=lambda s, rng: {"x": rng.uniform(-1.0, 1.0, size=s[0]).astype(np.float32)},
    reference=lambda x: _box(x["x"].astype(np.float64)),
    output_shape=lambda s: (1, s[0]),
    arg_order=("x", "y", "n"),
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 8.0 * s[0],
    analysis_shape=(600,),
    sanitize_shape=(300,),
    bound=lambda x: _box(np.abs(x["x"]).astype(np.float64)),
)

STAGE_TILE = 32  # the tile of the tiled multiply's stages


def _tile_pair(x: dict[str, np.ndarray], f64: bool = True) -> np.ndarray:
    """C[r][c] = As[ty][tx] + Bs[ty][tx] for the first tile pair of each block: As holds
    A's row r at columns tx = c % 32, Bs holds B's row ty = r % 32 at column c (zeros
    outside A and B)."""
    a = np.abs(x["A"]) if not f64 else x["A"]
    b = np.abs(x["B"]) if not f64 else x["B"]
    m, k = a.shape
    n = b.shape[1]
    r = np.arange(m)[:, None]
    c = np.arange(n)[None, :]
    tx, ty = c % STAGE_TILE, r % STAGE_TILE
    av = np.where(tx < k, a.astype(np.float64)[r, np.minimum(tx, k - 1)], 0.0)
    bv = np.where(ty < k, b.astype(np.float64)[np.minimum(ty, k - 1), c], 0.0)
    return av + bv


def _first_tile(x: dict[str, np.ndarray], f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The product over the first tile of K only: A[:, :32] @ B[:32, :]."""
    t = min(STAGE_TILE, x["A"].shape[1])
    return f(x["A"][:, :t]).astype(np.float64) @ f(x["B"][:t, :]).astype(np.float64)


TILE_PAIR = Problem(
    name="tile_pair",
    dims=("M", "N", "K"),
    output="C",
    make_inputs=MATMUL.make_inputs,
    reference=_tile_pair,
    output_shape=lambda s: (s[0], s[1]),
    arg_order=MATMUL.arg_order,
    flops=lambda s: 0.0,
    bytes_moved=lambda s: 12.0 * s[0] * s[1],
    analysis_shape=(64, 64, 64),
    sanitize_shape=(50, 70, 40),
    bound=lambda x: _tile_pair(x, f64=False),
)

FIRST_TILE = Problem(
    name="first_tile",
    dims=("M", "N", "K"),
    output="C",
    make_inputs=MATMUL.make_inputs,
    reference=lambda x: _first_tile(x, lambda a: a),
    output_shape=lambda s: (s[0], s[1]),
    arg_order=MATMUL.arg_order,
    flops=lambda s: 2.0 * s[0] * s[1] * min(STAGE_TILE, s[2]),
    bytes_moved=MATMUL.bytes_moved,
    analysis_shape=(64, 64, 64),
    sanitize_shape=(50, 70, 40),
    bound=lambda x: _first_tile(x, np.abs),
)
