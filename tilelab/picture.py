"""A picture of what a kernel's threads touched, drawn from the emulator's trace.

The grader's analysis run records, for one block of the launch, every element of each
buffer its threads read or wrote and the barrier phase in which they did, and, for each
shared-memory access, which word each lane of its first warp-wide request touched
(:attr:`tilelab.grading.verdict.Verdict.touch`). Here that becomes a PNG: one row per
buffer and direction, the learner's kernel on the left, the course's reference on the
right, one colour per phase (tiled kernels load a tile pair per phase); and, for the
shared-memory access with the most conflicts, the 32 lanes of a warp over the 32 banks.
Nothing here runs a kernel, the learner's or the reference's: both traces come back in
the verdict (:attr:`~tilelab.grading.verdict.Verdict.reference_touch`), and the release's
pictures are drawn from a trace it is given. Matplotlib is
imported only once a picture is drawn: a notebook imports this module at its first cell,
and matplotlib alone took a second of that.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tilelab.catalog import exercises
from tilelab.catalog.exercises import Exercise

WIDTH_IN = 9.0  # 990 px at DPI: readable at 1280 px without scaling
DPI = 110
ROW = 64  # elements per row when a 1-D buffer is drawn
PHASE_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#17becf"]
UNTOUCHED = "#eeeeee"


def buffer_shapes(ex: Exercise) -> dict[str, tuple[int, int]]:
    """Each buffer's shape at the analysis shape, as drawn (1-D buffers wrapped in rows)."""
    shape = ex.problem.analysis_shape
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(0))
    shapes = {k: v.shape for k, v in inputs.items()}
    shapes[ex.problem.output] = ex.problem.output_shape(shape)
    out = {}
    for name, s in shapes.items():
        n = int(np.prod(s))
        out[name] = (s[0], s[1]) if len(s) == 2 and s[0] > 1 else (-(-n // ROW), min(n, ROW))
    return out


def phase_colours(n: int) -> list[Any]:
    """One colour per phase: distinct ones for a few, a gradient for many."""
    if n <= len(PHASE_COLOURS):
        return PHASE_COLOURS[:n]
    from matplotlib import colormaps

    return [colormaps["viridis"](i / (n - 1)) for i in range(n)]


def phase_grid(entry: dict[str, Any] | None, shape: tuple[int, int],
               phases: list[int]) -> np.ndarray:
    """Per element: -1 untouched, else the index (in ``phases``) of the first phase that
    touched it."""
    flat = np.full(shape[0] * shape[1], -1, dtype=int)
    for start, length, mask in (entry or {}).get("runs", []):
        first = (int(mask) & -int(mask)).bit_length() - 1
        flat[start : min(start + length, flat.size)] = phases.index(first)
    return flat.reshape(shape)


def _phases(*traces: dict[str, Any]) -> list[int]:
    used = set()
    for t in traces:
        for g in t.get("global", []):
            for _s, _n, mask in g["runs"]:
                used.add((int(mask) & -int(mask)).bit_length() - 1)
    return sorted(used)


def _entries(trace: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(g["param"], g["kind"]): g for g in trace.get("global", [])}


def _worst_warp(trace: dict[str, Any]) -> dict[str, Any] | None:
    """The shared-memory request whose lanes fall most often into one bank."""
    best, worst = None, 0
    for w in trace.get("warps", []):
        words = [x for x in w["words"] if x >= 0]
        per_bank = np.bincount([x % 32 for x in set(words)], minlength=32) if words else [0]
        if max(per_bank) > worst:
            best, worst = w, int(max(per_bank))
    return best


def _draw_banks(ax: Any, warp: dict[str, Any] | None, who: str) -> None:
    if warp is None:
        ax.set_axis_off()
        ax.set_title(f"{who}: no shared-memory access", fontsize=10)
        return
    lanes = [(lane, w % 32) for lane, w in enumerate(warp["words"]) if w >= 0]
    banks = np.bincount([b for _l, b in lanes], minlength=32)
    ax.scatter([lane for lane, _b in lanes], [b for _l, b in lanes], s=18, c="#d62728")
    ax.set_xlim(-1, 32)
    ax.set_ylim(-1, 32)
    ax.set_xlabel("lane of the warp", fontsize=9)
    ax.set_ylabel("bank", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.set_title(f"{who}: {warp['array']} {warp['kind']}, line {warp['line']}: "
                 f"up to {int(banks.max())} lane{'s' if banks.max() != 1 else ''} in one bank",
                 fontsize=10)


def draw(ex: Exercise, mine: dict[str, Any] | None, reference: dict[str, Any],
         metadata: dict[str, str] | None = None) -> bytes:
    """The PNG: what one block of each kernel read and wrote, phase by phase, and the
    lanes of a warp over the banks for the shared access with the most conflicts.
    ``mine`` None: the reference alone (the picture a step's page shows)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    columns = [("reference", reference)] if mine is None else [("your kernel", mine),
                                                                ("reference", reference)]
    mine = reference if mine is None else mine
    shapes = buffer_shapes(ex)
    order = [(p, "read") for p in ex.problem.arg_order if p in shapes and p != ex.problem.output]
    order.append((ex.problem.output, "write"))
    extra = sorted(set(_entries(mine)) - set(order))  # e.g. a read of the output
    order += [k for k in extra if k[0] in shapes]
    banked = bool(mine.get("warps") or reference.get("warps"))
    rows = len(order) + banked
    heights = [max(0.9, min(2.6, 6.0 * shapes[p][0] / shapes[p][1])) for p, _k in order]
    heights += [2.4] if banked else []
    width = WIDTH_IN if len(columns) == 2 else WIDTH_IN * 0.6
    fig = Figure(figsize=(width, sum(heights) * (1 if len(columns) == 2 else 0.75) + 1.1))
    axes = fig.subplots(rows, len(columns), gridspec_kw={"height_ratios": heights},
                        squeeze=False)
    phases = _phases(mine, reference) or [0]
    colours = phase_colours(len(phases))
    cmap = ListedColormap([UNTOUCHED, *colours])
    for col, (who, trace) in enumerate(columns):
        entries = _entries(trace)
        for r, (param, kind) in enumerate(order):
            ax = axes[r][col]
            grid = phase_grid(entries.get((param, kind)), shapes[param], phases)
            ax.imshow(grid + 1, cmap=cmap, vmin=0, vmax=len(phases), interpolation="nearest",
                      aspect="auto")
            ax.set_xticks([])
            ax.set_yticks([])
            n = int((grid >= 0).sum())
            ax.set_title(f"{who}: {param} {kind} ({n} element{'' if n == 1 else 's'})",
                         fontsize=10)
        if banked:
            _draw_banks(axes[rows - 1][col], _worst_warp(trace), who)
    block = tuple(mine.get("block") or reference.get("block") or (0, 0, 0))
    shape = ", ".join(f"{d}={s}" for d, s in zip(ex.problem.dims, ex.problem.analysis_shape,
                                                  strict=True))
    # a phase is named by the barriers before it (phase 1: none yet), as the title says
    labels = [f"phase {p + 1}" for p in phases] if len(phases) > 1 else ["touched"]
    handles = [Rectangle((0, 0), 1, 1, color=colours[i]) for i in range(len(labels))]
    ncol = min(len(labels), 8 if len(columns) == 2 else 5)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle(f"{ex.id}: what block {block} read and wrote\nat {shape} (a phase ends "
                 "at each __syncthreads)", fontsize=10)
    legend_rows = -(-len(labels) // ncol)
    fig.tight_layout(rect=(0, min(0.3, 0.5 * legend_rows / fig.get_figheight()), 1, 0.94))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=metadata)
    return buf.getvalue()


def differs(mine: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether the kernel touched other elements than the reference (in any phase)."""
    def sets(t: dict[str, Any]) -> dict[tuple[str, str], set[int]]:
        return {k: {i for s, n, _m in g["runs"] for i in range(s, s + n)}
                for k, g in _entries(t).items()}
    return sets(mine) != sets(reference)


# ---------------------------------------------------------------- the steps' pages

PICTURES = "pictures"  # beside each source notebook: one reference picture per step
SOURCE_KEY = "tilelab-reference-sha256"  # the PNG's text chunk: the reference it shows


def reference_digest(ex: Exercise) -> str:
    """What a step's picture depends on: its reference kernel and the analysis shape."""
    text = f"{ex.reference.source()}\n{ex.problem.analysis_shape}\n{ex.launch}"
    return hashlib.sha256(text.encode()).hexdigest()


def picture_path(folder: Path, ex: Exercise) -> Path:
    return folder / PICTURES / f"{ex.id}.png"


def is_current(path: Path, ex: Exercise) -> bool:
    """Whether ``path`` is the picture of ``ex``'s current reference kernel."""
    try:
        with Image.open(path) as img:
            return img.info.get(SOURCE_KEY) == reference_digest(ex)
    except (OSError, ValueError):
        return False


def write_reference_pictures(folder: Path, ids: tuple[str, ...],
                             trace: Callable[[Exercise], dict[str, Any]]) -> list[Path]:
    """Draw, into ``folder/pictures``, the reference picture of each step whose picture is
    missing or shows another reference, from the reference's ``trace``
    (:func:`tilelab.grading.emu_steps.reference_trace`); return those written."""
    written = []
    for ex_id in ids:
        ex = exercises.get(ex_id)
        path = picture_path(folder, ex)
        if is_current(path, ex):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(draw(ex, None, trace(ex), {SOURCE_KEY: reference_digest(ex)}))
        written.append(path)
    return written
