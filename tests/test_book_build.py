"""The whole book, built the way `make book` builds it: warning-free, every TOC page, the
provenance on every page that shows data, nothing fetched from a network.

The session fixture builds once (tests/support/book_build.py caches the build for the browser
tests too) and prints how long it took; the 60-second budget is checked by reading that
line, not by a wall-clock assertion.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from support.book_build import Build, build_book, toc_docnames

from tilelab import classroom, publish
from tilelab.catalog import exercises

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "tests" / "data" / "book"
CHAPTERS = [d for d in toc_docnames(REPO) if re.search(r"book/\d\d-", d)]
PAGES = toc_docnames(REPO)
BOOK_MD = sorted((REPO / "book").rglob("*.md"))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def book(tmp_path_factory: pytest.TempPathFactory) -> Build:
    result = build_book(REPO, tmp_path_factory.getbasetemp() / "book")
    print(f"\njupyter-book build of the book: {result.seconds:.1f} s (budget: 60 s)")
    return result


def page(book: Build, docname: str) -> str:
    return (book.html / f"{docname}.html").read_text(encoding="utf-8")


def test_book_builds_without_warnings(book):
    assert book.returncode == 0, book.output[-4000:]
    assert book.warnings == [], "\n".join(book.warnings)


def test_every_toc_page_is_built(book):
    assert PAGES
    for docname in PAGES:
        assert (book.html / f"{docname}.html").is_file(), docname


def test_chapters_show_their_provenance(book):
    assert CHAPTERS
    for docname in CHAPTERS:
        html = page(book, docname)
        assert "Where the numbers on this page come from" in html, docname
        assert "book/data/" in html, docname
        # a closed dropdown at the top, so the chapter opens on its text
        assert re.search(r'<details class="tl-provenance">\s*<summary>', html), docname
        assert "--out /" not in html, f"{docname}: a machine's scratch path as --out"


def test_math_is_rendered_at_build_time(book):
    html = page(book, "book/01-gpu-memories")
    assert "<math" in html
    assert not re.search(r"\\(frac|text|cdot)\b", re.sub(r"<[^>]+>", "", html)), "raw TeX left"


def test_nothing_is_loaded_from_the_network(book):
    assert PAGES
    for docname in PAGES:
        html = page(book, docname)
        assert not re.search(r"<script[^>]+src=\"https?:", html), docname
        assert not re.search(r"<link[^>]+rel=\"stylesheet\"[^>]+href=\"https?:", html), docname
        assert not re.search(r"<script[^>]*mathjax", html, re.I), docname


def test_reference_kernels_are_included_not_copied(book):
    html = page(book, "book/03-tiling")
    src = (REPO / "tilelab" / "kernels" / "matmul_tiled.cu").read_text()
    assert "matmul_tiled" in html and "__syncthreads" in src
    assert BOOK_MD
    for path in BOOK_MD:
        assert "__global__ void" not in path.read_text(), f"{path}: include kernels instead"


def test_exercise_notebooks_are_pages_never_executed(book):
    cfg = yaml.safe_load((REPO / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "off"
    notebooks = [d for d in toc_docnames(REPO) if (REPO / f"{d}.ipynb").is_file()]
    assert {Path(d).parent.name for d in notebooks} == set(exercises.ASSIGNMENTS)
    for docname in notebooks:
        html = page(book, docname)
        assert "download-notebook-button" in html or ".ipynb" in html, docname
        assert 'class="output' not in html, f"{docname}: a notebook was executed or has outputs"
        if not publish.repository_url(REPO):  # not published yet: no button to nowhere
            assert "colab.research.google.com" not in html, docname


def test_exercise_pages_link_their_chapter_in_the_book(book):
    """Before the course is published, an exercise page links its chapter in the same
    built book (a relative link Sphinx resolves), not a sentence about the source."""
    if publish.repository_url(REPO):
        pytest.skip("published: the link goes to the published book")
    for assignment in exercises.ASSIGNMENTS:
        docname = f"exercises/{assignment}/{classroom.notebook_id(assignment)}"
        html = page(book, docname)
        links = re.findall(r'Read the chapter <a class="reference internal" href="([^"]+)"',
                           html)
        assert links, docname
        for href in links:
            assert (book.html / Path(docname).parent / href.split("#")[0]).resolve().is_file()


def test_a_published_course_gets_colab_launch_buttons(tmp_path_factory):
    """A fork that sets its repository URL gets a Colab button on every notebook page,
    opening that notebook in that repository."""
    fork = "https://github.com/a-course/its-fork"
    cfg = (REPO / "_config.yml").read_text(encoding="utf-8")
    cfg_path = tmp_path_factory.mktemp("fork") / "_config.yml"
    cfg_path.write_text(re.sub(r'(?m)^(  url: ).*$', rf'\g<1>"{fork}"', cfg, count=1))
    out = tmp_path_factory.getbasetemp() / "book-fork"
    result = build_book(REPO, out, config=cfg_path)
    assert result.returncode == 0 and result.warnings == [], result.output[-4000:]
    for assignment in exercises.ASSIGNMENTS:
        docname = f"exercises/{assignment}/{classroom.notebook_id(assignment)}"
        html = (result.html / f"{docname}.html").read_text(encoding="utf-8")
        assert (f"https://colab.research.google.com/github/a-course/its-fork/blob/main/"
                f"{docname}.ipynb") in html, docname


def test_no_measured_number_is_typed_into_a_page():
    # Decimal numbers with a measured unit next to them belong in data files, not prose.
    unit = r"(?:ms|GB/s|TB/s|GFLOP/s|TFLOP/s|TFLOPS|GFLOPS)"
    assert BOOK_MD
    for path in BOOK_MD:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        hits = re.findall(rf"\b\d[\d,.]*\s*{unit}", text)
        assert not hits, f"{path.relative_to(REPO)}: typed measurements {hits}"


def test_the_book_lights_up_with_complete_data(tmp_path_factory):
    """Built against the example data set in strict mode, every value, table and figure
    reference of every page must resolve."""
    result = build_book(REPO, tmp_path_factory.getbasetemp() / "book-example-data",
                        {"TILELAB_BOOK_DATA": str(EXAMPLES), "TILELAB_BOOK_STRICT": "1"})
    assert result.returncode == 0, "\n".join(result.warnings) or result.output[-4000:]
    assert PAGES
    for docname in PAGES:
        html = (result.html / f"{docname}.html").read_text(encoding="utf-8")
        assert "tl-missing" not in html, docname
