"""No learner script in what an instructor opens.

nbgrader's formgrader shows each autograded notebook inside the instructor's own Jupyter
server, and the feedback pages are plain HTML files: a ``<script>`` a learner put in a
markdown cell, an ``<img onerror=...>``, an SVG with a script or a
``display(HTML('<script>...'))`` output would run there with the instructor's rights. A
class run therefore puts :class:`LearnerHTML` (nbconvert's own sanitizer, bleach
underneath) at the end of nbgrader's autograde steps, so the autograded notebook already
holds no active content, and again on its feedback steps, where it also escapes the
grader's own comments (they quote compiler errors, and so the learner's code).
"""

from __future__ import annotations

import html
import re
from typing import Any

from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.converters import Autograde, GenerateFeedback
from traitlets import Any as AnyTrait
from traitlets import Bool, List, Unicode

#: What a rendered markdown cell or an HTML output keeps (the rest is stripped): text
#: structure, tables, images and links, no script, style, frame or form, no event handler.
SAFE_TAGS = ["a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt",
             "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol",
             "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody", "td", "th",
             "thead", "tr", "u", "ul"]
SAFE_ATTRIBUTES = {"a": ["href", "title"], "img": ["src", "alt", "title", "width", "height"],
                   "code": ["class"], "span": ["class"], "div": ["class"], "pre": ["class"],
                   "td": ["align"], "th": ["align"], "abbr": ["title"]}

#: Notebook metadata a learner's kernel can fill and an HTML page would run (the widget
#: state is rendered by scripts loaded for it).
ACTIVE_METADATA = ("widgets",)


class LearnerHTML(SanitizeHTML):
    """nbconvert's sanitizer, stripping what it does not allow (tags, attributes, URL
    schemes such as ``javascript:``) rather than escaping it, over a markdown cell's
    rendered HTML (a markdown link is a link too); every output type but plain
    text, LaTeX, JSON, PNG and JPEG is removed (SVG and JavaScript among them); the widget
    state goes from the notebook's metadata; the grader's comments are escaped."""

    enabled = Bool(True, config=True, help="On wherever nbgrader lists it")
    tags = List(Unicode(), default_value=SAFE_TAGS, config=True, help="Tags kept")
    attributes = AnyTrait(SAFE_ATTRIBUTES, config=True, help="Attributes kept, by tag")
    strip = Bool(True, config=True, help="Remove what is not kept (rather than escape it)")

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        for key in ACTIVE_METADATA:
            nb.metadata.pop(key, None)
        for cell in nb.cells:
            grading = cell.get("metadata", {}).get("nbgrader", {})
            if isinstance(grading.get("comment"), str):
                grading["comment"] = html.escape(grading["comment"])
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: Any, resources: dict[str, Any], index: int) -> Any:
        if cell.cell_type == "markdown":  # its links too: rendered first, then cleaned
            source = PASTED_IMAGE.sub(lambda m: f"[pasted image: {m.group(1)}]", cell.source)
            cell.source = self.sanitize_html_tags(markdown2html_mistune(source))
            cell.pop("attachments", None)
            return cell, resources
        for output in cell.get("outputs", []):
            if "metadata" in output:
                output["metadata"] = safe_output_metadata(output["metadata"])
        return super().preprocess_cell(cell, resources, index)


#: a markdown image pasted into the cell (its data in the cell's attachments)
PASTED_IMAGE = re.compile(r"!\[([^\]]*)\]\(attachment:[^)]*\)")


def safe_output_metadata(meta: Any) -> dict[str, Any]:
    """An output's metadata as an HTML page may use it: per image type, a width and height
    that are plain numbers (nbconvert writes them into the tag unquoted); nothing else."""
    kept: dict[str, Any] = {}
    for mime, value in (meta.items() if isinstance(meta, dict) else ()):
        if not isinstance(value, dict):
            continue
        size = {k: v for k, v in value.items() if k in ("width", "height")
                and ((isinstance(v, int) and not isinstance(v, bool))
                     or (isinstance(v, str) and v.isdigit()))}
        if size:
            kept[mime] = size
    return kept


def sanitize_pipelines(config: Any) -> None:
    """Put :class:`LearnerHTML` last on nbgrader's autograde steps (under ``config``) and
    on its feedback steps (after the comments are read from the gradebook)."""
    steps = list(config.Autograde.get(
        "autograde_preprocessors", Autograde.class_traits()["autograde_preprocessors"].default()))
    config.Autograde.autograde_preprocessors = [*steps, LearnerHTML]
    steps = list(config.GenerateFeedback.get(
        "preprocessors", GenerateFeedback.class_traits()["preprocessors"].default()))
    config.GenerateFeedback.preprocessors = [*steps, LearnerHTML]
