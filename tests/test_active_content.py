"""No learner script in a page an instructor opens: the notebook as nbgrader's pipelines
leave it, rendered by nbconvert, parsed as a browser would."""

from __future__ import annotations

import nbformat
from nbconvert import HTMLExporter
from support.active_html import active_content
from traitlets.config import Config

from tilelab.classroom import active_content as ac
from tilelab.classroom import course

SCRIPTS = [
    "<script>alert('md')</script>",
    '<img src="x" onerror="alert(1)">',
    "[click](javascript:alert(2))",
    '<a href="javascript:alert(3)">x</a>',
    "<svg><script>alert(4)</script></svg>",
    '<iframe src="https://example.com"></iframe>',
    '<div onmouseover="alert(5)">hover</div>',
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
        nbformat.v4.new_output("execute_result", execution_count=1, data={
            "text/markdown": '<img src=x onerror="alert(11)">'}),
    ]
    code.metadata["nbgrader"] = {"grade": True, "grade_id": "kernel_naive", "points": 0,
                                 "comment": "error: #error <script>alert(12)</script>"}
    nb.cells.append(code)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"x": {"model_name": "HTMLModel", "state": {"value": "<script>alert(13)"}}},
        "version_major": 2, "version_minor": 0}}
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return HTMLExporter().from_notebook_node(nb)[0]


def test_a_hostile_notebook_renders_without_active_content():
    baseline = render(nbformat.v4.new_notebook())
    raw = render(hostile_notebook())
    assert len(active_content(raw, baseline)) >= 5  # the checker sees them unsanitized
    nb, _ = ac.LearnerHTML()(hostile_notebook(), {})  # as an nbconvert exporter calls it
    page = render(nb)
    assert active_content(page, baseline) == []
    assert "<h1" in page and "hover" in page
    assert "widgets" not in nb.metadata
    comment = nb.cells[1].metadata.nbgrader.comment
    assert comment == "error: #error &lt;script&gt;alert(12)&lt;/script&gt;"


def test_the_class_runs_pipelines_end_with_the_sanitizer(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    api = course.open_api(tmp_path, sandboxed=True)
    steps = api.config.Autograde.autograde_preprocessors
    assert steps[-1] is ac.LearnerHTML and "SandboxedExecute" in repr(steps)
    assert api.config.GenerateFeedback.preprocessors[-1] is ac.LearnerHTML
    cfg = Config()
    ac.sanitize_pipelines(cfg)
    assert cfg.Autograde.autograde_preprocessors[0].__name__ == "Execute"


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures" / "submissions"


def test_an_images_display_metadata_cannot_carry_a_handler():
    """``display(..., metadata={"image/png": {"width": "1 onerror=..."}})``: nbconvert writes
    the width into the tag unquoted; only plain-number sizes survive the sanitizer."""
    baseline = render(nbformat.v4.new_notebook())
    # what tests/fixtures/submissions/naive-image_metadata_onerror.ipynb's cell displays
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("display(..., raw=True, metadata=...)")
    code.outputs = [nbformat.v4.new_output(
        "display_data", data={"image/png": "eA=="},
        metadata={"image/png": {"width": "1 onerror=alert(document.cookie)"}})]
    nb.cells.append(code)
    assert active_content(render(nb), baseline)  # the checker sees it unsanitized
    clean, _ = ac.LearnerHTML()(nb, {})
    assert active_content(render(clean), baseline) == []
    assert ac.safe_output_metadata({"image/png": {"width": 320, "height": "200",
                                                  "unconfined": True}, "x": 1}) == {
        "image/png": {"width": 320, "height": "200"}}


def test_an_honest_pasted_image_keeps_the_feedback_page():
    """A markdown cell with a pasted image (``attachment:``) renders: the image is named,
    not embedded, and nothing of the notebook is lost to a conversion error."""
    nb = nbformat.read(FIXTURES / "naive-pasted_image.ipynb", as_version=4)
    clean, _ = ac.LearnerHTML()(nb, {})
    page = render(clean)
    assert "[pasted image: image.png]" in page and "attachment:" not in page
