"""The built book in a real browser (headless Chromium): every page of the TOC renders its
title, its math and its images, and no internal link is broken. One screenshot per page
is saved under <build>/html/_screenshots/.

Needs Debian's chromium and chromium-driver (`make browser` installs them).
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from support.book_build import Build, build_book, toc_docnames

REPO = Path(__file__).resolve().parents[1]
DOCNAMES = toc_docnames(REPO)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _browser_missing() -> str | None:
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    if missing:
        return (f"needs {' and '.join(missing)} on PATH: `make browser` installs Debian's "
                "chromium and chromium-driver")
    return None


@pytest.fixture(scope="session")
def book(tmp_path_factory: pytest.TempPathFactory) -> Build:
    result = build_book(REPO, tmp_path_factory.getbasetemp() / "book")
    if result.returncode != 0:
        pytest.fail("the book did not build:\n" + result.output[-4000:])
    return result


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):
    why = _browser_missing()
    if why:
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
                "--window-size=1280,1000"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                           options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


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

    # nothing cut at the right edge at 1280 px: no code block scrolls sideways, the page
    # does not, figures are not squeezed below their container, the provenance box is closed
    cut = driver.execute_script(
        "return [...document.querySelectorAll('main pre, article pre')]"
        ".filter(p => p.scrollWidth > p.clientWidth + 1)"
        ".map(p => p.innerText.split('\\n').sort((a, b) => b.length - a.length)[0]);")
    assert cut == [], f"{docname}: code cut at the right edge at 1280 px: {cut}"
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
        "  const room = Math.min(i.naturalWidth, i.closest('figure').clientWidth);"
        "  return i.getBoundingClientRect().width < 0.95 * room;"
        "}).map(i => i.getAttribute('src'));")
    assert squeezed == [], f"{docname}: figures drawn smaller than their column: {squeezed}"
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
