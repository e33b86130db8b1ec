"""Inline roles: ``{measured}`` (one value), ``{compare}`` (A vs B), ``{claim}`` (a
sentence the data must bear out), ``{exercise}`` (a notebook)."""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.util.docutils import SphinxRole

from tilelab.book import context, expr
from tilelab.book.data import DataError, Missing


class Measured(SphinxRole):
    """``{measured}`matmul[kernel=naive,n=4096].gflops :,.0f``` -> the value, from the data."""

    def render(self) -> str:
        return expr.parse(self.text).render(context.loader(self.env))

    def experiments(self) -> list[str]:
        return expr.parse(self.text).experiments

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        self.text = " ".join(self.text.split())  # a role may wrap across lines
        try:
            for name in self.experiments():
                context.note_use(self.env, name)
            text = self.render()
        except (Missing, DataError) as exc:
            context.report(self.env, exc, self.get_location())
            if isinstance(exc, Missing):
                return [context.missing_inline(exc)], []
            return [nodes.inline("", f"[{exc}]", classes=["tl-error"])], []
        node = nodes.inline(text, text, classes=["tl-measured"])
        return [node], []


class Compare(Measured):
    """``{compare}`A vs B``` -> e.g. "1.27× slower" (times) or "1.36× faster" (rates)."""

    def render(self) -> str:
        return expr.compare(self.text, context.loader(self.env))

    def experiments(self) -> list[str]:
        return expr.compare_experiments(self.text)


class Claim(SphinxRole):
    """``{claim}`padding made it slower :: A > B``` -> the sentence, as written, checked at
    build time: where the data contradict a condition, a warning (a build with ``-W``
    fails), so that data measured again cannot leave a qualitative sentence false."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        text = " ".join(self.text.split())
        try:
            claim = expr.parse_claim(text)
            for name in claim.experiments:
                context.note_use(self.env, name)
            failed = claim.failed(context.loader(self.env))
        except DataError as exc:
            context.report(self.env, exc, self.get_location())
            return [nodes.inline("", f"[{exc}]", classes=["tl-error"])], []
        except Missing as exc:  # not measured yet: the sentence stands, unchecked
            context.report(self.env, exc, self.get_location())
            sentence = text.partition("::")[0].strip()
            return [nodes.inline(sentence, sentence, classes=["tl-claim"])], []
        if failed:
            context.report(self.env, DataError(
                f"the data contradict the sentence {claim.text!r}: " + "; ".join(failed)),
                self.get_location())
        return [nodes.inline(claim.text, claim.text,
                             classes=["tl-claim", *(["tl-claim-false"] if failed else [])])], []


class Exercise(SphinxRole):
    """``{exercise}`Exercise 1 <exercises/01-naive/naive.ipynb>``` -> links to the notebook.

    Links to the notebook's page when it is part of this build, and always to Colab and to
    the .ipynb file in the repository; a notebook not written yet is no broken link.
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        m = re.fullmatch(r"\s*(.*?)\s*<([^>]+\.ipynb)>\s*", self.text, re.S)
        title, path = (m.group(1), m.group(2)) if m else (self.text.strip(), self.text.strip())
        path = path.lstrip("/")
        docname = path[: -len(".ipynb")]
        out: list[nodes.Node] = []
        if docname in self.env.found_docs:
            ref = pending_xref("", refdomain="std", reftype="doc", reftarget="/" + docname,
                               refexplicit=True, refwarn=True, refdoc=self.env.docname)
            ref += nodes.inline(title, title)
            out.append(ref)
        else:
            out.append(nodes.strong(title, title))
            out.append(nodes.Text(" ("))
            out.append(nodes.literal(path, path))
            out.append(nodes.Text(")"))
        links = _external_links(self.env.config, path)
        if links:
            out.append(nodes.Text(" — "))
            for i, (label, url) in enumerate(links):
                if i:
                    out.append(nodes.Text(" · "))
                out.append(nodes.reference(label, label, refuri=url, classes=["tl-launch"]))
        return [nodes.inline("", "", *out, classes=["tl-exercise"])], []


def _external_links(config, path: str) -> list[tuple[str, str]]:
    opts = dict(config.html_theme_options or {})
    repo = str(opts.get("repository_url") or "").rstrip("/")
    branch = str(opts.get("repository_branch") or "main")
    colab = str((opts.get("launch_buttons") or {}).get("colab_url") or "").rstrip("/")
    if not repo.startswith("https://github.com/"):
        return []
    slug = repo[len("https://github.com/") :]
    links = []
    if colab:
        links.append(("open in Colab", f"{colab}/github/{slug}/blob/{branch}/{path}"))
    links.append(("download .ipynb", f"{repo}/raw/{branch}/{path}"))
    return links


ROLES = {"measured": Measured, "compare": Compare, "claim": Claim, "exercise": Exercise}
