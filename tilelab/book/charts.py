"""Charts of measured data (bar, line, roofline), drawn with matplotlib at build time."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.book import style
from tilelab.book.data import Dataset, format_value, label

KINDS = ("bar", "line", "roofline")


@dataclass(frozen=True)
class ChartSpec:
    """What a ``measured-figure`` directive asks for."""

    kind: str
    experiment: str
    x: str = "kernel"
    y: str = ""
    hue: str = ""
    where: dict[str, list[str]] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    overlay: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    logy: bool = False
    title: str = ""
    points: dict[str, str] = field(default_factory=dict)  # roofline: kernel -> intensity

    def label(self, column: str, ds: Dataset) -> str:
        return label(column, ds.unit(column), self.labels)


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _key(value: Any) -> Any:
    return (0, float(value), "") if isinstance(value, (int, float)) else (1, 0.0, str(value))


def _categories(rows: list[dict], column: str, order: tuple[str, ...]) -> list[Any]:
    present = list(dict.fromkeys(r.get(column) for r in rows if r.get(column) is not None))
    if not order:
        return present
    by_text = {str(v): v for v in present}
    listed = [by_text[o] for o in order if o in by_text]
    return listed + [v for v in present if str(v) not in order]


def draw(spec: ChartSpec, data: dict[str, Dataset], path: Path,
         reflines: list[tuple[float, str]]) -> None:
    """Draw the chart ``spec`` from ``data`` (datasets by experiment) into ``path``."""
    if spec.kind == "bar":
        _bar(spec, data[spec.experiment], path, reflines)
    elif spec.kind == "line":
        _line(spec, data[spec.experiment], path, reflines)
    elif spec.kind == "roofline":
        _roofline(spec, data[spec.experiment], data["device"], path, reflines)
    else:
        raise ValueError(f"unknown chart kind {spec.kind!r}; use one of {', '.join(KINDS)}")


def _bar(spec: ChartSpec, ds: Dataset, path: Path, reflines: list[tuple[float, str]]) -> None:
    rows = ds.select(spec.where)
    xs = _categories(rows, spec.x, spec.order)
    hues = sorted({r.get(spec.hue) for r in rows}, key=_key) if spec.hue else [None]
    fig = style.figure(7.2, 3.9)
    ax = fig.subplots()
    width = 0.8 / len(hues)
    top = 0.0
    for h, hue in enumerate(hues):
        pos, heights = [], []
        for i, x in enumerate(xs):
            match = [r for r in rows if r.get(spec.x) == x
                     and (not spec.hue or r.get(spec.hue) == hue)]
            if match and isinstance(match[0].get(spec.y), (int, float)):
                pos.append(i - 0.4 + width * (h + 0.5))
                heights.append(float(match[0][spec.y]))
        name = f"{label(spec.hue, '', spec.labels)} = {hue}" if spec.hue else spec.label(spec.y, ds)
        bars = ax.bar(pos, heights, width * 0.92, color=style.PALETTE[h % len(style.PALETTE)],
                      label=name)
        if len(hues) == 1:
            ax.bar_label(bars, labels=[format_value(v) for v in heights], fontsize=7,
                         padding=2, color=style.INK)
        top = max([top, *heights])
    if spec.overlay:
        ov = [(i, r[spec.overlay]) for i, x in enumerate(xs) for r in rows
              if r.get(spec.x) == x and isinstance(r.get(spec.overlay), (int, float))]
        if ov:
            shift = 0.28 if len(hues) == 1 else 0.0  # beside the bar's centred value label
            ax.plot([i + shift for i, _ in ov], [v for _, v in ov], "D", color=style.INK,
                    markersize=6, label=spec.label(spec.overlay, ds), zorder=5)
            top = max(top, *(v for _, v in ov))
    for value, text in reflines:  # labelled at the left end, clear of the bars' value labels
        ax.axhline(value, color=style.MEASURED, linestyle="--", linewidth=1.2)
        ax.annotate(text, (-0.5, value), ha="left", va="bottom", fontsize=8,
                    color=style.MEASURED,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none"})
        top = max(top, value)
    long = sum(len(str(x)) for x in xs) > 48
    ax.set_xticks(range(len(xs)), [str(x) for x in xs], rotation=25 if long else 0,
                  ha="right" if long else "center")
    ax.set_xlabel(label(spec.x, "", spec.labels))
    ax.set_ylabel(spec.label(spec.y, ds))
    if spec.logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    if spec.hue or spec.overlay:
        ax.legend(fontsize=8, frameon=False)
    if spec.title:
        ax.set_title(spec.title, fontsize=10)
    style.tidy(ax)
    style.save(fig, path)


def _line(spec: ChartSpec, ds: Dataset, path: Path, reflines: list[tuple[float, str]]) -> None:
    rows = ds.select(spec.where)
    series = _categories(rows, spec.hue or "kernel", spec.order)
    fig = style.figure(7.2, 4.6 if len(series) > 6 else 4.0)
    ax = fig.subplots()
    colour = 0
    for name in series:
        pts = sorted((r[spec.x], r[spec.y]) for r in rows if r.get(spec.hue or "kernel") == name
                     and isinstance(r.get(spec.x), (int, float))
                     and isinstance(r.get(spec.y), (int, float)))
        if pts:
            look = style.series_style(name, colour)
            colour += str(name) not in style.REFERENCE_SERIES
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=str(name), markersize=4,
                    **look)
    for value, text in reflines:
        ax.axhline(value, color=style.MEASURED, linestyle="--", linewidth=1.2, label=text)
    xs = sorted({r[spec.x] for r in rows if isinstance(r.get(spec.x), (int, float))})
    if all(x > 0 and int(x) == x and int(x) & (int(x) - 1) == 0 for x in xs):
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
    else:  # sizes that are not powers of two: a linear axis, close ticks labelled once
        shown = [x for i, x in enumerate(xs)
                 if i == 0 or x - xs[i - 1] > 0.06 * (xs[-1] - xs[0])]
        ax.set_xticks(shown, [str(x) for x in shown])
    ax.minorticks_off()
    if spec.logy:
        ax.set_yscale("log")
    ax.set_xlabel(spec.label(spec.x, ds))
    ax.set_ylabel(spec.label(spec.y, ds))
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    if spec.title:
        ax.set_title(spec.title, fontsize=10)
    style.tidy(ax)
    style.save(fig, path)


def _roofline(spec: ChartSpec, ds: Dataset, device: Dataset, path: Path,
              roofs: list[tuple[float, str]] = ()) -> None:  # type: ignore[assignment]
    """Measured and driver roofs; each of ``roofs`` (GB/s, label) is one more bandwidth
    roof under the same compute peak (e.g. the on-chip data path)."""
    dev = device.rows[0]
    rows = ds.select(spec.where)
    fig = style.figure(7.2, 4.6)
    ax = fig.subplots()
    xs = np.logspace(-2, 4, 400)
    # one FP32 peak: from the SMs' lanes and clock (the FMA probe for older data files)
    theo_fl = dev.get("fp32_theoretical_gflops")
    peak = theo_fl if _num(theo_fl) else dev.get("fp32_peak_gflops")
    copy = dev.get("copy_gbps")
    if _num(peak) and _num(copy):
        ax.plot(xs, np.minimum(peak, copy * xs), "-", color=style.MEASURED, linewidth=1.8,
                label="measured copy bandwidth, FP32 peak" if _num(theo_fl)
                else "measured: copy bandwidth, FMA peak")
    for i, (bw, text) in enumerate(roofs):
        if _num(peak):
            ax.plot(xs, np.minimum(peak, bw * xs), "-.", linewidth=1.2, label=text,
                    color=style.PALETTE[(i + 3) % len(style.PALETTE)])
    theo_bw = dev.get("peak_bw_gbps")
    if _num(theo_bw) and _num(peak):
        ax.plot(xs, np.minimum(peak, theo_bw * xs), "--", color=style.QUERIED,
                linewidth=1.2, label="bandwidth from clocks (driver)")
    ideal = next((r.get("intensity") for r in rows if isinstance(r.get("intensity"), (int, float))),
                 None)
    if ideal:
        ax.axvline(ideal, color=style.MUTED, linestyle=":", linewidth=1)
        ax.text(ideal, 0.97, f"matmul, every operand read once: {format_value(ideal)} FLOP/B",
                transform=ax.get_xaxis_transform(), rotation=90, fontsize=7, color=style.MUTED,
                ha="right", va="top")
    kernels = _categories(rows, "kernel", tuple(spec.points) or spec.order)
    for i, kernel in enumerate(kernels):
        where = spec.points.get(str(kernel), "ideal" if not spec.points else "")
        row = next((r for r in rows if r.get("kernel") == kernel), None)
        if not where or row is None or not isinstance(row.get("gflops"), (int, float)):
            continue
        x = float(ideal) if where == "ideal" and ideal else float(where)
        colour = style.PALETTE[i % len(style.PALETTE)]
        ax.plot([x], [row["gflops"]], "o", color=colour, markersize=7, zorder=5)
        left = i % 2 == 1
        ax.annotate(f"{kernel}: {format_value(row['gflops'])}", (x, row["gflops"]),
                    textcoords="offset points", xytext=(-7 if left else 7, 7 if left else -10),
                    ha="right" if left else "left", fontsize=7.5, color=colour,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.85})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0], xs[-1])
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved from global memory)")
    ax.set_ylabel("GFLOP/s")
    # below the roofs, right of the kernels: nothing is drawn there
    ax.legend(fontsize=8, frameon=True, facecolor="white", edgecolor="none", framealpha=0.9,
              loc="lower right")
    if spec.title:
        ax.set_title(spec.title, fontsize=10)
    style.tidy(ax)
    style.save(fig, path)
