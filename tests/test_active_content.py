"""No learner script in a page an instructor opens: a hostile notebook rendered by the
HTML exporter as the course's configuration makes it (formgrader's, the feedback's), with
nbgrader's own page templates, parsed as a browser would. The pages in a real browser:
``tests/test_pages_browser.py``."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers
from support.active_html import active_content
from traitlets.config import Config

from tilelab.classroom import active_content as ac
from tilelab.classroom import course

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "submissions"

SCRIPTS = [
    "<script>alert('md')</script>",
    '<img src="x" onerror="alert(1)">',
    "[click](javascript:alert(2))",
    '<a href="javascript:alert(3)">x</a>',
    '<a href="jav&#x09;ascript:alert(3)">tab</a> <a href=" JaVaScRiPt:alert(3)">case</a>',
    "<svg><script>alert(4)</script></svg>",
    '<iframe src="https://example.com"></iframe>',
    '<div onmouseover="alert(5)">hover</div>',
    '<details open ontoggle="alert(14)">d</details>',
    '<i class="fa fa-spin" onanimationstart="alert(15)">spin</i>',
    '<div class="progress-bar active" onanimationstart="alert(16)">bar</div>',
    '<a title="x\n\n[y](javascript:alert(17)) onanimationstart=alert(18)">kept?</a>',
    "$\\href{javascript:alert(19)}{math}$",
    '<a href="data:text/html,<script>alert(20)</script>">data</a>',
]


def hostile_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Tiles\n\n" + "\n\n".join(SCRIPTS)))
    code = nbformat.v4.new_code_cell("display(HTML(...))")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={
            "text/html": "<script>alert(6)</script><b onclick='alert(7)'>x</b>",
            "text/plain": "<HTML>"}),
        nbformat.v4.new_output("display_data", data={
            "image/svg+xml": '<svg onload="alert(8)"><script>alert(9)</script></svg>'}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(10)"}),
        nbformat.v4.new_output("display_data", data={
            "text/vnd.mermaid": "</pre><script>alert(21)</script>"}),
        nbformat.v4.new_output("display_data", data={"text/latex": r"$\href{javascript:x}{y}$"}),
        nbformat.v4.new_output("execute_result", execution_count=1, data={
            "text/markdown": '<img src=x onerror="alert(11)">'}),
    ]
    code.metadata["nbgrader"] = {"grade": True, "grade_id": "kernel_naive", "points": 0, "score": 0,
                                 "solution": True,
                                 "comment": "error: #error <script>alert(12)</script> "
                                            "[here](javascript:alert(22))"}
    code.metadata["tags"] = ['x" onmouseover="alert(23)']
    nb.cells.append(code)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"x": {"model_name": "HTMLModel", "state": {"value": "<script>alert(13)"}}},
        "version_major": 2, "version_minor": 0}}
    nb.metadata["title"] = "</title><script>alert(24)</script>"
    return nb


def course_exporter(template: str | None = None) -> HTMLExporter:
    """The HTML exporter as formgrader makes it from the course's configuration (its own
    ``formgrade`` or ``feedback`` template, where named)."""
    config = course.load_config(REPO)
    if template:
        config.HTMLExporter.template_name = template
        config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
        config.HTMLExporter.extra_template_paths = [  # as nbgrader's feedback sets them
            str(Path(handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css")]
    return HTMLExporter(config=config)


def render(nb: nbformat.NotebookNode, exporter: HTMLExporter | None = None) -> str:
    return (exporter or HTMLExporter()).from_notebook_node(
        nb, resources={"nbgrader": {"notebook": "naive", "score": 0, "max_score": 7,
                                   "late_penalty": 0},
                       "base_url": "", "submission_id": "s", "notebook_id": "naive",
                       "assignment_id": "a", "index": 0, "total": 1})[0]


def test_the_checker_sees_the_hostile_notebooks_active_content_unsanitized():
    raw = render(hostile_notebook())
    assert len(active_content(raw, render(nbformat.v4.new_notebook()))) >= 8


def test_a_hostile_notebook_renders_inert_in_every_page_the_course_makes():
    for template in (None, "formgrade", "feedback"):
        exporter = course_exporter(template)
        baseline = render(nbformat.v4.new_notebook(), exporter)
        page = render(hostile_notebook(), exporter)
        assert active_content(page, baseline) == [], template
        assert "<h1" in page and "hover" in page and "spin" in page, template
        for word in ("alert(13)", "alert(24)", "onmouseover", "\\href"):  # gone: not
            assert word not in page, (template, word)  # even as text


def test_the_feedback_pipeline_escapes_the_graders_comment_and_stores_no_html():
    """The class run's feedback steps end with the page's cleaning (after nbgrader has read
    the comments); the autograde steps' copy cleans outputs and leaves markdown as written."""
    api = course.open_api(REPO, sandboxed=True)
    assert api.config.GenerateFeedback.preprocessors[-1] is ac.LearnerPage
    assert api.config.Autograde.autograde_preprocessors[-1] is ac.LearnerPage
    assert api.config.HTMLExporter.filters["markdown2html"] is ac.learner_markdown
    nb, _ = ac.LearnerPage()(hostile_notebook(), {})
    assert nb.cells[0].source == hostile_notebook().cells[0].source  # never HTML
    comment = nb.cells[1].metadata.nbgrader.comment
    assert comment.startswith("```\n") and "<script>alert(12)</script>" in comment
    page = render(nb, course_exporter("feedback"))
    assert "&lt;script&gt;alert(12)&lt;/script&gt;" in page
    assert "widgets" not in nb.metadata and "title" not in nb.metadata
    again, _ = ac.LearnerPage()(nb, {})
    assert again == nb


def test_an_images_display_metadata_cannot_carry_a_handler():
    """``display(..., metadata={"image/png": {"width": "1 onerror=..."}})``: nbconvert writes
    the width into the tag unquoted; only plain-number sizes survive the sanitizer."""
    baseline = render(nbformat.v4.new_notebook())
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("display(..., raw=True, metadata=...)")
    code.outputs = [nbformat.v4.new_output(
        "display_data", data={"image/png": "eA=="},
        metadata={"image/png": {"width": "1 onerror=alert(document.cookie)"}})]
    nb.cells.append(code)
    assert active_content(render(nb), baseline)  # the checker sees it unsanitized
    clean, _ = ac.LearnerPage()(nb, {})
    assert active_content(render(clean), baseline) == []
    assert ac.safe_output_metadata({"image/png": {"width": 320, "height": "200",
                                                  "unconfined": True}, "x": 1}) == {
        "image/png": {"width": 320, "height": "200"}}


def test_an_honest_notebook_keeps_its_text_code_and_pasted_image_name():
    nb = nbformat.read(FIXTURES / "naive-pasted_image.ipynb", as_version=4)
    page = render(nb, course_exporter("formgrade"))
    assert "[pasted image: image.png]" in page and "attachment:" not in page
    honest = nbformat.read(REPO / "solutions" / "02-tiled" / "tiled.ipynb", as_version=4)
    page = render(honest, course_exporter("formgrade"))
    assert "shown as text" not in page  # the course's own notebooks render within budget
    heading = next(c.source for c in honest.cells if c.cell_type == "markdown")
    assert heading.splitlines()[0].lstrip("# ") in page


def test_a_page_renders_a_bounded_amount_of_markdown_and_html():
    """Unmatched ``\\begin{x}`` (markdown's rendering grows with the square of their count)
    and deeply nested HTML (the cleaner's does): past one cell's or the page's budget the
    rest is shown as text, so a page costs seconds whatever its learner wrote."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("\\begin{x}" * (1 << 17)))  # 1.1 MiB
    for _ in range(ac.PAGE_LIMIT // 1000 + 4):  # each within one cell's budget, together
        nb.cells.append(nbformat.v4.new_markdown_cell("<div>" * 200))  # past the page's
    code = nbformat.v4.new_code_cell("")
    code.outputs = [nbformat.v4.new_output("display_data", data={
        "text/markdown": "$\\begin{x}" * (1 << 16), "text/plain": "md"})]
    nb.cells.append(code)
    page = render(nb, course_exporter("feedback"))
    assert page.count("shown as text") >= 3
    assert "&lt;div&gt;" * 200 in page  # the cells past the page's budget, as text
    cfg = Config()
    ac.sanitize_pipelines(cfg)
    assert cfg.Autograde.autograde_preprocessors[0].__name__ == "Execute"
