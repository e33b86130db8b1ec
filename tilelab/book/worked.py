"""The worked example of chapter 3: C = A·B for 4x4 matrices, with 2x2 tiles.

Computed here, never typed: the diagram of tiles moving through shared memory, the trace
table and the read counts all come from these functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N, TILE = 4, 2
A = np.arange(1, 17, dtype=np.int64).reshape(N, N)
B = np.array([[1, 0, 2, 1], [0, 1, 1, 0], [2, 1, 0, 1], [1, 2, 1, 0]], dtype=np.int64)


@dataclass(frozen=True)
class Phase:
    """One trip round the tile loop of one block: what is in shared memory, what is summed."""

    t: int  # first k of this phase
    a_tile: np.ndarray  # As after the loads
    b_tile: np.ndarray  # Bs after the loads
    partial: np.ndarray  # each thread's acc after the phase


def phases(by: int = 0, bx: int = 0, a: np.ndarray = A, b: np.ndarray = B,
           tile: int = TILE) -> list[Phase]:
    """Replay the tiled kernel for block (by, bx), phase by phase."""
    n = a.shape[0]
    rows = slice(by * tile, (by + 1) * tile)
    cols = slice(bx * tile, (bx + 1) * tile)
    acc = np.zeros((tile, tile), dtype=a.dtype)
    out = []
    for t in range(0, n, tile):
        a_tile = a[rows, t : t + tile].copy()
        b_tile = b[t : t + tile, cols].copy()
        acc = acc + a_tile @ b_tile
        out.append(Phase(t, a_tile, b_tile, acc.copy()))
    return out


def global_reads(n: int, tile: int) -> dict[str, int]:
    """Global-memory reads of A and B needed for one tile x tile block of C.

    Naive: each of tile² threads reads a row of A and a column of B (2n values).
    Tiled: n / tile phases, each loading one tile of A and one of B (2·tile² values).
    """
    naive = tile * tile * 2 * n
    tiled = (n // tile) * 2 * tile * tile
    return {"naive": naive, "tiled": tiled, "factor": naive // tiled}


def check() -> bool:
    """The replay agrees with NumPy's product for every block."""
    c = np.zeros_like(A)
    for by in range(N // TILE):
        for bx in range(N // TILE):
            c[by * TILE : (by + 1) * TILE, bx * TILE : (bx + 1) * TILE] = phases(by, bx)[-1].partial
    return bool(np.array_equal(c, A @ B))
