"""The exercise pages and the chapters' folded solutions in headless Chromium at 1280 px:
every step's reference picture loads and is drawn at its own size (never squeezed, never
wider than the window), and each chapter's "Show the solution" opens onto its listing.

Needs Debian's chromium and chromium-driver (`make browser` installs them).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import test_book_browser

from tilelab.catalog import exercises

book = test_book_browser.book  # the book's one build per session, and its browser
driver = test_book_browser.driver

REPO = Path(__file__).resolve().parents[1]
PAGES = [f"exercises/{a}/{next((REPO / 'exercises' / a).glob('*.ipynb')).stem}"
         for a in exercises.ASSIGNMENTS]
CHAPTERS = ["book/02-naive-matmul", "book/03-tiling", "book/04-banks-padding",
            "book/06-cublas"]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def pictures(driver, path: Path) -> list[dict]:
    """Each step picture of the page: loaded, natural and drawn widths, its column's."""
    driver.get(path.as_uri())
    driver.execute_script("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
    for _ in range(50):
        found = driver.execute_script(
            "return [...document.querySelectorAll('img[src*=\"_images/\"]')]"
            ".filter(i => i.alt.startsWith('What one block')).map(i => ({"
            "  src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0,"
            "  natural: i.naturalWidth, drawn: i.getBoundingClientRect().width,"
            "  room: i.parentElement.clientWidth}));")
        if all(p["loaded"] for p in found):
            return found
        time.sleep(0.1)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_step_picture_renders_at_1280_px(driver, book, page):
    found = pictures(driver, book.html / f"{page}.html")
    assignment = page.split("/")[1]
    assert len(found) == len(exercises.ASSIGNMENTS[assignment]), found
    for p in found:
        assert p["loaded"], p
        assert p["natural"] <= 1280 and p["drawn"] <= 1280, p
        assert p["drawn"] >= 0.95 * min(p["natural"], p["room"]), f"squeezed: {p}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_solution_opens_after_the_exercise_link(driver, book, chapter):
    driver.get((book.html / f"{chapter}.html").as_uri())
    order = driver.execute_script(
        "const all = [...document.querySelectorAll('a[href*=\"exercises/\"], details')];"
        "return all.map(e => e.tagName === 'A' ? 'link' : "
        "  (e.querySelector('summary') || e).innerText.trim());")
    solutions = [i for i, x in enumerate(order) if "Show the" in x]
    assert solutions and order.index("link") < solutions[0], order
    for d in driver.find_elements("css selector", "details.sd-dropdown"):
        summary = d.find_element("css selector", "summary")
        if "Show the" not in summary.text:  # a folded listing of part of a kernel, say
            continue
        summary.click()
        assert "__global__" in d.text, d.text[:200]
