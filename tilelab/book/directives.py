"""Directives: measured tables, figures and text; diagrams; the worked tiling example."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from tilelab.book import charts, context, diagrams, expr, images, style, tables, worked
from tilelab.book.data import (
    DataError,
    Dataset,
    Missing,
    data_path,
    format_value,
    parse_filters,
    parse_list,
    parse_mapping,
)
from tilelab.book.listing import KernelListing
from tilelab.catalog import road

Options = dict[str, Callable[[str], Any]]


class _BookDirective(SphinxDirective):
    """Shared helpers: load data, report problems, build captioned figures."""

    def fail(self, exc: Exception, what: str) -> list[nodes.Node]:
        context.report(self.env, exc, self.get_location())
        if isinstance(exc, Missing):
            return [context.missing_block(exc, what)]
        return [nodes.paragraph("", f"[{what}: {exc}]", classes=["tl-error"])]

    def need(self, experiment: str) -> Dataset:
        ds = context.dataset(self.env, experiment)
        if ds is None:
            raise Missing(experiment)
        return ds

    def caption_nodes(self) -> list[nodes.Node]:
        if not self.content:
            return []
        holder = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, holder)
        first = holder.children[0] if holder.children else None
        if isinstance(first, nodes.paragraph):
            caption = nodes.caption(first.rawsource, "", *first.children)
            return [caption, *(nodes.legend("", *holder.children[1:]) if
                               len(holder.children) > 1 else [])]
        return []

    def figure(self, name: str, draw: Callable[[Path], None], alt: str) -> nodes.figure:
        uri = images.ensure_image(Path(self.env.srcdir), name, draw)
        fig = nodes.figure(classes=["tl-figure"])
        img = nodes.image(uri=uri, alt=alt or name)
        if "width" in self.options:
            img["width"] = self.options["width"]
        else:  # shown at its layout size: the PNG has style.SCALE x the pixels
            png = Path(self.env.srcdir) / uri.lstrip("/")
            img["width"] = f"{images.png_width(png) // style.SCALE}px"
        fig += img
        fig.extend(self.caption_nodes())
        self.add_name(fig)
        return fig


class MeasuredTable(_BookDirective):
    """A table of rows from one data file: ``{measured-table} matmul``."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[Options] = {
        "where": directives.unchanged,
        "columns": directives.unchanged,
        "format": directives.unchanged,
        "labels": directives.unchanged,
        "order": directives.unchanged,
        "transpose": directives.flag,
        "name": directives.unchanged,
        "empty": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        experiment = self.arguments[0]
        try:
            ds = self.need(experiment)
            where = parse_filters(self.options.get("where"))
            if "empty" in self.options and not ds.select(where):  # none is the finding
                return [nodes.paragraph("", self.options["empty"], classes=["tl-empty"])]
            order_by, order = tables.parse_order(self.options.get("order"))
            spec = tables.TableSpec(
                where=parse_filters(self.options.get("where")),
                columns=tuple(parse_list(self.options.get("columns"))),
                formats=parse_mapping(self.options.get("format")),
                labels=parse_mapping(self.options.get("labels")),
                order_by=order_by,
                order=order,
            )
            heads, cells, numeric = tables.build(ds, spec)
            if "transpose" in self.options:
                heads, cells, numeric = tables.transpose(heads, cells, numeric)
        except (Missing, DataError) as exc:
            return self.fail(exc, f"Table of {experiment}")
        table = build_table(heads, cells, numeric)
        caption = self.caption_nodes()
        if caption and isinstance(caption[0], nodes.caption):
            table.insert(0, nodes.title("", "", *caption[0].children))
        self.add_name(table)
        return [table]


def build_table(heads: list[str], cells: list[list[str]], numeric: list[bool],
                classes: tuple[str, ...] = ()) -> nodes.table:
    table = nodes.table(classes=["tl-table", *classes])
    group = nodes.tgroup(cols=len(heads))
    table += group
    for _ in heads:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    head += nodes.row("", *(nodes.entry("", nodes.paragraph("", h)) for h in heads))
    group += head
    body = nodes.tbody()
    for row in cells:
        body += nodes.row("", *(nodes.entry("", nodes.paragraph("", c),
                                            classes=["tl-num"] if num else [])
                                for c, num in zip(row, numeric, strict=True)))
    group += body
    return table


class MeasuredFigure(_BookDirective):
    """A chart drawn from data at build time: ``{measured-figure} matmul`` + ``:kind:``."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[Options] = {
        "kind": lambda v: directives.choice(v, charts.KINDS),
        "x": directives.unchanged,
        "y": directives.unchanged,
        "hue": directives.unchanged,
        "where": directives.unchanged,
        "order": directives.unchanged,
        "overlay": directives.unchanged,
        "labels": directives.unchanged,
        "logy": directives.flag,
        "title": directives.unchanged,
        "points": directives.unchanged,
        "refline": directives.unchanged,
        "alt": directives.unchanged,
        "name": directives.unchanged,
        "width": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        experiment = self.arguments[0]
        kind = self.options.get("kind", "bar")
        try:
            spec = charts.ChartSpec(
                kind=kind, experiment=experiment,
                x=self.options.get("x", "kernel"), y=self.options.get("y", ""),
                hue=self.options.get("hue", ""),
                where=parse_filters(self.options.get("where")),
                order=tuple(parse_list(self.options.get("order"))),
                overlay=self.options.get("overlay", ""),
                labels=parse_mapping(self.options.get("labels")),
                logy="logy" in self.options, title=self.options.get("title", ""),
                points=parse_mapping(self.options.get("points")),
            )
            if kind != "roofline" and not spec.y:
                raise DataError(f"measured-figure {experiment}: the {kind} chart needs :y:")
            data = {experiment: self.need(experiment)}
            if kind == "roofline":
                data["device"] = self.need("device")
            reflines = []
            for part in (self.options.get("refline") or "").split(";"):
                if part.strip():
                    # "expression = label": the expression may hold filters (a=b)
                    text, _, label = part.rpartition(" = ") if " = " in part else (part, "", "")
                    e = expr.parse(text)
                    reflines.append((float(e.evaluate(context.loader(self.env))[0]),
                                     label.strip() or text.strip()))
                    for name in e.experiments:
                        data.setdefault(name, self.need(name))
            for column in filter(None, (spec.y, spec.x, spec.hue, spec.overlay)):
                if kind != "roofline" and not data[experiment].has_column(column):
                    raise Missing(experiment, f"{experiment} has no column {column!r}")
            if not data[experiment].select(spec.where):
                raise Missing(experiment, f"no row of {experiment} matches the filter")
        except (Missing, DataError) as exc:
            return self.fail(exc, f"Figure of {experiment}")
        files = [data_path(context.data_dir(self.env), e) for e in sorted(data)]
        key = images.image_key(kind, {**self.options, "experiment": experiment}, files)
        return [self.figure(f"{kind}-{experiment}-{key}.png",
                            lambda p: charts.draw(spec, data, p, reflines),
                            self.options.get("alt", f"{kind} chart of {experiment}"))]


class MeasuredText(_BookDirective):
    """A text field of a data file (a SASS excerpt, a race report) as a literal block."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec: ClassVar[Options] = {
        "language": directives.unchanged,
        "name": directives.unchanged,
        "from": directives.unchanged,
        "max-lines": directives.positive_int,
        "caption": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        text = self.arguments[0]
        try:
            parsed = expr.parse(text)
            if len(parsed.refs) != 1:
                raise DataError(f"measured-text {text!r}: name exactly one value")
            value, _ = parsed.refs[0].resolve(context.loader(self.env))
        except (Missing, DataError) as exc:
            return self.fail(exc, "Excerpt")
        body = excerpt(str(value), self.options.get("from"), self.options.get("max-lines"))
        block = nodes.literal_block(body, body, classes=["tl-excerpt"])
        block["language"] = self.options.get("language", "text")
        if "caption" not in self.options:
            self.add_name(block)
            return [block]
        title = self.options["caption"]
        wrapper = nodes.container("", classes=["literal-block-wrapper"], literal_block=True)
        wrapper += nodes.caption(title, "", *self.parse_inline(title, lineno=self.lineno)[0])
        wrapper += block
        self.add_name(wrapper)
        return [wrapper]


class Diagram(_BookDirective):
    """A diagram drawn by :mod:`tilelab.book.diagrams`: ``{diagram} banks``."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[Options] = {"alt": directives.unchanged, "name": directives.unchanged,
                                      "width": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        kind = self.arguments[0]
        if kind not in diagrams.DIAGRAMS:
            return self.fail(DataError(f"no diagram {kind!r}; one of "
                                       f"{', '.join(diagrams.DIAGRAMS)}"), "Diagram")
        files: list[Path] = []
        draw: Callable[[Path], None] = diagrams.DIAGRAMS[kind]
        if kind == "hierarchy":
            ds = context.dataset(self.env, "device")
            files = [data_path(context.data_dir(self.env), "device")]
            row = ds.rows[0] if ds is not None and ds.rows else None
            draw = lambda p: diagrams.hierarchy(p, row)  # noqa: E731
        key = images.image_key(f"diagram-{kind}", {}, files)
        return [self.figure(f"diagram-{kind}-{key}.png", draw,
                            self.options.get("alt", f"diagram: {kind}"))]


class TilingTrace(_BookDirective):
    """The worked 4x4 example as a table: each phase's tiles and partial sums."""

    def run(self) -> list[nodes.Node]:
        if not worked.check():
            return self.fail(DataError("the worked example disagrees with NumPy"), "Table")
        heads = ["phase", "As (row / row)", "Bs (row / row)",
                 "acc of threads (0,0) (0,1) (1,0) (1,1)"]
        cells = []
        for ph in worked.phases(0, 0):
            cells.append([f"t = {ph.t}", _mat(ph.a_tile), _mat(ph.b_tile),
                          "  ".join(str(v) for v in ph.partial.ravel())])
        return [build_table(heads, cells, [False] * len(heads))]


class ReuseTable(_BookDirective):
    """Global reads per output tile, naive vs tiled, for ``:sizes: 4x2, 4096x32``."""

    option_spec: ClassVar[Options] = {"sizes": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        heads = ["N", "tile T", "naive: 2·N·T² reads", "tiled: (N/T)·2·T² reads", "factor"]
        cells = []
        try:
            for size in parse_list(self.options.get("sizes", "4x2")):
                n, _, t = size.partition("x")
                r = worked.global_reads(int(n), int(t))
                cells.append([n, t, format_value(r["naive"], ","), format_value(r["tiled"], ","),
                              f"{r['factor']}×"])
        except ValueError as exc:
            return self.fail(DataError(f"reuse-table sizes: {exc}"), "Table")
        return [build_table(heads, cells, [True] * len(heads))]


def excerpt(text: str, start: str | None = None, max_lines: int | None = None) -> str:
    """Lines of ``text`` from the first containing ``start``, at most ``max_lines`` of them."""
    lines = text.rstrip("\n").splitlines()
    if start:
        first = next((i for i, ln in enumerate(lines) if start in ln), 0)
        lines = lines[first:]
    if max_lines and len(lines) > max_lines:
        rest = len(lines) - max_lines
        lines = [*lines[:max_lines], f"... ({rest} more line{'s' if rest > 1 else ''})"]
    return "\n".join(lines)


def _mat(m) -> str:
    return " / ".join(" ".join(str(v) for v in row) for row in m)


class AblationTable(_BookDirective):
    """``{ablation-table} sgemm``: each pair of ``road.ABLATIONS`` (one change to one
    kernel), the speed with the change over the speed without it at each ``:sizes:``; a pair
    the data file lacks reads "not measured yet" in its cell."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[Options] = {"sizes": directives.unchanged,
                                      "only": directives.unchanged,
                                      "name": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        experiment = self.arguments[0]
        try:
            ds = self.need(experiment)
            sizes = [int(n) for n in parse_list(self.options.get("sizes", "4096"))]
        except (Missing, DataError, ValueError) as exc:
            return self.fail(exc if not isinstance(exc, ValueError) else DataError(str(exc)),
                             "Ablations")
        only = set(parse_list(self.options.get("only")))
        speed = {(r.get("kernel"), r.get("n")): r.get("tflops") for r in ds.rows}
        heads = ["change", "without → with", *(f"N={n}" for n in sizes)]
        cells = []
        for ab in road.ABLATIONS:
            if only and ab.key not in only:
                continue
            what = ab.what if ab.one_change else f"{ab.what} (not one change: a comparison)"
            row = [what, f"{ab.without} → {ab.with_}"]
            for n in sizes:
                a, b = speed.get((ab.without, n)), speed.get((ab.with_, n))
                row.append(f"{b / a:.3f}×" if a and b else "not measured yet")
            cells.append(row)
        table = build_table(heads, cells, [False, False, *([True] * len(sizes))])
        caption = self.caption_nodes()
        if caption and isinstance(caption[0], nodes.caption):
            table.insert(0, nodes.title("", "", *caption[0].children))
        self.add_name(table)
        return [table]


class Scoreboard(_BookDirective):
    """``{scoreboard} sgemm``: one line per step of ``road.SCOREBOARD`` and cuBLAS: the
    change, TFLOP/s at each of ``:sizes:`` (step 9: the configuration it chose at that N),
    % of the FP32 peak and of cuBLAS at ``:at:``, and what the step's gain is credited to
    (:func:`road.attribution`). A cell the data file lacks reads "—"."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[Options] = {"sizes": directives.unchanged,
                                      "at": directives.unchanged,
                                      "name": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        experiment = self.arguments[0]
        try:
            ds = self.need(experiment)
            sizes = [int(n) for n in parse_list(self.options.get("sizes", "1024, 4096"))]
            at = int(self.options.get("at", "4096"))
        except (Missing, DataError, ValueError) as exc:
            return self.fail(exc if not isinstance(exc, ValueError) else DataError(str(exc)),
                             "Scoreboard")
        rows = {(r.get("kernel"), r.get("n")): r for r in ds.rows}
        chosen = {r.get("n"): r for r in ds.rows if r.get("chosen") is True}

        def row_of(key: str, n: int) -> dict[str, Any] | None:
            return chosen.get(n) if key == "shapes" and chosen else rows.get((key, n))

        def cell(r: dict[str, Any] | None, column: str, spec: str) -> str:
            v = r.get(column) if r else None
            return format_value(v, spec) if isinstance(v, (int, float)) else "—"

        heads = ["step", "the change", *(f"N={n}" for n in sizes), "% of peak",
                 "% of cuBLAS", "credited to"]
        cells = []
        for i, step in enumerate(road.SCOREBOARD):
            main = row_of(step.key, at)
            number = ("ch. 2", "ch. 3")[i] if i < 2 else f"step {i - 1}"
            cells.append([f"{number}: {step.key}", step.change,
                          *(cell(row_of(step.key, n), "tflops", ".1f") for n in sizes),
                          cell(main, "pct_peak", ".0f"), cell(main, "pct_cublas", ".1f"),
                          road.attribution(step)])
        blas = rows.get(("cublas", at))
        cells.append(["cuBLAS", "NVIDIA's library (FP32, TF32 off)",
                      *(cell(rows.get(("cublas", n)), "tflops", ".1f") for n in sizes),
                      cell(blas, "pct_peak", ".0f"), "100", "—"])
        table = build_table(heads, cells, [False, False, *([True] * (len(sizes) + 2)), False],
                            ("tl-scoreboard",))
        caption = self.caption_nodes()
        if caption and isinstance(caption[0], nodes.caption):
            table.insert(0, nodes.title("", "", *caption[0].children))
        self.add_name(table)
        return [table]


DIRECTIVES = {
    "scoreboard": Scoreboard,
    "ablation-table": AblationTable,
    "kernel-listing": KernelListing,
    "measured-table": MeasuredTable,
    "measured-figure": MeasuredFigure,
    "measured-text": MeasuredText,
    "diagram": Diagram,
    "tiling-trace": TilingTrace,
    "reuse-table": ReuseTable,
}
