"""The book extension inside Sphinx: a tiny project built with no data, example data, and
strict mode. The full book is built in test_book_build.py."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

pytest.importorskip("sphinx.application", reason="the book's tests need Sphinx (requirements.txt)")
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace

EXAMPLES = Path(__file__).parent / "data" / "book"

PAGE = """\
# Test page

```{provenance}
```

Naive: {measured}`matmul[kernel=naive,n=4096].gflops :,.0f` GFLOP/s; padded
{compare}`matmul[kernel=tiled32_padded,n=4096].median_ms vs
matmul[kernel=tiled32,n=4096].median_ms`;
GPU {measured}`device.name`. Math: $\\frac{2N^3}{t}$.

```{measured-table} matmul
:where: n=4096
:columns: kernel, median_ms, gflops
:format: gflops=,.0f
:order: kernel: tiled32, naive

The ladder.
```

```{measured-figure} matmul
:kind: bar
:y: gflops
:hue: n

GFLOP/s.
```

```{measured-text} sass[kernel=tiled32].excerpt
:max-lines: 2
```

```{diagram} banks
Banks.
```

```{tiling-trace}
```

{exercise}`Exercise 1 <exercises/01-naive/naive.ipynb>`
"""


def build(tmp_path: Path, data: Path, page: str = PAGE, strict: bool = False,
          fresh: bool = True) -> tuple[str, str]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "index.md").write_text(page)
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'tilelab.book']\n"
        "html_theme = 'sphinx_book_theme'\n"
        "myst_enable_extensions = ['dollarmath', 'colon_fence']\n"
        f"tilelab_data_dir = {str(data)!r}\n"
        f"tilelab_strict = {strict!r}\n"
        "html_theme_options = {'repository_url': 'https://github.com/o/r',"
        " 'repository_branch': 'main',"
        " 'launch_buttons': {'colab_url': 'https://colab.research.google.com'}}\n"
        "suppress_warnings = ['config.cache']\n"
    )
    warnings = io.StringIO()
    out = tmp_path / "out"
    with docutils_namespace():
        app = Sphinx(str(src), str(src), str(out), str(tmp_path / "doctrees"), "html",
                     status=None, warning=warnings, freshenv=fresh)
        app.build()
    return (out / "index.html").read_text(), warnings.getvalue()


@pytest.mark.slow
def test_no_data_renders_notes_without_warnings(tmp_path):
    html, warnings = build(tmp_path, tmp_path / "no-data")
    assert warnings == ""
    assert "not measured yet" in html
    assert "tilelab bench matmul --out book/data" in html
    assert "Where the numbers on this page come from" in html
    assert "<math" in html and "\\frac" not in html  # MathML, rendered at build time
    assert "Exercise 1" in html and "colab.research.google.com/github/o/r/blob/main/" in html


@pytest.mark.slow
def test_example_data_renders_values_tables_figures_and_provenance(tmp_path):
    html, warnings = build(tmp_path, EXAMPLES, strict=True)
    assert warnings == ""
    assert f"{2 * 4096**3 / 32.0 / 1e6:,.0f}" in html  # the naive GFLOP/s, from the data
    assert f"{23.0 / 18.0:.2f}× slower" in html
    assert "Example GPU" in html
    assert html.index(">tiled32<") < html.index(">naive<")  # the table's order
    assert "EXAMPLE GPU (test data, not a measurement)" in html  # the provenance box
    assert "more line" in html  # the excerpt was cut to two lines
    images = sorted((tmp_path / "out" / "_images").glob("*.png"))
    assert any(p.name.startswith("bar-matmul-") for p in images)
    assert any(p.name.startswith("diagram-banks-") for p in images)
    assert "tl-missing" not in html


@pytest.mark.slow
def test_strict_mode_warns_about_missing_data(tmp_path):
    _, warnings = build(tmp_path, tmp_path / "no-data", strict=True)
    assert "strict" in warnings and "matmul" in warnings


@pytest.mark.slow
def test_authoring_errors_warn(tmp_path):
    page = "# T\n\n{measured}`matmul[kernel=naive.gflops`\n\n```{diagram} nope\n```\n"
    _, warnings = build(tmp_path, EXAMPLES, page=page)
    assert "names no data value" in warnings or "not an expression" in warnings
    assert "no diagram 'nope'" in warnings


@pytest.mark.slow
def test_a_sentence_the_data_contradict_fails_the_build(tmp_path):
    """A claim holds with the example data; its opposite warns (a -W build fails); with
    no data it stands unchecked, without a warning."""
    cond = ("matmul[kernel=tiled32_padded,n=4096].median_ms {} "
            "matmul[kernel=tiled32,n=4096].median_ms")
    page = ("# T\n\nPadding {claim}`made it slower :: " + cond.format(">") + "`, and "
            "{claim}`made it faster :: " + cond.format("<") + "`.\n")
    html, warnings = build(tmp_path, EXAMPLES, page=page)
    assert "made it slower" in html and "made it faster" in html
    assert "the data contradict the sentence 'made it faster'" in warnings
    assert "'made it slower'" not in warnings
    (tmp_path / "none").mkdir()
    _, warnings = build(tmp_path / "none", tmp_path / "no-data", page=page)
    assert warnings == ""


@pytest.mark.slow
def test_a_rebuild_follows_new_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    html, _ = build(tmp_path, data)
    assert "not measured yet" in html
    for name in ("matmul", "device", "sass"):
        shutil.copy(EXAMPLES / f"{name}.json", data)
    html, warnings = build(tmp_path, data, fresh=False)  # incremental: the page is re-read
    assert warnings == "" and "Example GPU" in html
