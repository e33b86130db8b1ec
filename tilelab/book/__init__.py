"""The book's build-time code: a Sphinx extension that renders measured data and diagrams.

Register it in ``_config.yml`` (``sphinx: extra_extensions: [tilelab.book]``). It adds
``measured-table``, ``measured-figure``, ``measured-text``, ``diagram``, ``provenance``,
``tiling-trace`` and ``reuse-table`` directives, the ``measured``, ``compare`` and
``exercise`` roles, and renders math to MathML at build time.
"""

from __future__ import annotations

from typing import Any


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point (imports Sphinx only when a build loads the extension)."""
    from tilelab.book.ext import setup as _setup

    return _setup(app)
