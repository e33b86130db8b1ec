"""No learner script in a page an instructor opens, by any path.

nbgrader's formgrader renders each autograded notebook into a page of the instructor's own
Jupyter server (whose terminals are a shell as the instructor), and the feedback pages are
HTML files: a ``<script>`` a learner put in a markdown cell, an ``<img onerror=...>``, a
``javascript:`` link, an SVG with a script, a ``display(HTML(...))`` or ``Javascript``
output, a cell tag or notebook title that closes its attribute, a ``\\href`` MathJax turns
into a link, would run there with the instructor's rights. So learner HTML is cleaned at
the moment it is rendered into a page, and only then:

- :func:`learner_markdown` replaces nbconvert's ``markdown2html`` filter (every markdown
  cell, every ``text/markdown`` output and nbgrader's comment box go through it): the
  markdown rendered to HTML, then that HTML cleaned (:func:`clean`: a short list of tags,
  no event handler, style or frame, links to http(s) and in-page anchors only). Nothing
  cleaned is ever stored back as markdown to be rendered again (a blank line inside a kept
  attribute would let that second rendering make a new handler). Markdown renders in time
  that grows with the square of its length for some texts (unmatched ``\\begin{x}``), and
  so does cleaning deeply nested HTML: one cell or output renders as markdown up to
  :data:`ONE_LIMIT` bytes and a page up to :data:`PAGE_LIMIT` in all, the rest shown as
  plain text with a note.
- :class:`LearnerPage`, a preprocessor on every exporter that renders a learner's notebook
  (the feedback's, formgrader's, through the course's ``nbgrader_config.py``; and last of
  the class run's autograde steps, so the stored notebook already holds nothing active):
  outputs of a short list of types only (text, LaTeX, PNG, JPEG, cleaned HTML, markdown),
  cell and notebook metadata reduced to what the pages use and may show, widget state
  gone, the grader's comment shown as preformatted text (it quotes the learner's code).
"""

from __future__ import annotations

import html
import re
from typing import Any

from bleach.sanitizer import Cleaner
from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbconvert.preprocessors import Preprocessor
from nbformat import from_dict
from traitlets import Bool

#: Bytes of one cell's (or one output's) markdown or HTML rendered as such; and of a
#: whole page: past either, the text is shown as text (both the markdown renderer and the
#: HTML cleaner take time that grows with the square of the length for some inputs; at
#: these sizes a page renders in seconds whatever its learner wrote).
ONE_LIMIT = 16 << 10
PAGE_LIMIT = 64 << 10

#: What rendered markdown or an HTML output keeps (the rest is stripped, its text kept):
#: text structure, tables, images and links; no script, style, frame, form or object.
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre",
    "s", "span", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "u",
    "ul"})
#: Attributes kept, by tag (``href``/``src`` further checked by :func:`_allowed`)
SAFE_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title", "width", "height"},
                   "td": {"align"}, "th": {"align"}, "abbr": {"title"},
                   "code": {"class"}, "span": {"class"}, "div": {"class"}, "pre": {"class"}}
#: the classes a syntax highlighter writes (``highlight``, Pygments' short token names,
#: ``language-x``): no class of the page's own style sheets, several of which animate
SAFE_CLASS = re.compile(r"(highlight|hll|language-[a-z0-9_+-]{1,32}|[a-z]{1,2}[0-9a-z]?)")
_BLANKS = re.compile(r"[\x00-\x20\x7f-\xa0]+")
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp);base64,")

#: Output types a page may show: text, LaTeX (escaped, for MathJax), PNG and JPEG (as
#: data URLs), HTML (cleaned) and markdown (through :func:`learner_markdown`)
SAFE_OUTPUTS = ("text/plain", "text/latex", "image/png", "image/jpeg", "text/html",
                "text/markdown")
#: MathJax commands that make links, load code or set styles and classes
ACTIVE_TEX = re.compile(r"\\(href|url|class|cssId|style|unicode|require|html|data|toggle)"
                        r"(?![A-Za-z])")
#: a markdown image pasted into the cell (its data in the cell's attachments, not shown)
PASTED_IMAGE = re.compile(r"!\[([^\]]*)\]\(attachment:[^)]*\)")
#: nbgrader's cell metadata, as formgrader and the feedback read it
GRADE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
TAG = re.compile(r"[A-Za-z0-9_-]{1,64}")
NBGRADER_FLAGS = ("grade", "solution", "locked", "task")


def _allowed(tag: str, name: str, value: str) -> bool:
    if name not in SAFE_ATTRIBUTES.get(tag, ()):
        return False
    plain = _BLANKS.sub("", value).lower()
    if name == "href":
        return plain.startswith(("http://", "https://", "#"))
    if name == "src":
        return plain.startswith(("http://", "https://")) or bool(_IMAGE_DATA.match(plain))
    if name == "class":
        return all(SAFE_CLASS.fullmatch(c) for c in value.split())
    if name in ("width", "height"):
        return value.strip().isdigit()
    return True


_CLEANER = Cleaner(tags=SAFE_TAGS, attributes=_allowed, protocols={"http", "https", "data"},
                   strip=True, strip_comments=True)


def clean(fragment: str) -> str:
    """An HTML fragment with only :data:`SAFE_TAGS` and their checked attributes left
    (bleach, which parses as a browser does); what is stripped keeps its text."""
    return _CLEANER.clean(fragment)


def neutral_tex(text: str) -> str:
    """``text`` with every MathJax command that could make a link or run code written as
    plain text (``\\href`` becomes ``\\text{href}``)."""
    return ACTIVE_TEX.sub(r"\\text{\1}", text)


def _as_text(text: str, why: str) -> str:
    return (f'<p><em>[tilelab: {html.escape(why)}; shown as text]</em></p>'
            f"<pre>{html.escape(text)}</pre>")


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB"


def _spend(budget: dict[str, Any] | None, text: str) -> str | None:
    """Why ``text`` is not rendered on this page (None: it is, and the page's budget,
    kept in its ``resources``, is charged)."""
    if len(text) > ONE_LIMIT:
        return (f"this text of {_kib(len(text))} is longer than the {_kib(ONE_LIMIT)} a "
                "page renders of one cell or output")
    used = budget.get("tilelab_rendered", 0) if budget is not None else 0
    if used + len(text) > PAGE_LIMIT:
        return (f"the page has rendered the {_kib(PAGE_LIMIT)} of markdown and HTML it "
                "renders in all")
    if budget is not None:
        budget["tilelab_rendered"] = used + len(text)
    return None


def _resources(context: Any) -> dict[str, Any] | None:
    found = context.get("resources") if hasattr(context, "get") else None
    return found if isinstance(found, dict) else None


@pass_context
def learner_markdown(context: Any, source: Any) -> str:
    """nbconvert's ``markdown2html`` filter for a learner's page: rendered, then cleaned,
    within the page's budget (:data:`ONE_LIMIT`, :data:`PAGE_LIMIT`)."""
    text = str(source or "")
    why = _spend(_resources(context), text)
    if why:
        return _as_text(text, why)
    text = PASTED_IMAGE.sub(lambda m: f"[pasted image: {m.group(1)}]", neutral_tex(text))
    return clean(markdown2html_mistune(text))


def fenced(text: str) -> str:
    """``text`` as a markdown code block (a fence longer than any run of backticks in it),
    so that markdown shows it as it is."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}\n{text}\n{fence}"


def safe_output_metadata(meta: Any) -> dict[str, Any]:
    """An output's metadata as a page may use it: per image type, a width and height
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


def _text(value: Any) -> str:
    return "".join(map(str, value)) if isinstance(value, list) else str(value or "")


def _output(out: Any, budget: dict[str, Any]) -> dict[str, Any] | None:
    """One output as a page may show it (None: nothing of it can be)."""
    kind = out.get("output_type") if isinstance(out, dict) else None
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": _text(out.get("text"))}
    if kind == "error":
        return {"output_type": "error", "ename": _text(out.get("ename")),
                "evalue": _text(out.get("evalue")),
                "traceback": [_text(t) for t in out.get("traceback") or []]}
    if kind not in ("display_data", "execute_result"):
        return None
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    kept = {m: _text(data[m]) for m in SAFE_OUTPUTS if m in data}
    if "text/latex" in kept:
        kept["text/latex"] = neutral_tex(kept["text/latex"])
    if "text/html" in kept:
        why = _spend(budget, kept["text/html"])
        if why:
            kept.setdefault("text/plain", kept["text/html"])
            kept["text/plain"] = f"[tilelab: {why}; shown as text]\n{kept['text/plain']}"
            del kept["text/html"]
        else:
            kept["text/html"] = clean(kept["text/html"])
    dropped = sorted(m for m in data if m not in SAFE_OUTPUTS)
    if not kept:
        kept = {"text/plain": f"[tilelab: an output of type {', '.join(dropped)} is not "
                              "shown on this page]"}
    safe = {"output_type": kind, "data": kept,
            "metadata": safe_output_metadata(out.get("metadata"))}
    if kind == "execute_result":
        count = out.get("execution_count")
        safe["execution_count"] = count if isinstance(count, int) else None
    return safe


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def safe_nbgrader(meta: Any) -> dict[str, Any] | None:
    """A cell's nbgrader metadata as formgrader and the feedback read it: its flags, a
    grade id of letters, digits, ``_`` and ``-``, numeric points and score, its comment as
    preprocessed text (None: no sound nbgrader metadata)."""
    if not isinstance(meta, dict) or not GRADE_ID.fullmatch(str(meta.get("grade_id", ""))):
        return None
    out: dict[str, Any] = {"grade_id": meta["grade_id"]}
    out.update({k: meta[k] for k in NBGRADER_FLAGS if isinstance(meta.get(k), bool)})
    for key in ("points", "score"):
        if (n := _number(meta.get(key))) is not None:
            out[key] = n
    if isinstance(meta.get("schema_version"), int):
        out["schema_version"] = meta["schema_version"]
    if meta.get("cell_type") in ("code", "markdown"):
        out["cell_type"] = meta["cell_type"]
    if isinstance(meta.get("comment"), str) and meta["comment"]:
        comment = meta["comment"]
        out["comment"] = comment if comment.startswith("```") else fenced(comment)
    return out


def safe_cell_metadata(meta: Any) -> dict[str, Any]:
    """A cell's metadata reduced to its nbgrader part and its plain tags."""
    meta = meta if isinstance(meta, dict) else {}
    kept: dict[str, Any] = {}
    if (grading := safe_nbgrader(meta.get("nbgrader"))) is not None:
        kept["nbgrader"] = grading
    tags = [t for t in meta.get("tags") or [] if isinstance(t, str) and TAG.fullmatch(t)]
    if tags:
        kept["tags"] = tags
    return kept


def safe_notebook_metadata(meta: Any) -> dict[str, Any]:
    """The notebook's metadata reduced to its kernel's and language's plain names (no
    title, which a template writes unescaped; no widget state)."""
    meta = meta if isinstance(meta, dict) else {}
    plain = re.compile(r"[A-Za-z0-9 ._+-]{1,64}")

    def names(d: Any, keys: tuple[str, ...]) -> dict[str, str]:
        d = d if isinstance(d, dict) else {}
        return {k: d[k] for k in keys if isinstance(d.get(k), str) and plain.fullmatch(d[k])}

    kept: dict[str, Any] = {}
    kernel = names(meta.get("kernelspec"), ("name", "display_name", "language"))
    if {"name", "display_name"} <= set(kernel):  # what nbformat requires of one
        kept["kernelspec"] = kernel
    language = names(meta.get("language_info"), ("name", "pygments_lexer", "file_extension"))
    if "name" in language:
        kept["language_info"] = language
    return kept


class LearnerPage(Preprocessor):
    """A learner's notebook reduced to what a page may show (see the module's docstring);
    the same notebook twice gives the same result."""

    enabled = Bool(True, config=True, help="On wherever it is listed")

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        nb.metadata = from_dict(safe_notebook_metadata(nb.get("metadata")))
        budget: dict[str, Any] = {}
        for cell in nb.cells:
            cell.metadata = from_dict(safe_cell_metadata(cell.get("metadata")))
            if cell.get("cell_type") == "code":
                outs = (_output(o, budget) for o in cell.get("outputs") or [])
                cell.outputs = [from_dict(o) for o in outs if o is not None]
            else:
                cell.pop("outputs", None)
        return nb, resources


def sanitize_pipelines(config: Any) -> None:
    """Render learner pages through :func:`learner_markdown` (every HTML exporter under
    ``config``), and put :class:`LearnerPage` last on nbgrader's autograde steps and on its
    feedback steps (after the comments are read from the gradebook)."""
    from nbgrader.converters import Autograde, GenerateFeedback

    filters = dict(config.HTMLExporter.get("filters", {}))
    config.HTMLExporter.filters = {**filters, "markdown2html": learner_markdown}
    for converter, trait in ((Autograde, "autograde_preprocessors"),
                             (GenerateFeedback, "preprocessors")):
        section = config[converter.__name__]
        steps = list(section.get(trait, converter.class_traits()[trait].default()))
        section[trait] = [*steps, LearnerPage]
