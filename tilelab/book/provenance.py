"""The provenance box: which data files a page shows, and where and how they were measured.

``{provenance}`` leaves a placeholder; once the whole page is read (``doctree-read``) the
placeholder becomes a box listing every data file the page's tables, figures and values
used, plus any named in the directive. A page that shows data without the directive gets
the box appended at its end.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from tilelab.book import context
from tilelab.book.data import DataError, Missing, data_path


class provenance_placeholder(nodes.General, nodes.Element):
    """Replaced by the rendered box at doctree-read."""


class provenance_box(nodes.General, nodes.Element):
    """The box: in HTML a ``<details>`` element, closed, so a page opens on its text."""


def visit_box_html(self, node: provenance_box) -> None:
    self.body.append('<details class="tl-provenance">')


def depart_box_html(self, node: provenance_box) -> None:
    self.body.append("</details>")


def visit_box_title_html(self, node: nodes.title) -> None:
    self.body.append("<summary>")


def depart_box_title_html(self, node: nodes.title) -> None:
    self.body.append("</summary>")


class provenance_title(nodes.TextElement):
    """The box's one-line summary (``<summary>`` in HTML)."""


def visit_other(self, node: nodes.Element) -> None:
    """Builders other than HTML: the box's content as plain paragraphs."""


def depart_other(self, node: nodes.Element) -> None:
    pass


class Provenance(SphinxDirective):
    """``{provenance}`` [experiment ...]: the page's provenance box goes here."""

    optional_arguments = 20

    def run(self) -> list[nodes.Node]:
        for name in self.arguments:
            try:
                context.note_use(self.env, name)
            except DataError as exc:
                context.report(self.env, exc, self.get_location())
        return [provenance_placeholder(experiments=list(self.arguments))]


def _gpu_state(prov: dict) -> str:
    """The clocks and power limit recorded at the end of the run ("" where not recorded)."""
    bits = []
    if isinstance(prov.get("clocks_sm"), (int, float)):
        top = prov.get("clocks_max_sm")
        bits.append(f"SM clock {prov['clocks_sm']:.0f}"
                    + (f" of {top:.0f}" if isinstance(top, (int, float)) else "") + " MHz")
    if isinstance(prov.get("clocks_mem"), (int, float)):
        bits.append(f"memory clock {prov['clocks_mem']:.0f} MHz")
    if isinstance(prov.get("power_limit"), (int, float)):
        bits.append(f"power limit {prov['power_limit']:.0f} W")
    return ", ".join(bits)


def summary(prov: dict) -> str:
    """One line: where and with what a data file was measured."""
    parts = []
    if prov.get("gpu"):
        about = ", ".join(x for x in (
            f"compute capability {prov['compute_capability']}" if prov.get(
                "compute_capability") else "",
            f"{prov['sm_count']} SMs" if prov.get("sm_count") else "") if x)
        state = _gpu_state(prov)
        inner = "; ".join(x for x in (about, state) if x)
        parts.append(f"{prov['gpu']} ({inner})" if inner else str(prov["gpu"]))
    elif prov.get("backend"):
        parts.append(f"{prov['backend']} (no GPU"
                     + (f"; the limits of the {prov['describes_gpu']}" if prov.get(
                         "describes_gpu") else "") + ")")
    if prov.get("host_cpu") and prov["host_cpu"] not in ("x86_64", "aarch64"):
        parts.append(f"host {prov['host_cpu']}")
    for key, label in (("driver", "driver"), ("cuda_driver", "CUDA"), ("nvcc", "nvcc"),
                       ("pycuda", "PyCUDA"), ("numpy", "NumPy"), ("tilelab", "tilelab")):
        if prov.get(key):
            parts.append(f"{label} {prov[key]}")
    if prov.get("revision"):
        dirty = {True: ", uncommitted changes", False: ""}.get(prov.get("dirty"), "")
        parts.append(f"code {str(prov['revision'])[:10]}{dirty}")
    if prov.get("date"):
        parts.append(str(prov["date"]).replace("T", " ").replace("+00:00", " UTC"))
    return " · ".join(parts)


def render(app: Sphinx, experiments: list[str]) -> nodes.Element:
    """The box for ``experiments``: one item per data file, with where and when it was
    measured, and under it the command that wrote it and the method it used."""
    env = app.env
    box = provenance_box(classes=["tl-provenance"])
    box += provenance_title("", "Where the numbers on this page come from")
    box += nodes.paragraph("", "Every measured value, table and plot on this page is rendered "
                           "when the book is built, from these data files; none is typed in.")
    items = nodes.bullet_list()
    for name in experiments:
        path = data_path(context.data_dir(env), name)
        try:
            ds = context.dataset(env, name)
        except DataError as exc:
            context.report(env, exc, (env.docname, 0))
            ds = None
        para = nodes.paragraph()
        para += nodes.literal("", context.relpath(env, path))
        para += nodes.Text(" — ")
        item = nodes.list_item("", para)
        if ds is None:
            para.extend(context.missing_message(Missing(name)))
        else:
            para += nodes.Text(f"{ds.title}: {summary(ds.provenance)}")
            details = nodes.bullet_list(classes=["tl-provenance-how"])
            for key, label in (("command", "Command"), ("method", "Method")):
                value = ds.provenance.get(key)
                if value:
                    line = nodes.paragraph("", "", nodes.strong("", f"{label}: "))
                    line += nodes.literal("", str(value)) if key == "command" else nodes.Text(
                        str(value))
                    details += nodes.list_item("", line)
            if details.children:
                item += details
        items += item
    box += items
    return box


def on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    """Fill each placeholder; append a box to a page that used data but has none."""
    used = list(app.env.tilelab_used.get(app.env.docname, []))  # type: ignore[attr-defined]
    holders = list(doctree.findall(provenance_placeholder))
    if not holders and used:
        section = next(iter(doctree.findall(nodes.section)), doctree)
        holder = provenance_placeholder(experiments=[])
        section += holder
        holders = [holder]
    for holder in holders:
        names = list(dict.fromkeys([*holder["experiments"], *used]))
        holder.replace_self(render(app, names) if names else [])
