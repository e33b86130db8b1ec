"""One look for every generated image: colours, sizes, a figure factory and saving."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

DPI = 110
INK = "#1f2933"
MUTED = "#7b8794"
GRID = "#e4e7eb"
MEASURED = "#0b7a3e"  # a number measured on a GPU
QUERIED = "#1f4e8c"  # a property the driver reports, or one computed from them
TYPICAL = "#8a5a00"  # a datasheet- or literature-class number, not measured here
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)
A_COLOUR, B_COLOUR, C_COLOUR = "#4c78a8", "#f58518", "#54a24b"


def figure(width: float = 7.2, height: float = 3.8) -> Figure:
    """A fresh figure (no pyplot: nothing global, nothing to close)."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.patch.set_facecolor("white")
    return fig


def tidy(ax) -> None:
    """Light grid, no top/right spines."""
    ax.grid(True, axis="y", color=GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as PNG (the format every browser shows the same)."""
    fig.savefig(path, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
