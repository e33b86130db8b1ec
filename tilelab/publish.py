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

from tilelab.catalog import exercises

CONFIG_FILE = "_config.yml"
SETUP_CELL_ID = "colab_setup"
GRADING_CELL_ID = "grading"  # the notebook's about cell: the book's chapter and the grading
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


def repository_ref(course_root: str | Path) -> str:
    """The branch or tag of the repository the notebooks install from (``_config.yml``'s
    ``repository: branch``; "main" where it names none)."""
    cfg = yaml.safe_load((Path(course_root) / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    return str((cfg.get("repository") or {}).get("branch") or "main").strip()


def setup_cell(url: str, ref: str = "main") -> str:
    """The source of the notebooks' set-up cell for a course published at ``url`` ("": not
    published yet: the cell installs an uploaded wheel, or says plainly how to get one),
    installing the package of its branch or tag ``ref``."""
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
    PACKAGE = WHEELS[-1] if WHEELS else f"tilelab @ git+{{COURSE_REPOSITORY}}@{ref}"
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


def write_setup_cells(notebooks: list[Path], url: str, ref: str = "main") -> list[Path]:
    """Write the set-up cell for ``url`` (at ``ref``) into each notebook; return those that
    changed."""
    changed = []
    text = setup_cell(url, ref)
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


# ---------------------------------------------------------------- the about cell

#: each registry chapter tag: the chapter's page (without suffix) and its title
CHAPTERS = {
    "book/naive": ("book/02-naive-matmul", "A naive matrix multiply"),
    "book/tiling": ("book/03-tiling", "Tiling with shared memory"),
    "book/banks": ("book/04-banks-padding", "Bank conflicts and padding"),
    "book/cublas": ("book/06-cublas", "Beyond padding: the road to cuBLAS"),
}


def book_url(url: str) -> str:
    """The published book of a course whose repository is ``url`` (GitHub Pages: the
    project site https://OWNER.github.io/NAME/); "" while the course is not published."""
    if not url:
        return ""
    owner, name = url.rstrip("/").split("/")[-2:]
    return f"https://{owner.lower()}.github.io/{name}/"


def chapter_line(url: str, chapter: str) -> str:
    """The sentence that sends a learner to the chapter: a link into the published book,
    or, before publication, the chapter's name and where its source is (a relative link
    would be dead in Colab or in a notebook opened alone)."""
    page, title = CHAPTERS[chapter]
    if url:
        return f"Read the chapter [{title}]({book_url(url)}{page}.html) first."
    return (f"Read the chapter [{title}](../../{page}.md) first (the book is not published "
            f"yet: in the course's repository it is `{page}.md`, and `make book` builds it).")


def _points(n: float) -> str:
    return f"{n:g} point" + ("" if n == 1 else "s")


def _lesson(ex: exercises.Exercise) -> str:
    """What the GPU's own counters must show for the speed points (the lesson gate)."""
    if ex.max_bank_degree is not None:
        return "the padded tile (shared-memory wavefronts per request near 1)"
    if ex.needs_shared:
        return ("the shared tile (shared-memory loads and stores, and global accesses that "
                "move no more sectors than coalesced ones)")
    if ex.reuses_tiles:
        return "tiles reused (global bytes per multiply-add well under an untiled kernel's)"
    return "coalesced global accesses"


def grading_line(ex: exercises.Exercise) -> str:
    """What one step is graded on, from the registry (the gates the grader applies)."""
    head = f"- `{ex.kernel}` ({ex.id}): {_points(ex.points_correct)} if correct on every shape"
    if not ex.speed_graded:
        return head + " (graded for correctness only)."
    shape = ", ".join(str(s) for s in ex.speed_shape)
    line = (f"{head}, {_points(ex.points_speed)} if at least {ex.gate:g}x faster than "
            f"{ex.baseline.label} at ({shape}) on a GPU")
    if ex.must_beat is not None:
        line += f", and faster than {ex.must_beat.label}"
    line += f", with the GPU's own counters showing {_lesson(ex)}"
    line += "; without a GPU, no speed points"
    if ex.max_bank_degree is not None:
        line += (": the emulator shows the worst shared-memory access line's bank-conflict "
                 "degree (1 = conflict-free, 32 = fully serialised; a padded tile: at most "
                 f"{ex.max_bank_degree:g}) as feedback")
    return line + "."


#: a step's own "Graded:" line in a notebook's markdown, naming its exercise id
STEP_LINE = re.compile(r"^Graded: `[^`\n]*` \((?P<id>[a-z0-9_]+)\):[^\n]*$", re.M)


def step_line(ex: exercises.Exercise) -> str:
    """A step's "Graded:" line: its exercise's :func:`grading_line`, as a sentence."""
    return "Graded: " + grading_line(ex)[2:]


def notebook_step_lines(path: str | Path) -> dict[str, list[str]]:
    """Every step's "Graded:" line in one notebook, by the exercise id it names."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {}
    for cell in nb["cells"]:
        if cell.get("cell_type") != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for m in STEP_LINE.finditer(src):
            found.setdefault(m["id"], []).append(m.group(0))
    return found


def _with_step_lines(nb: dict) -> bool:
    """Rewrite every step's "Graded:" line of ``nb`` from the registry; whether any did."""
    changed = False
    for cell in nb["cells"]:
        if cell.get("cell_type") != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        new = STEP_LINE.sub(lambda m: step_line(exercises.get(m["id"])), src)
        if new != src:
            cell["source"] = new.splitlines(keepends=True)
            changed = True
    return changed


def about_cell(assignment: str, url: str) -> str:
    """The notebook's about cell, generated at release: the chapter to read and how each
    step is graded, both from the registry and ``_config.yml``."""
    ids = exercises.ASSIGNMENTS[assignment]
    chapters = dict.fromkeys(exercises.get(i).chapter for i in ids)
    total = sum(exercises.get(i).points_correct + exercises.get(i).points_speed for i in ids)
    lines = [chapter_line(url, c) for c in chapters]
    lines += ["", f"Grading ({total:g} points; every kernel is checked on fresh random inputs "
              "at several shapes, most of them not multiples of the block):", ""]
    lines += [grading_line(exercises.get(i)) for i in ids]
    lines += ["", "Without a GPU, kernels run on the course's CPU emulator: it checks "
              "correctness, looks for shared-memory races and counts bank conflicts; speed "
              "is not measured there."]
    return "\n".join(lines)


def _cells_with(nb: dict, grade_id: str) -> list[dict]:
    return [c for c in nb["cells"]
            if (c.get("metadata") or {}).get("nbgrader", {}).get("grade_id") == grade_id]


def notebook_about_cell(path: str | Path) -> str | None:
    """The about cell's source in one notebook (None when it has none)."""
    cells = _cells_with(json.loads(Path(path).read_text(encoding="utf-8")), GRADING_CELL_ID)
    if not cells:
        return None
    src = cells[0]["source"]
    return "".join(src) if isinstance(src, list) else src


def write_about_cells(notebooks: dict[str, Path], url: str) -> list[Path]:
    """Write each assignment's about cell, and each of its steps' "Graded:" lines, from the
    registry (``notebooks``: assignment -> its source notebook); return the notebooks that
    changed."""
    changed = []
    for assignment, path in notebooks.items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = _cells_with(nb, GRADING_CELL_ID)
        if not cells:
            raise PublishError(f"{path}: no {GRADING_CELL_ID!r} cell to write the grading into")
        lines = about_cell(assignment, url).splitlines(keepends=True)
        steps_changed = _with_step_lines(nb)
        if cells[0]["source"] != lines or steps_changed:
            cells[0]["source"] = lines
            path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                            encoding="utf-8")
            changed.append(path)
    return changed
