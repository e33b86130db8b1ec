"""What in an HTML page a browser would run: script elements, event handlers, script URLs.

The pages nbconvert writes carry scripts and handlers of their own (MathJax, require.js,
formgrader's buttons): a page is judged against those of the same template's empty
notebook.
"""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

ACTIVE_TAGS = {"script", "iframe", "object", "embed", "frame", "applet", "base"}
URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc"}


class _Active(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            value = (value or "").strip().lower().replace("\t", "").replace("\n", "")
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name in URL_ATTRS and value.startswith(("javascript:", "vbscript:",
                                                       "data:text/html")):
                self.found.append(f"<{tag} {name}={value[:40]}>")
        if tag == "script":
            self._in_script = True
            src = dict(attrs).get("src") or ""
            self.scripts.append(f"src:{src}" if src else "")
        elif tag in ACTIVE_TAGS:
            self.found.append(f"<{tag}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and self.scripts and not self.scripts[-1].startswith("src:"):
            self.scripts[-1] += data


def active_content(page: str, baseline: str = "") -> list[str]:
    """Everything active in ``page`` beyond the scripts ``baseline`` (the same template's
    page of an empty notebook) already has."""
    seen, base = _Active(), _Active()
    seen.feed(page)
    base.feed(baseline)
    known = {s.strip() for s in base.scripts}
    extra = [f"<script>{s.strip()[:80]}" for s in seen.scripts if s.strip() not in known]
    own = Counter(base.found)  # the template's own handlers (formgrader's buttons)
    return list((Counter(seen.found) - own).elements()) + extra
