"""Math rendered to MathML when the book builds, so pages need no MathJax and no network.

Sphinx's default renderer loads MathJax from a CDN, which an offline reader (or a closed
test network) never gets. latex2mathml is pure Python; every current browser draws MathML.
"""

from __future__ import annotations

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number
from sphinx.writers.html5 import HTML5Translator

NAME = "mathml"
logger = logging.getLogger("tilelab.book")


def to_mathml(latex: str, display: bool) -> str:
    """LaTeX -> a ``<math>`` element."""
    return convert(latex.strip(), display="block" if display else "inline")


def _convert(self: HTML5Translator, node: nodes.Element, latex: str, display: bool) -> str:
    try:
        return to_mathml(latex, display)
    except Exception as exc:  # latex2mathml raises many kinds on bad input
        logger.warning(f"cannot render math {latex!r}: {exc}", location=node)
        return self.encode(latex)


def visit_math(self: HTML5Translator, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(_convert(self, node, node.astext(), False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self: HTML5Translator, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node.get("number"):
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    parts = [p for p in node.astext().split("\n\n") if p.strip()]
    for part in parts:
        self.body.append(_convert(self, node, part, True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def _choose(app: Sphinx, config: Config) -> None:
    config.html_math_renderer = NAME


def setup(app: Sphinx) -> None:
    app.add_html_math_renderer(NAME, (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", _choose)
