"""``{kernel-listing}``: a marked section of a shipped kernel, with the lines that changed
since another kernel's same section highlighted.

A section is the text between the lines ``// [NAME-begin]`` and ``// [NAME-end]`` of a file
in ``tilelab/kernels``; the listing numbers its lines as the file does. The highlighted
lines are the ones difflib finds inserted or replaced against the ``against`` file's
section, so a listing follows its kernel whenever either file changes.
"""

from __future__ import annotations

import difflib
import re
from importlib import resources
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from tilelab.catalog.reference import kernel_file


class SectionError(ValueError):
    """A file has no such section, or its markers are malformed."""


def section(text: str, name: str) -> tuple[int, list[str]]:
    """The first line number (1-based, in the file) and the lines of section ``name``."""
    lines = text.split("\n")
    begin = [i for i, ln in enumerate(lines) if re.search(rf"//\s*\[{re.escape(name)}-begin\]", ln)]
    end = [i for i, ln in enumerate(lines) if re.search(rf"//\s*\[{re.escape(name)}-end\]", ln)]
    if len(begin) != 1 or len(end) != 1 or end[0] <= begin[0] + 1:
        raise SectionError(f"needs exactly one '// [{name}-begin]' line and one later "
                           f"'// [{name}-end]' line around the section")
    return begin[0] + 2, lines[begin[0] + 1 : end[0]]


def changed(new: list[str], old: list[str]) -> list[int]:
    """1-based positions in ``new`` of the lines inserted or replaced since ``old``
    (compared without leading and trailing blanks; blank lines never count)."""
    sm = difflib.SequenceMatcher(a=[ln.strip() for ln in old], b=[ln.strip() for ln in new],
                                 autojunk=False)
    out = []
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(j + 1 for j in range(j1, j2) if new[j].strip())
    return out


class KernelListing(SphinxDirective):
    """``{kernel-listing} sgemm_04_warptile.cu`` with ``:section: core`` and
    ``:against: sgemm_03_vectorized.cu``; ``:caption:`` and ``:name:`` as for code blocks."""

    required_arguments = 1
    option_spec: ClassVar[dict] = {
        "section": directives.unchanged_required,
        "against": directives.unchanged,
        "caption": directives.unchanged,
        "name": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        name = self.options.get("section", "core")
        fname = self.arguments[0]
        try:
            start, lines = section(kernel_file(fname), name)
            marked: list[int] = []
            if self.options.get("against"):
                _, old = section(kernel_file(self.options["against"]), name)
                marked = changed(lines, old)
        except (OSError, SectionError) as exc:
            raise self.error(f"kernel-listing {fname} [{name}]: {exc}") from None
        for f in (fname, self.options.get("against")):
            if f:
                self.env.note_dependency(str(resources.files("tilelab").joinpath("kernels", f)))
        body = "\n".join(lines)
        block = nodes.literal_block(body, body, classes=["tl-kernel-listing"])
        block["language"] = "cuda"
        block["linenos"] = True
        block["highlight_args"] = {"linenostart": start, "hl_lines": marked}
        if "caption" not in self.options:
            self.add_name(block)
            return [block]
        title = self.options["caption"]
        wrapper = nodes.container("", classes=["literal-block-wrapper"], literal_block=True)
        wrapper += nodes.caption(title, "", *self.parse_inline(title, lineno=self.lineno)[0])
        wrapper += block
        self.add_name(wrapper)
        return [wrapper]
