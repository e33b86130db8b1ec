"""What the directives and roles share: where the data are, what a page used, missing notes.

``TILELAB_BOOK_DATA`` points the build at another data folder (the tests use their
example files); ``TILELAB_BOOK_STRICT=1`` turns every missing value into a warning, so a
build with a complete data set proves that every reference on every page resolves.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

from tilelab import settings
from tilelab.book.data import DataError, Dataset, Missing, data_path, load, missing_hint

logger = logging.getLogger("tilelab.book")
DATA_ENV, STRICT_ENV = settings.BOOK_DATA.name, settings.BOOK_STRICT.name
_CACHE: dict[tuple[str, float], Dataset | None] = {}


def data_dir(env: BuildEnvironment) -> Path:
    """The folder of data files this build reads."""
    base = Path(settings.BOOK_DATA.get() or env.config.tilelab_data_dir)
    return base if base.is_absolute() else Path(env.srcdir) / base


def strict(env: BuildEnvironment) -> bool:
    value = settings.BOOK_STRICT.get()
    if value is None:
        return str(env.config.tilelab_strict).strip().lower() in settings.TRUE
    return value


def dataset(env: BuildEnvironment, experiment: str) -> Dataset | None:
    """Load (once per file version) the data of ``experiment`` and note the page uses it."""
    path = data_path(data_dir(env), experiment)
    note_use(env, experiment)
    mtime = path.stat().st_mtime if path.is_file() else -1.0
    key = (str(path), mtime)
    if key not in _CACHE:
        _CACHE[key] = load(data_dir(env), experiment)
    return _CACHE[key]


def loader(env: BuildEnvironment):
    """A loader for :mod:`tilelab.book.expr` bound to this build."""
    return lambda experiment: dataset(env, experiment)


def note_use(env: BuildEnvironment, experiment: str) -> None:
    """Record that the current page shows data of ``experiment`` (for its provenance box)."""
    used: dict[str, list[str]] = env.tilelab_used  # type: ignore[attr-defined]
    names = used.setdefault(env.docname, [])
    if experiment not in names:
        names.append(experiment)
        env.note_dependency(str(data_path(data_dir(env), experiment)))


def relpath(env: BuildEnvironment, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(env.srcdir).resolve()).as_posix()
    except ValueError:
        return str(path)


def report(env: BuildEnvironment, exc: Exception, location: tuple[str, int] | None) -> None:
    """Warn about an authoring error; a missing data file is no error (unless strict)."""
    if isinstance(exc, DataError):
        logger.warning(str(exc), location=location, type="tilelab", subtype="data")
    elif isinstance(exc, Missing):
        if strict(env):
            logger.warning(f"strict: {exc}", location=location, type="tilelab", subtype="missing")
        else:
            logger.info(f"tilelab.book: {exc}", location=location)


def missing_message(exc: Missing) -> list[nodes.Node]:
    """Nodes explaining what is missing and how to produce it."""
    phrase, cmd, where = missing_hint(exc.experiment)
    lead = f"not in the data yet ({exc.detail})" if exc.detail else phrase
    return [nodes.Text(f"{lead} — run "), nodes.literal(cmd, cmd), nodes.Text(f" {where}")]


def missing_inline(exc: Missing) -> nodes.Node:
    """A short inline marker ("not measured yet" for a GPU experiment, whether the file or
    only the row is missing); hovering shows what is missing and the command that makes it."""
    phrase, cmd, where = missing_hint(exc.experiment)
    text = f"[{exc.experiment}: {phrase}]"
    why = f"{exc.detail}; " if exc.detail else ""
    return nodes.abbreviation(text, text, explanation=f"{why}run {cmd} {where}",
                              classes=["tl-missing"])


def missing_block(exc: Missing, what: str) -> nodes.admonition:
    box = nodes.admonition(classes=["note", "tl-missing"])
    phrase = missing_hint(exc.experiment)[0]
    box += nodes.title("", f"{what}: {phrase}" if not exc.detail else f"{what}: no data")
    box += nodes.paragraph("", "", *missing_message(exc))
    return box
