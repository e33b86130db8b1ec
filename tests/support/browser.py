"""Headless Chromium for the browser tests (Debian's chromium and chromium-driver: `make
browser` installs them)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def missing() -> str | None:
    """Why no browser test can run here (None: it can)."""
    gone = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    if gone:
        return (f"needs {' and '.join(gone)} on PATH: `make browser` installs Debian's "
                "chromium and chromium-driver")
    return None


def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium (its profile in ``profile``), quit at the end (a fixture's body)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                "--window-size=1280,1000"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                           options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()
