"""Table logic of the ``measured-table`` directive, free of Sphinx: rows in, cells out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilelab.book.data import Dataset, Missing, format_value, label


@dataclass(frozen=True)
class TableSpec:
    """Which rows and columns of a data file a table shows, and how."""

    where: dict[str, list[str]] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    formats: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    order_by: str = ""
    order: tuple[str, ...] = ()


def parse_order(text: str | None) -> tuple[str, tuple[str, ...]]:
    """``"kernel: naive, tiled16"`` -> ``("kernel", ("naive", "tiled16"))``."""
    if not text:
        return "", ()
    column, sep, values = text.partition(":")
    if not sep:
        return "", ()
    return column.strip(), tuple(v.strip() for v in values.split(",") if v.strip())


def header(ds: Dataset, column: str, labels: dict[str, str]) -> str:
    """``label (unit)``; the label defaults to the column name."""
    return label(column, ds.unit(column), labels)


def build(ds: Dataset, spec: TableSpec) -> tuple[list[str], list[list[str]], list[bool]]:
    """Headers, formatted cells and which columns are numeric; raises Missing on no rows."""
    rows = ds.select(spec.where)
    if not rows:
        raise Missing(ds.experiment, f"no row of {ds.experiment} matches the filter")
    columns = list(spec.columns) or [c for c in ds.columns if c not in spec.where]
    for column in columns:
        if not ds.has_column(column):
            raise Missing(ds.experiment, f"{ds.experiment} has no column {column!r}")
    if spec.order_by:
        rank = {v: i for i, v in enumerate(spec.order)}
        rows = sorted(rows, key=lambda r: rank.get(str(r.get(spec.order_by)), len(rank)))
    cells = [[format_value(r.get(c), spec.formats.get(c)) for c in columns] for r in rows]
    numeric = [all(_is_number(r.get(c)) for r in rows) for c in columns]
    heads = [label(c, "" if spec.formats.get(c) == "bytes" else ds.unit(c), spec.labels)
             for c in columns]
    return heads, cells, numeric


def transpose(heads: list[str], cells: list[list[str]],
              numeric: list[bool]) -> tuple[list[str], list[list[str]], list[bool]]:
    """One row per column: for a data file with a single row (the device)."""
    if len(cells) != 1:
        return heads, cells, numeric
    return ["property", "value"], [[h, c] for h, c in zip(heads, cells[0], strict=True)], [
        False, False]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
