"""One look for every generated image: colours, sizes, a figure factory and saving."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

DPI = 110  # layout: inches x DPI = the width a figure is shown at (CSS pixels)
SCALE = 2  # the PNG has SCALE x as many pixels per side (sharp on HiDPI screens)
COLUMN_PX = 620  # a figure's room in the text column of a page at a 1280-px window (CSS px)
MIN_LABEL_PX = 13.0  # no text of a figure smaller than this, as displayed
METADATA_KEY = "tilelab-min-text-px"  # PNG text chunk: smallest text, in image pixels
INK = "#1f2933"
MUTED = "#5b6673"  # secondary text: 5.9:1 on white (WCAG AA asks 4.5:1 for small text)
GRID = "#e4e7eb"
MEASURED = "#0b7a3e"  # a number measured on a GPU
QUERIED = "#1f4e8c"  # a property the driver reports, or one computed from them
TYPICAL = "#8a5a00"  # a datasheet- or literature-class number, not measured here
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)
A_COLOUR, B_COLOUR, C_COLOUR = "#4c78a8", "#f58518", "#54a24b"
#: series drawn apart from the palette: the library every kernel is measured against
REFERENCE_SERIES = {"cublas": {"color": "#000000", "linestyle": "--", "marker": "s",
                               "linewidth": 2.2}}
LINESTYLES = ("-", "--", ":", "-.")


def series_style(name: object, index: int) -> dict:
    """Colour, line and marker of the ``index``-th series of a line chart: the reference
    series (cuBLAS) in black and dashed, the others from the palette, with a new line style
    each time the palette comes round again (no two series look alike)."""
    if str(name) in REFERENCE_SERIES:
        return dict(REFERENCE_SERIES[str(name)])
    return {"color": PALETTE[index % len(PALETTE)],
            "linestyle": LINESTYLES[(index // len(PALETTE)) % len(LINESTYLES)],
            "marker": "o", "linewidth": 1.6}


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


def legible(fig: Figure) -> float:
    """Raise every text of ``fig`` to at least ``MIN_LABEL_PX`` as displayed: at the width
    of its tight bounding box (what ``save`` writes), or shrunk to the column when wider.
    Returns the smallest text, in points."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    floor = 0.0
    for _ in range(4):  # larger text widens the box, which shrinks it on the page: settle
        width_px = fig.get_tightbbox(canvas.get_renderer()).width * DPI
        floor = MIN_LABEL_PX / min(1.0, COLUMN_PX / width_px) * 72 / DPI
        small = [t for t in texts if t.get_fontsize() < floor - 1e-6]
        if not small:
            break
        for t in small:
            t.set_fontsize(floor)
    return min((t.get_fontsize() for t in texts), default=floor)


def save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a PNG at ``SCALE`` x its display resolution, every text legible, the
    smallest text's size in image pixels recorded in the PNG (``METADATA_KEY``)."""
    smallest = legible(fig)
    fig.savefig(path, format="png", dpi=DPI * SCALE, bbox_inches="tight", facecolor="white",
                metadata={METADATA_KEY: f"{smallest * DPI * SCALE / 72:.2f}"})
