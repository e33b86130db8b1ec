"""Helpers for the book's tests: build it once per test session, list the TOC's pages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

_BUILDS: dict[tuple[str, tuple[tuple[str, str], ...]], Build] = {}


@dataclass(frozen=True)
class Build:
    """The outcome of one ``jupyter-book build``."""

    returncode: int
    seconds: float
    output: str
    html: Path

    @property
    def warnings(self) -> list[str]:
        return [ln for ln in self.output.splitlines() if "WARNING" in ln or "ERROR" in ln]


def jupyter_book() -> list[str]:
    """The ``jupyter-book`` command of this interpreter's environment."""
    sibling = Path(sys.executable).with_name("jupyter-book")
    if sibling.exists():
        return [str(sibling)]
    found = shutil.which("jupyter-book")
    if found:
        return [found]
    return [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


def build_book(repo: Path, out: Path, env: dict[str, str] | None = None,
               config: Path | None = None) -> Build:
    """``jupyter-book build <repo> --path-output <out> -W -n --keep-going`` (with
    ``--config <config>`` when given), once per (output folder, environment) in a process."""
    key = (str(out), tuple(sorted((env or {}).items())))
    if key not in _BUILDS:
        cmd = [*jupyter_book(), "build", str(repo), "--path-output", str(out),
               "-W", "-n", "--keep-going", *(["--config", str(config)] if config else [])]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=repo, env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=600)
        _BUILDS[key] = Build(proc.returncode, time.monotonic() - start,
                             proc.stdout + proc.stderr, Path(out) / "_build" / "html")
    return _BUILDS[key]


def toc_docnames(repo: Path) -> list[str]:
    """Every page of ``_toc.yml``, root first, in reading order."""
    toc = yaml.safe_load((Path(repo) / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries or []:
            if "file" in entry:
                names.append(str(entry["file"]))
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key, []))

    for key in ("parts", "chapters", "sections"):
        walk(toc.get(key, []))
    return [str(Path(n).with_suffix("")) if n.endswith((".md", ".ipynb")) else n for n in names]
