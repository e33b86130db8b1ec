"""Measured data files (``book/data/<experiment>.json``): loading, row filters, formatting.

Everything here is plain Python, so the directives, the roles and the tests share it.
A data file that does not exist is not an error: callers get ``None`` and render a
"not measured yet" note instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelab.experiments import datafile, needs_gpu

#: Units whose values are times: lower is better.
TIME_UNITS = frozenset({"s", "ms", "us", "µs", "ns"})


#: How columns are named in headers and on axes when a page does not say ("" = unit only).
DEFAULT_LABELS = {
    "median_ms": "median time",
    "gflops": "",
    "gbps": "",
    "n": "N",
    "speedup_vs_naive": "speedup over naive",
    "speedup_vs_shared": "speedup over shared",
}


class DataError(ValueError):
    """A data file, a filter or a value reference is malformed."""


class Missing(LookupError):
    """The data a page asks for is not there (yet): no file, no such row or column."""

    def __init__(self, experiment: str, detail: str = "") -> None:
        super().__init__(detail or f"no data file for {experiment!r}")
        self.experiment = experiment
        self.detail = detail


@dataclass(frozen=True)
class Dataset:
    """One data file as the bench command wrote it (read by :mod:`tilelab.experiments.datafile`)."""

    experiment: str
    path: Path
    title: str
    description: str
    provenance: dict[str, Any]
    columns: dict[str, str]
    rows: tuple[dict[str, Any], ...]

    def unit(self, column: str) -> str:
        """The unit of ``column`` ("" when it has none)."""
        return self.columns.get(column, "") or ""

    def has_column(self, column: str) -> bool:
        return column in self.columns or any(column in r for r in self.rows)

    def select(self, filters: dict[str, list[str]]) -> list[dict[str, Any]]:
        """The rows matching every filter (a filter lists the values it accepts)."""
        for key in filters:
            if not self.has_column(key):
                raise Missing(self.experiment, f"{self.experiment} has no column {key!r}")
        return [r for r in self.rows if all(_matches(r.get(k), v) for k, v in filters.items())]

    def one(self, filters: dict[str, list[str]]) -> dict[str, Any]:
        """The single row matching ``filters``."""
        rows = self.select(filters)
        if len(rows) != 1:
            what = ", ".join(f"{k}={'|'.join(v)}" for k, v in filters.items()) or "(no filter)"
            raise Missing(self.experiment,
                          f"{self.experiment}[{what}] matches {len(rows)} rows, not 1")
        return rows[0]


def data_path(data_dir: Path, experiment: str) -> Path:
    """Where the data file of ``experiment`` lives."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", experiment):
        raise DataError(f"{experiment!r} is not an experiment name")
    return Path(data_dir) / f"{experiment}.json"


def load(data_dir: Path, experiment: str) -> Dataset | None:
    """The data file of ``experiment``, or None when it has not been written yet."""
    path = data_path(data_dir, experiment)
    if not path.is_file():
        return None
    try:
        doc = datafile.read(path)
    except datafile.DataFileError as exc:
        raise DataError(str(exc)) from exc
    return Dataset(path=path, **vars(doc))


def _matches(value: Any, accepted: list[str]) -> bool:
    return any(_equal(value, a) for a in accepted)


def _equal(value: Any, text: str) -> bool:
    if text == "*":
        return value is not None
    if value is None:
        return text in ("", "null", "none")
    if isinstance(value, bool):
        return str(value).lower() == text.lower()
    if isinstance(value, (int, float)):
        try:
            return float(value) == float(text)
        except ValueError:
            return False
    return str(value) == text


def parse_filters(text: str | None) -> dict[str, list[str]]:
    """``"kernel=naive|tiled32, n=4096"`` -> ``{"kernel": ["naive", "tiled32"], "n": ["4096"]}``.

    ``column=*`` keeps the rows that have a value in ``column``.
    """
    filters: dict[str, list[str]] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise DataError(f"filter {part!r} is not of the form column=value")
        filters[key] = [v.strip() for v in value.split("|")]
    return filters


def parse_list(text: str | None) -> list[str]:
    """``"a, b ,c"`` -> ``["a", "b", "c"]``."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def parse_mapping(text: str | None) -> dict[str, str]:
    """``"gflops=,.0f; n=d"`` -> ``{"gflops": ",.0f", "n": "d"}`` (``;`` separates)."""
    out: dict[str, str] = {}
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise DataError(f"{part!r} is not of the form key=value")
        out[key.strip()] = value.strip()
    return out


def label(column: str, unit: str, labels: dict[str, str] | None = None) -> str:
    """A column's header or axis label: ``name (unit)``, or the unit alone."""
    labels = labels or {}
    if column in labels:
        name = labels[column]
    else:
        name = DEFAULT_LABELS.get(column, column.replace("_", " "))
    if not name:
        return unit or column
    return f"{name} ({unit})" if unit and unit not in name else name


def format_bytes(value: float) -> str:
    """``49152`` -> ``"48 KiB"``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            q = value / size
            return f"{int(q) if q == int(q) else format_value(q)} {unit}"
    return f"{value:g} B"


def format_value(value: Any, spec: str | None = None) -> str:
    """A value as the page shows it: ``spec`` is a Python format spec (or ``bytes``, for
    KiB/MiB/GiB), or a sensible default."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if spec == "bytes":
        return format_bytes(value)
    if spec:
        try:
            return format(value, spec)
        except (ValueError, TypeError) as exc:
            raise DataError(f"format {spec!r} does not apply to {value!r}") from exc
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    mag = abs(value)
    if mag >= 1000:
        return f"{value:,.0f}"
    if mag >= 100:
        return f"{value:.0f}"
    if mag >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def missing_hint(experiment: str) -> tuple[str, str, str]:
    """What to say about a missing data file: (not-yet phrase, command, where it runs)."""
    cmd = f"tilelab bench {experiment} --out book/data"
    if not needs_gpu(experiment):
        return "not computed yet", cmd, "(no GPU needed)"
    return "not measured yet", cmd, "on a GPU"
