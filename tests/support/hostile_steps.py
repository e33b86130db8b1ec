"""Notebooks that are hostile to nbgrader's own steps (not to the grader): what a display id,
markdown or a cell count does to autograde's client and the HTML export. Shared by
tests/test_nbgrader_sandbox.py, tests/test_corpus.py and benchmarks/hostile_steps.py."""

from __future__ import annotations

from typing import Any

#: 96 tiny outputs under one display id, then one 8 MiB update that rewrites them all
DISPLAY_BOMB = (
    "from IPython.display import display, update_display\n"
    "for i in range(96):\n"
    "    display({'text/plain': 'x'}, raw=True, display_id='d')\n"
    "update_display({'text/plain': 'y' * (8 << 20)}, raw=True, display_id='d')\n"
)


def code_cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": source}


def unmatched_begins(kilobytes: int) -> dict[str, Any]:
    """A markdown cell of ``kilobytes`` KB of ``\\begin{x}`` none of which ends (markdown's
    LaTeX rule takes time that grows with the square of their count)."""
    return {"cell_type": "markdown", "metadata": {},
            "source": "\\begin{x}" * (kilobytes * 1000 // 9)}


def empty_cells(count: int = 60_000) -> list[dict[str, Any]]:
    return [code_cell("") for _ in range(count)]
