"""The built book in a real browser (headless Chromium): every page of the TOC renders its
title, its math and its images, and no internal link is broken. One screenshot per page
is saved under <build>/html/_screenshots/.

Needs Debian's chromium and chromium-driver (`make browser` installs them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from support import browser
from support.book_build import Build, build_book, toc_docnames

REPO = Path(__file__).resolve().parents[1]
DOCNAMES = toc_docnames(REPO)
LABEL_PX: dict[str, float] = {}  # figure -> its smallest text as displayed (px)


def min_text_px(png: Path) -> float | None:
    """The smallest text of a generated figure, in image pixels, from its PNG text chunk
    (written by tilelab.book.style.save)."""
    data = png.read_bytes()
    pos = 8
    while pos + 8 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + size]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            if key == b"tilelab-min-text-px":
                return float(value)
        pos += 12 + size
    return None

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="session")
def book(tmp_path_factory: pytest.TempPathFactory) -> Build:
    result = build_book(REPO, tmp_path_factory.getbasetemp() / "book")
    if result.returncode != 0:
        pytest.fail("the book did not build:\n" + result.output[-4000:])
    return result


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):
    why = browser.missing()
    if why:
        pytest.skip(why)
    yield from browser.chromium(tmp_path_factory.mktemp("chromium-profile"))


def _open(driver, path: Path) -> None:
    driver.get(path.as_uri())
    for _ in range(100):
        if driver.execute_script("return document.readyState") == "complete":
            return
        time.sleep(0.05)


def _ids(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        text = path.read_text(encoding="utf-8", errors="replace")
        cache[path] = set(re.findall(r"""\b(?:id|name)=["']([^"']+)["']""", text))
    return cache[path]


@pytest.mark.parametrize("docname", DOCNAMES)
def test_page_renders_title_math_images_and_links(driver, book, docname):
    path = book.html / f"{docname}.html"
    _open(driver, path)

    # the title
    h1 = driver.execute_script(
        "const h = document.querySelector('article h1, main h1, h1');"
        "return h ? h.innerText : '';")
    heading = re.sub(r"^[\d.]+\s+", "", h1.replace("#", "")).strip()
    assert heading, f"{docname}: no title"
    assert heading.split()[0] in driver.title, f"{docname}: <title> {driver.title!r}"

    # the math: every formula became MathML and takes up space; no raw TeX on the page
    bad_math = driver.execute_script(
        "return [...document.querySelectorAll('.math')].filter(e => {"
        "  const m = e.querySelector('math'); if (!m) return true;"
        "  const r = m.getBoundingClientRect(); return !(r.width > 0 && r.height > 0);"
        "}).map(e => e.outerHTML.slice(0, 120));")
    assert bad_math == [], f"{docname}: math not rendered: {bad_math}"
    text = driver.execute_script("return document.body.innerText")
    assert not re.search(r"\\(frac|cdot|text|sum)\b|\$\$", text), f"{docname}: raw TeX"

    # the images: each one scrolled into view and loaded
    driver.execute_script("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
    broken: list[str] = []
    for _ in range(50):
        broken = driver.execute_script(
            "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.getAttribute('src'));")
        if not broken:
            break
        time.sleep(0.1)
    assert broken == [], f"{docname}: images not loaded: {broken}"

    # the internal links: the file exists, and so does the anchor
    hrefs = driver.execute_script(
        "return [...document.querySelectorAll('a[href]')].map(a => a.href);")
    cache: dict[Path, set[str]] = {}
    dead = []
    for href in hrefs:
        url = urlparse(href)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        if target.is_dir():
            target = target / "index.html"
        anchored = url.fragment and target.suffix == ".html"
        if not target.is_file() or (anchored and unquote(url.fragment) not in _ids(target, cache)):
            dead.append(href)
    assert dead == [], f"{docname}: broken internal links: {sorted(set(dead))}"

    # at 1280 px: no code block hides the end of a line (a long line wraps), the page does
    # not scroll sideways, figures are not squeezed below their container, every text of a
    # figure is at least 13 px as displayed, the provenance box is closed
    cut = driver.execute_script(
        "return [...document.querySelectorAll('div.highlight pre, pre.literal-block')]"
        ".filter(p => p.scrollWidth > p.clientWidth + 1)"
        ".map(p => p.innerText.slice(0, 60));")
    assert cut == [], f"{docname}: code blocks whose lines are cut off at 1280 px: {cut}"
    tables = driver.execute_script(
        "return [...document.querySelectorAll('main table, article table')]"
        ".filter(t => t.parentElement.scrollWidth > t.parentElement.clientWidth + 1)"
        ".map(t => (t.querySelector('caption') || t).innerText.slice(0, 80));")
    assert tables == [], f"{docname}: tables wider than the column at 1280 px: {tables}"
    wide = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
    assert wide <= 1, f"{docname}: the page scrolls sideways by {wide} px"
    squeezed = driver.execute_script(
        "return [...document.querySelectorAll('figure img')].filter(i => {"
        "  const room = Math.min(i.naturalWidth / 2, i.closest('figure').clientWidth);"
        "  return i.getBoundingClientRect().width < 0.95 * room;"
        "}).map(i => i.getAttribute('src'));")
    assert squeezed == [], f"{docname}: figures drawn smaller than their column: {squeezed}"
    shown = driver.execute_script(
        "return [...document.querySelectorAll('figure img')].map(i => "
        "[i.getAttribute('src'), i.getBoundingClientRect().width, i.naturalWidth]);")
    sizes = {}
    for src, width, natural in shown:
        png = (path.parent / unquote(src)).resolve()
        text_px = min_text_px(png)
        assert text_px is not None, f"{docname}: {src} does not record its smallest text"
        sizes[src] = text_px * width / natural
    small = {src: round(px, 1) for src, px in sizes.items() if px < 13 - 0.05}
    assert small == {}, f"{docname}: figure text under 13 px as displayed: {small}"
    LABEL_PX.update({f"{docname}: {src}": px for src, px in sizes.items()})
    boxes = driver.execute_script(
        "return [...document.querySelectorAll('details.tl-provenance')].map(d => d.open);")
    if docname.startswith("book/0"):
        assert boxes and not any(boxes), f"{docname}: provenance box missing or open"

    # a screenshot of the whole page
    shots = book.html / "_screenshots"
    shots.mkdir(exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(800, min(int(height), 12000)))
    shot = shots / f"{docname.replace('/', '__')}.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    driver.set_window_size(1280, 1000)


def test_smallest_figure_text_of_the_whole_book(book):
    """Runs after the pages (file order): reports the smallest figure text measured."""
    if not LABEL_PX:
        pytest.skip("no page was measured")
    where, px = min(LABEL_PX.items(), key=lambda kv: kv[1])
    (book.html / "_screenshots").mkdir(exist_ok=True)
    (book.html / "_screenshots" / "label_px.txt").write_text(
        "".join(f"{v:6.1f}  {k}\n" for k, v in sorted(LABEL_PX.items(), key=lambda kv: kv[1])))
    print(f"smallest figure text as displayed at 1280 px: {px:.1f} px ({where})")
    assert px >= 13 - 0.05
