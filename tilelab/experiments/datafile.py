"""The data-file format of ``book/data/<experiment>.json``: one writer, one reader.

A data file is an object with ``experiment``, ``title``, ``description``,
``provenance`` (where the numbers came from), ``columns`` (name -> unit) and ``rows``
(a list of objects). The experiments write it here; the book reads it here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelab.experiments import provenance


class DataFileError(ValueError):
    """A data file that is not in the format above; the message names the file."""


@dataclass(frozen=True)
class DataFile:
    """The fields of one data file, as read."""

    experiment: str
    title: str
    description: str
    provenance: dict[str, Any]
    columns: dict[str, str]
    rows: tuple[dict[str, Any], ...]


def write(
    out: Path,
    experiment: str,
    title: str,
    description: str,
    columns: dict[str, str],
    rows: list[dict[str, Any]],
    gpu: bool = True,
    method: str = "",
    kernels: Mapping[str, str] | None = None,
    describes: str | None = None,
) -> Path:
    """Write ``out/<experiment>.json`` with the provenance of this machine and command
    (``kernels``: the source of every kernel the rows measured, by key, whose digests the
    provenance records so that a test can tell when the code no longer matches;
    ``describes``: for a file computed without a GPU from another's measurements, the GPU
    those measurements were made on)."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "experiment": experiment,
        "title": title,
        "description": description,
        "provenance": {**provenance.collect(method, gpu=gpu, kernels=kernels),
                       **({"describes_gpu": describes} if describes else {})},
        "columns": columns,
        "rows": rows,
    }
    path = out / f"{experiment}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def read(path: Path) -> DataFile:
    """The data file at ``path``; a missing title or description defaults to the name."""
    experiment = path.stem
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFileError(f"{path}: not a readable JSON data file ({exc})") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        raise DataFileError(f"{path}: expected an object with a 'rows' list")
    rows = raw["rows"]
    if not all(isinstance(r, dict) for r in rows):
        raise DataFileError(f"{path}: every row must be an object")
    return DataFile(
        experiment=str(raw.get("experiment", experiment)),
        title=str(raw.get("title", experiment)),
        description=str(raw.get("description", "")),
        provenance=dict(raw.get("provenance") or {}),
        columns={str(k): str(v or "") for k, v in (raw.get("columns") or {}).items()},
        rows=tuple(rows),
    )


def print_setting(argv: list[str], module: str,
                  setting: Callable[[Sequence[dict[str, Any]]], str]) -> int:
    """An experiment's ``python -m MODULE setting DATA_FILE``: print the setting the data
    file's rows support (a usage line, and 2, for anything else)."""
    if argv[:1] == ["setting"] and len(argv) == 2:
        print(setting(read(Path(argv[1])).rows))
        return 0
    print(f"usage: python -m {module} setting DATA_FILE", file=sys.stderr)
    return 2
