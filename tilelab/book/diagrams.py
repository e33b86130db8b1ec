"""Diagrams drawn by code at build time: no hand-made images in the book.

Each function draws one diagram into a PNG. Numbers on a diagram are computed here
(geometry, bank arithmetic, the worked example) or read from measured data; a number of
neither kind is labelled "typical" and cited in the text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from tilelab.book import style, worked
from tilelab.book.data import format_value
from tilelab.catalog.banks import BANKS, bank_passes

WARP = 32
SECTOR = 32  # bytes the memory system moves per sector


def _blank(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    fig = style.figure(width, height)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "?"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{format_value(n / size)} {unit}"
    return f"{int(n)} B"


# --- chapter 1: the memory hierarchy -------------------------------------------------------


def hierarchy(path: Path, device: dict[str, Any] | None) -> None:
    """The memory levels as a pyramid: sizes and bandwidths from the device data file
    (measured in green, reported by the driver or computed from it in blue) and typical
    latencies (brown, from published microbenchmarks, not measured here)."""
    d = device or {}
    sms = d.get("sm_count")
    clock = d.get("clock_mhz")
    shared_bw = (sms * BANKS * 4 * clock * 1e6 / 1e9
                 if isinstance(sms, (int, float)) and isinstance(clock, (int, float)) else None)
    regs = d.get("regs_per_sm")
    none = "not measured yet"

    def q(value: Any, text: Callable[[Any], str]) -> str:
        return text(value) if value is not None else none

    levels = [
        ("Registers", "private to a thread",
         [(q(regs, lambda v: f"{_bytes(v * 4)} per SM ({format_value(v)} × 32-bit)"),
           style.QUERIED)],
         "no extra latency: operands"),
        ("Shared memory / L1", "one block's scratchpad; on-chip, per SM",
         [(q(d.get("shared_per_sm_bytes"), lambda v: f"up to {_bytes(v)} shared per SM"),
           style.QUERIED),
          (q(shared_bw, lambda v: f"≈ {format_value(v)} GB/s over all SMs"),
           style.QUERIED)],
         "~20–40 cycles"),
        ("L2 cache", "shared by all SMs",
         [(q(d.get("l2_bytes"), lambda v: f"{_bytes(v)}"), style.QUERIED)],
         "~200–300 cycles"),
        ("Global memory (HBM)", "every thread, every kernel, the host copies",
         [(q(d.get("copy_gbps"), lambda v: f"measured copy: {format_value(v)} GB/s"),
           style.MEASURED),
          (q(d.get("peak_bw_gbps"), lambda v: f"from clocks: {format_value(v)} GB/s"),
           style.QUERIED)],
         "~400–700 cycles"),
    ]
    # sized to be read at the book's column width (about 750 px at a 1280 px window)
    fig, ax = _blank(9.6, 6.2, (-0.6, 24.6), (-2.3, 11.4))
    for i, (name, scope, facts, latency) in enumerate(levels):
        y = 8.9 - i * 2.6
        half = 4.4 + i * 1.7
        ax.add_patch(FancyBboxPatch((10.5 - half, y), 2 * half, 2.15,
                                    boxstyle="round,pad=0.02,rounding_size=0.2",
                                    facecolor=("#e8f1fb", "#e9f6ee", "#fdf3e1", "#f3e8f7")[i],
                                    edgecolor=style.INK, linewidth=1))
        ax.text(10.5, y + 1.72, name, ha="center", va="center", fontsize=14, weight="bold",
                color=style.INK)
        ax.text(10.5, y + 1.25, scope, ha="center", va="center", fontsize=11,
                color=style.MUTED)
        for j, (text, colour) in enumerate(facts):
            ax.text(10.5, y + 0.78 - j * 0.45, text, ha="center", va="center", fontsize=11,
                    color=colour)
        ax.text(10.5 + half + 0.25, y + 1.05, latency, ha="left", va="center", fontsize=11.5,
                color=style.TYPICAL, style="italic")
    ax.annotate("", (0.2, 0.2), (0.2, 11.0),
                arrowprops={"arrowstyle": "->", "color": style.MUTED})
    ax.text(0.45, 5.6, "larger, slower", rotation=90, ha="left", va="center", fontsize=11,
            color=style.MUTED)
    legend = (("measured on the GPU", style.MEASURED),
              ("reported by the driver, or computed from it", style.QUERIED),
              ("typical latency, published microbenchmarks (not measured here)", style.TYPICAL))
    for k, (text, colour) in enumerate(legend):
        ax.add_patch(Rectangle((1.6, -0.75 - k * 0.55), 0.35, 0.32, color=colour))
        ax.text(2.15, -0.59 - k * 0.55, text, fontsize=11, va="center", color=colour)
    style.save(fig, path)


# --- chapter 1: grid, blocks, threads ------------------------------------------------------


def grid(path: Path) -> None:
    """A 3x3 grid of 4x4-thread blocks over a 12x12 matrix, with one thread's indices."""
    bdim, gdim = 4, 3
    by, bx, ty, tx = 1, 2, 1, 3
    n = bdim * gdim
    fig, ax = _blank(8.6, 4.6, (-0.5, 24), (-1.2, n + 1.2))
    for r in range(n):
        for c in range(n):
            in_block = r // bdim == by and c // bdim == bx
            me = in_block and r % bdim == ty and c % bdim == tx
            face = style.C_COLOUR if me else ("#dcefd9" if in_block else "white")
            ax.add_patch(Rectangle((c, n - 1 - r), 1, 1, facecolor=face, edgecolor=style.GRID,
                                   linewidth=0.6))
    for k in range(gdim + 1):
        ax.plot([k * bdim, k * bdim], [0, n], color=style.INK, linewidth=1.6)
        ax.plot([0, n], [k * bdim, k * bdim], color=style.INK, linewidth=1.6)
    for b in range(gdim):
        ax.text(b * bdim + bdim / 2, n + 0.35, f"blockIdx.x = {b}", ha="center", fontsize=7.5)
        ax.text(-0.3, n - b * bdim - bdim / 2, f"blockIdx.y = {b}", ha="right", va="center",
                fontsize=7.5, rotation=90)
    row, col = by * bdim + ty, bx * bdim + tx
    lines = (
        "One thread per element of C.",
        "gridDim = (3, 3) blocks,  blockDim = (4, 4) threads",
        f"The highlighted thread: blockIdx = (x={bx}, y={by}),",
        f"threadIdx = (x={tx}, y={ty})",
        f"row = blockIdx.y·blockDim.y + threadIdx.y = {by}·{bdim} + {ty} = {row}",
        f"col = blockIdx.x·blockDim.x + threadIdx.x = {bx}·{bdim} + {tx} = {col}",
        "",
        "Inside a block, threads are numbered x first, then y;",
        "each run of 32 consecutive numbers is one warp.",
    )
    for i, text in enumerate(lines):
        ax.text(n + 0.8, n - 0.8 - i * 1.15, text, fontsize=8.5, va="center",
                color=style.INK if i else style.MUTED)
    style.save(fig, path)


# --- chapter 2: coalescing -----------------------------------------------------------------


def coalescing(path: Path, n: int = 4096) -> None:
    """A warp's 32 loads: consecutive floats (a few sectors) vs a column (one sector each)."""
    fig = style.figure(8.4, 4.0)
    axes = fig.subplots(2, 1)
    cases = (
        ("threadIdx.x walks columns: thread i reads B[k][col + i]", np.arange(WARP) * 4),
        (f"threadIdx.x walks rows: thread i reads A[row + i][k]  (rows of {n} floats)",
         np.arange(WARP) * 4 * n),
    )
    for ax, (title, addrs) in zip(axes, cases, strict=True):
        sectors = sorted(set((addrs // SECTOR).tolist()))
        shown = sectors[: min(len(sectors), 32)]
        slot = {s: i for i, s in enumerate(shown)}
        for i in range(len(shown)):
            ax.add_patch(Rectangle((i * 1.0, 0), 0.92, 0.6, facecolor="#fdf3e1",
                                   edgecolor=style.TYPICAL, linewidth=0.8))
        for t, a in enumerate(addrs):
            s = int(a // SECTOR)
            x_mem = slot[s] + 0.08 + 0.76 * ((a % SECTOR) / SECTOR)
            x_thr = t * (max(len(shown), 4) / WARP)
            ax.plot([x_thr + 0.1, x_mem + 0.05], [1.55, 0.62], color=style.PALETTE[0],
                    linewidth=0.5, alpha=0.7)
            ax.plot([x_thr + 0.1], [1.6], "o", color=style.PALETTE[0], markersize=3)
        width = max(len(shown), 4)
        ax.set_xlim(-0.3, width + 0.3)
        ax.set_ylim(-0.5, 2.2)
        ax.axis("off")
        ax.text(0, 2.0, title, fontsize=9, color=style.INK)
        ax.text(0, -0.35, f"the warp touches {len(sectors)} sectors of {SECTOR} B "
                f"({len(sectors) * SECTOR} B moved for {WARP * 4} B used)",
                fontsize=8, color=style.TYPICAL)
    style.save(fig, path)


# --- chapter 3: tiles through shared memory ------------------------------------------------


def _matrix(ax, x0: float, y0: float, values: np.ndarray, title: str, colour: str,
            mark: tuple[slice, slice] | None = None, cell: float = 0.62) -> None:
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            on = mark is not None and r in range(rows)[mark[0]] and c in range(cols)[mark[1]]
            ax.add_patch(Rectangle((x0 + c * cell, y0 - (r + 1) * cell), cell, cell,
                                   facecolor=colour if on else "white", alpha=0.85 if on else 1,
                                   edgecolor=style.MUTED, linewidth=0.7))
            ax.text(x0 + (c + 0.5) * cell, y0 - (r + 0.5) * cell, str(values[r, c]),
                    ha="center", va="center", fontsize=10,
                    color="white" if on else style.INK)
    ax.text(x0 + cols * cell / 2, y0 + 0.12, title, ha="center", va="bottom", fontsize=9.5,
            color=style.INK)


def tiles_worked(path: Path) -> None:
    """The 4x4 worked example, block (0, 0): each phase's loads and partial sums."""
    steps = worked.phases(0, 0)
    t2 = worked.TILE
    fig, ax = _blank(9.6, 3.3 * len(steps), (0, 17.6), (-3.3 * len(steps) + 0.5, 0.8))
    for i, ph in enumerate(steps):
        y = -i * 3.3
        k = slice(ph.t, ph.t + t2)
        ax.text(0.0, y + 0.25, f"phase t = {ph.t}\n(k = {ph.t}..{ph.t + t2 - 1})",
                fontsize=10, va="top", weight="bold", color=style.INK)
        _matrix(ax, 2.0, y, worked.A, "A (global)", style.A_COLOUR, (slice(0, t2), k))
        _matrix(ax, 4.7, y, worked.B, "B (global)", style.B_COLOUR, (k, slice(0, t2)))
        for x0, text in ((7.4, "load,\nbarrier 1"), (12.0, "multiply,\nbarrier 2")):
            ax.add_patch(FancyArrowPatch((x0, y - 1.2), (x0 + 0.75, y - 1.2), arrowstyle="->",
                                         mutation_scale=12, color=style.INK))
            ax.text(x0 + 0.375, y - 1.4, text, ha="center", va="top", fontsize=8,
                    color=style.MUTED)
        _matrix(ax, 8.5, y - 0.6, ph.a_tile, "As\n(shared)", style.A_COLOUR,
                (slice(None), slice(None)))
        _matrix(ax, 10.2, y - 0.6, ph.b_tile, "Bs\n(shared)", style.B_COLOUR,
                (slice(None), slice(None)))
        _matrix(ax, 13.1, y - 0.6, ph.partial, f"acc after\nt = {ph.t}", style.C_COLOUR,
                (slice(None), slice(None)), cell=0.75)
        prod = " + ".join(f"{ph.a_tile[0, j]}·{ph.b_tile[j, 0]}" for j in range(t2))
        ax.text(14.9, y - 0.9, f"thread (0,0):\n{'acc + ' if i else ''}{prod}\n"
                f"= {ph.partial[0, 0]}", fontsize=9, va="top", color=style.INK)
    style.save(fig, path)


def tile_walk(path: Path, tiles: int = 4, by: int = 1, bx: int = 2) -> None:
    """One block's walk along K: phase t loads tile (by, t) of A and tile (t, bx) of B."""
    shown = [0, 1, tiles - 1]
    fig = style.figure(8.0, 2.5 * len(shown))
    axes = fig.subplots(len(shown), 3)
    for row, t in enumerate(shown):
        for col, (name, colour) in enumerate((("A", style.A_COLOUR), ("B", style.B_COLOUR),
                                              ("C", style.C_COLOUR))):
            ax = axes[row][col]
            ax.set_xlim(0, tiles)
            ax.set_ylim(0, tiles)
            ax.set_aspect("equal")
            ax.axis("off")
            for r in range(tiles):
                for c in range(tiles):
                    face, alpha = "white", 1.0
                    if name == "A" and r == by and c <= t:
                        face, alpha = colour, (1.0 if c == t else 0.25)
                    if name == "B" and c == bx and r <= t:
                        face, alpha = colour, (1.0 if r == t else 0.25)
                    if name == "C" and r == by and c == bx:
                        face, alpha = colour, 0.35 + 0.65 * (t + 1) / tiles
                    ax.add_patch(Rectangle((c, tiles - 1 - r), 1, 1, facecolor=face,
                                           alpha=alpha, edgecolor=style.MUTED, linewidth=0.8))
            label = {"A": f"A: tile ({by}, {t}) → As", "B": f"B: tile ({t}, {bx}) → Bs",
                     "C": f"C tile ({by}, {bx}): {t + 1} of {tiles} partial sums"}[name]
            ax.set_title(label, fontsize=9.5)
        axes[row][0].text(-0.15, tiles / 2, f"phase {t}", rotation=90, ha="right",
                          va="center", fontsize=10, weight="bold")
    style.save(fig, path)


# --- chapter 4: banks ----------------------------------------------------------------------


def bank_degree(stride_words: int, lanes: int = WARP) -> int:
    """How many lanes of a warp share the busiest bank when lane i reads word i·stride."""
    banks = [(i * stride_words) % BANKS for i in range(lanes)]
    words_per_bank: dict[int, set[int]] = {}
    for i, b in enumerate(banks):
        words_per_bank.setdefault(b, set()).add(i * stride_words)
    return max(len(v) for v in words_per_bank.values())


def banks(path: Path) -> None:
    """float s[32][32] vs s[32][33], coloured by bank; a warp walks column 0."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(colormaps["hsv"](np.linspace(0, 1, BANKS, endpoint=False)))
    fig = style.figure(9.2, 6.4)
    axes = fig.subplots(2, 2, gridspec_kw={"height_ratios": [4, 1]})
    for col, width in enumerate((32, 33)):
        ax = axes[0][col]
        idx = np.arange(32)[:, None] * width + np.arange(width)[None, :]
        ax.imshow(idx % BANKS, cmap=cmap, vmin=0, vmax=BANKS, interpolation="nearest")
        for lane in range(WARP):
            ax.add_patch(Rectangle((-0.5, lane - 0.5), 1, 1, fill=False, edgecolor="black",
                                   linewidth=1.1))
        hits = np.bincount((np.arange(WARP) * width) % BANKS, minlength=BANKS)
        ax.set_title(f"__shared__ float s[32][{width}]\nthread i reads s[i][0]: "
                     f"{int((hits > 0).sum())} bank(s), {int(hits.max())}-way",
                     fontsize=9)
        ax.set_xlabel("column", fontsize=8)
        ax.set_ylabel("row = thread of the warp", fontsize=8)
        ax.tick_params(labelsize=7)
        bar = axes[1][col]
        bar.bar(range(BANKS), hits, color=[cmap(b) for b in range(BANKS)],
                edgecolor=style.INK, linewidth=0.4)
        bar.set_xlim(-0.6, BANKS - 0.4)
        bar.set_ylim(0, WARP + 2)
        bar.set_xlabel("bank", fontsize=8)
        bar.set_ylabel("threads", fontsize=8)
        bar.tick_params(labelsize=7)
        style.tidy(bar)
    fig.tight_layout()
    style.save(fig, path)


def warp_reads(path: Path, ty: int = 5, k: int = 9) -> None:
    """One warp of the 32 x 32 tiled kernel (threads tx = 0..31 of row ty) at one k: the
    word each thread reads of As and Bs, coloured by bank, with the passes each access
    needs; beside them, the store of the transposed-tile kernel, down a column."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(colormaps["hsv"](np.linspace(0, 1, BANKS, endpoint=False)))
    idx = np.arange(32)[:, None] * 32 + np.arange(32)[None, :]
    lanes = range(WARP)
    panels = (
        ("As[ty][k]", [(ty, k)] * WARP, "every thread: the same word"),
        ("Bs[k][tx]", [(k, tx) for tx in lanes], "thread tx: word tx of row k"),
        ("As[tx][ty] = ... (transposed store)", [(tx, ty) for tx in lanes],
         "thread tx: row tx, one column"),
    )
    fig = style.figure(10.8, 4.6)
    axes = fig.subplots(1, 3)
    for ax, (title, cells, how) in zip(axes, panels, strict=True):
        ax.imshow(idx % BANKS, cmap=cmap, vmin=0, vmax=BANKS, interpolation="nearest",
                  alpha=0.35)
        for r, c in set(cells):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=True, facecolor=cmap(
                (r * 32 + c) % BANKS), edgecolor="black", linewidth=1.2))
        words = [r * 32 + c for r, c in cells]
        passes = bank_passes(words)
        distinct = len(set(words))
        banks_hit = len({w % BANKS for w in words})
        plural = "es" if passes > 1 else ""
        ax.set_title(f"{title}\n{how}\n{distinct} word(s), {banks_hit} bank(s): "
                     f"{passes} pass{plural}", fontsize=10)
        ax.set_xlabel("column", fontsize=9)
        ax.set_ylabel("row", fontsize=9)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    style.save(fig, path)


DIAGRAMS: dict[str, Callable[..., None]] = {
    "hierarchy": hierarchy,
    "grid": grid,
    "coalescing": coalescing,
    "tiles-worked": tiles_worked,
    "tile-walk": tile_walk,
    "banks": banks,
    "warp-reads": warp_reads,
}
