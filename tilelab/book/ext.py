"""Registration of the book extension with Sphinx, and the per-build bookkeeping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

from tilelab import __version__
from tilelab.book import exercise_table, mathml, provenance
from tilelab.book.directives import DIRECTIVES
from tilelab.book.roles import ROLES

STATIC = Path(__file__).parent / "static"


def _init_env(app: Sphinx) -> None:
    if not hasattr(app.env, "tilelab_used"):
        app.env.tilelab_used = {}  # type: ignore[attr-defined]
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def _launch_needs_a_repository(app: Sphinx, config: Any) -> None:
    """No launch buttons while the course is not published (``repository: url`` empty in
    _config.yml): a Colab button can only open a notebook from a public repository."""
    opts = dict(config.html_theme_options or {})
    if not str(opts.get("repository_url") or "").strip():
        opts["launch_buttons"] = {}
        config.html_theme_options = opts


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    getattr(env, "tilelab_used", {}).pop(docname, None)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: set[str],
           other: BuildEnvironment) -> None:
    used = env.tilelab_used  # type: ignore[attr-defined]
    for docname in docnames:
        used[docname] = other.tilelab_used.get(docname, [])  # type: ignore[attr-defined]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("tilelab_data_dir", "book/data", "env", [str])
    app.add_config_value("tilelab_strict", False, "env", [bool, str])
    for name, directive in {**DIRECTIVES, "provenance": provenance.Provenance,
                          "exercise-table": exercise_table.ExerciseTable}.items():
        app.add_directive(name, directive)
    for name, role in ROLES.items():
        app.add_role(name, role())
    app.add_node(provenance.provenance_placeholder)
    other = (provenance.visit_other, provenance.depart_other)
    app.add_node(provenance.provenance_box,
                 html=(provenance.visit_box_html, provenance.depart_box_html),
                 latex=other, text=other, man=other, texinfo=other)
    app.add_node(provenance.provenance_title,
                 html=(provenance.visit_box_title_html, provenance.depart_box_title_html),
                 latex=other, text=other, man=other, texinfo=other)
    mathml.setup(app)
    app.connect("config-inited", _launch_needs_a_repository)
    app.connect("builder-inited", _init_env)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("doctree-read", provenance.on_doctree_read)
    app.add_css_file("tilelab.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
