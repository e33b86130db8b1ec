"""Where the course is published, and the notebooks' set-up cell that installs from there.

One place names the course's public repository: ``repository: url`` in ``_config.yml``
(the book's launch buttons read it too). An empty value means "not published yet". The
release step (``tilelab release``) writes the set-up cell rendered
from it into every source notebook before nbgrader releases them, so the notebooks, the
book and the configuration cannot disagree (a test compares them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

CONFIG_FILE = "_config.yml"
SETUP_CELL_ID = "colab_setup"
GITHUB = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
WHEEL_GLOB = "tilelab-*.whl"


class PublishError(ValueError):
    """A repository URL the notebooks cannot install from; the message says what to set."""


def repository_url(course_root: str | Path) -> str:
    """The course's public repository from ``_config.yml`` ("" when not set yet)."""
    path = Path(course_root) / CONFIG_FILE
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise PublishError(f"no {CONFIG_FILE} in {course_root}: run this from the course's "
                           "repository") from None
    url = str(((cfg.get("repository") or {}).get("url")) or "").strip().rstrip("/")
    if url and not GITHUB.fullmatch(url):
        raise PublishError(
            f"{CONFIG_FILE}: repository url {url!r} is not a GitHub repository "
            "(https://github.com/OWNER/NAME); Colab opens notebooks from GitHub only. "
            "Set it to your course's repository, or to \"\" while it is not published."
        )
    return url


def setup_cell(url: str) -> str:
    """The source of the notebooks' set-up cell for a course published at ``url`` ("": not
    published yet: the cell installs an uploaded wheel, or says plainly how to get one)."""
    repo = f'"{url}"' if url else '""  # not published yet'
    return f'''# Set-up for Google Colab (Runtime > Change runtime type > GPU): installs PyCUDA and
# the course package. Anywhere else this cell does nothing. The course's release step
# writes COURSE_REPOSITORY from its _config.yml (repository: url).
import glob
import sys

COURSE_REPOSITORY = {repo}
IN_COLAB = "google.colab" in sys.modules
WHEELS = sorted(glob.glob("{WHEEL_GLOB}"))  # the course's wheel, if you uploaded one
if IN_COLAB and (WHEELS or COURSE_REPOSITORY):
    PACKAGE = WHEELS[-1] if WHEELS else f"tilelab @ git+{{COURSE_REPOSITORY}}"
    !pip install -q pycuda "{{PACKAGE}}"
elif IN_COLAB:
    print(
        "This course has not been published in a repository yet, so there is nothing to "
        "install from. Ask your instructor for the course's wheel ({WHEEL_GLOB}, made by "
        "`python -m build` in the course's repository), upload it with the folder icon on "
        "the left, and run this cell again."
    )'''


def _setup_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"]
            if (c.get("metadata") or {}).get("nbgrader", {}).get("grade_id") == SETUP_CELL_ID]


def notebook_setup_cell(path: str | Path) -> str | None:
    """The set-up cell's source in one notebook (None when it has none)."""
    cells = _setup_cells(json.loads(Path(path).read_text(encoding="utf-8")))
    if not cells:
        return None
    src = cells[0]["source"]
    return "".join(src) if isinstance(src, list) else src


def write_setup_cells(notebooks: list[Path], url: str) -> list[Path]:
    """Write the set-up cell for ``url`` into each notebook; return those that changed."""
    changed = []
    text = setup_cell(url)
    for path in notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = _setup_cells(nb)
        if not cells:
            raise PublishError(f"{path}: no {SETUP_CELL_ID!r} cell to write the set-up into")
        lines = text.splitlines(keepends=True)
        if cells[0]["source"] != lines:
            cells[0]["source"] = lines
            text_out = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
            path.write_text(text_out, encoding="utf-8")
            changed.append(path)
    return changed
