"""Submitted and source notebooks, read with nbformat and never executed.

A kernel is read from its ``kernel_<exercise>`` cell as the string literal the cell
assigns (:func:`ast.literal_eval`: nothing runs); an executed notebook tells which cells a
time limit stopped, and whether an output shows a run of the course's solution lines that
its author did not submit (counted for the instructor, never removed).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import nbformat

from tilelab.catalog import exercises
from tilelab.classroom.course import kernel_cell_id, test_cell_id, test_kinds

SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
#: What reading a file that is not a sound notebook raises.
NOTEBOOK_READ_LIMIT = 64 * 1024**2  # the most of a submitted notebook ever read
NOTEBOOK_LIMIT = 16 * 1024**2  # a submitted notebook larger than this is not graded
SUBMISSION_LIMIT = 256 * 1024**2  # nor a submission whose files add up to more
#: nor one of more files (nbgrader's copy and ignore rules take time quadratic in the count)
FILE_COUNT_LIMIT = 500
UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
              nbformat.ValidationError)


class KernelCellError(ValueError):
    """A submitted notebook has no gradable kernel cell; the message says why."""


def read(path: Path) -> nbformat.NotebookNode:
    """A notebook as nbformat reads it (version 4, multi-line text joined); a notebook that
    fails validation is still read (a learner's edits must not hide their kernel)."""
    return nbformat.read(path, as_version=4, capture_validation_error={})


def _grade_id(cell: Any) -> str:
    """A cell's nbgrader grade id; "" for a cell whose metadata is missing or malformed (a
    malformed cell costs that cell only)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return gid if isinstance(gid, str) else ""


def _utf8(name: str) -> bool:
    """Whether a file name (as ``os.walk`` gives it) is UTF-8 text: a name of other bytes
    comes with surrogates, which nbgrader, JSON and the gradebook cannot hold."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unsafe_entries(folder: Path, limit: int = 5) -> list[str]:
    """What in a submission folder is neither a plain file nor a folder: symbolic links
    (nbgrader's copy and every reader follow them, to the gradebook, the solutions or
    /dev/zero), files with another name on this disk (a hard link is a plain file to
    every reader, and its bytes may be the gradebook's or the solutions'), named pipes,
    sockets, device nodes, and names that are not UTF-8 text; the folder itself included.
    At most ``limit`` names, relative to ``folder``."""
    found: list[str] = []
    for path in (folder.parent, folder):
        if path.is_symlink():
            return [f"{path.name} (a symbolic link)"]
    if not folder.is_dir():
        return []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in (*dirs, *files):
            path = Path(root, name)
            st = path.lstat()
            mode = st.st_mode
            if not _utf8(name):
                shown = os.fsencode(path.relative_to(folder)).decode("utf-8", "backslashreplace")
                found.append(f"{shown} (a name that is not UTF-8 text: rename it)")
            elif stat.S_ISLNK(mode):
                found.append(f"{path.relative_to(folder)} (a symbolic link)")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(f"{path.relative_to(folder)} (not a plain file)")
            elif stat.S_ISREG(mode) and st.st_nlink > 1:
                found.append(f"{path.relative_to(folder)} (a hard link: the file has another "
                             "name on this disk)")
            if len(found) >= limit:
                return found
    return found


def _mib(n: int) -> str:
    return f"{n / 1024**2:.0f} MiB" if n >= 1024**2 else f"{n} bytes"


def oversized(folder: Path, file_limit: int, limit: int = 5) -> list[str]:
    """The files of a submission too large to grade, by their apparent size (``st_size``:
    a sparse file of 2 GiB is 2 GiB to every reader and copier, though 0 bytes on disk),
    checked before anything reads or copies them: a notebook over ``NOTEBOOK_LIMIT``, any
    file over ``file_limit`` (nbgrader's ``CourseDirectory.max_file_size``), the whole
    over ``SUBMISSION_LIMIT``. Links are not followed (:func:`unsafe_entries` names them)."""
    found: list[str] = []
    total = 0
    if folder.is_symlink() or not folder.is_dir():
        return found
    count = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        count += len(files)
        if count > FILE_COUNT_LIMIT:
            return [*found, f"more than {FILE_COUNT_LIMIT} files (a submission may hold at "
                    f"most {FILE_COUNT_LIMIT})"]
        for name in files:
            path = Path(root, name)
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue
            total += st.st_size
            cap, what = ((NOTEBOOK_LIMIT, "a notebook") if name.endswith(".ipynb")
                         else (file_limit, "a file"))
            if st.st_size > cap:
                found.append(f"{path.relative_to(folder)} ({_mib(st.st_size)}; {what} may be "
                             f"at most {_mib(cap)})")
            if len(found) >= limit:
                return found
    if total > SUBMISSION_LIMIT:
        found.append(f"files of {_mib(total)} in all (a submission may be at most "
                     f"{_mib(SUBMISSION_LIMIT)})")
    return found


def refused_entries(folder: Path, file_limit: int) -> list[str]:
    """Why a submission folder is not graded at all (links, special files, sizes); []
    when it may be read."""
    return unsafe_entries(folder) or oversized(folder, file_limit)


def refusal(entries: list[str]) -> str:
    """The learner's sentence for a refused submission."""
    if any(" at most " in e for e in entries):
        return (f"the submission holds {', '.join(entries)}; nothing of it was read, copied "
                "or run. Remove the large files (or clear the notebook's outputs) and submit "
                "again")
    return (f"the submission holds {', '.join(entries)}; a submission may hold only plain "
            "files and folders with names of UTF-8 text. Replace links with copies of the "
            "files, rename or remove the rest, and submit again")


def unreadable_timestamp(folder: Path) -> str | None:
    """Why nbgrader cannot read the submission's ``timestamp.txt`` as a time (it then fails
    the whole notebook), in a learner's words; None where it can, or there is none."""
    from nbgrader.utils import parse_utc

    path = folder / "timestamp.txt"
    if path.is_symlink() or not path.is_file():
        return None
    with open(path, "rb") as f:
        text = f.read(1024).decode("utf-8", "replace").strip()
    try:
        parse_utc(text)
    except Exception:  # dateutil's ParserError, OverflowError, ValueError...
        return (f"its timestamp.txt does not hold a time nbgrader can read ({text[:40]!r}); "
                "nbgrader submit writes one, such as 2026-01-31 17:00:00 UTC: submit with "
                "it, or remove the file")
    return None


def read_capped(path: Path) -> str:
    """The first ``NOTEBOOK_READ_LIMIT`` bytes of a file, as text ("" if unreadable)."""
    try:
        with open(path, "rb") as f:
            return f.read(NOTEBOOK_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


def _cells(path: Path) -> list[Any]:
    """The cells of a notebook as nbformat reads them; where nbformat cannot (a cell's
    metadata malformed), as the JSON has them, so a broken cell costs that cell only."""
    try:
        return list(read(path).cells)
    except FileNotFoundError:
        raise
    except UNREADABLE:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"] if isinstance(nb, dict) else None
        if not isinstance(cells, list):
            raise
        return [dict(c, source="".join(c["source"]) if isinstance(c.get("source"), list)
                     else c.get("source", "")) for c in cells if isinstance(c, dict)]


def json_cells(text: str) -> list[Any]:
    """A notebook's cells as its JSON has them, each source joined, without nbformat's
    validation (whose time grows with the cell count: 12 s for 60,000 empty cells);
    :data:`UNREADABLE` errors where it is not a notebook's JSON."""
    nb = json.loads(text)
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ValueError("no list of cells")
    return [dict(c, source=_text_of(c.get("source", ""))) for c in cells if isinstance(c, dict)]


def _text_of(source: Any) -> str:
    return "".join(map(str, source)) if isinstance(source, list) else str(source)


def extract_kernel(notebook_path: str | Path, exercise_id: str,
                   cells: list[Any] | None = None) -> str:
    """The kernel source in a submitted notebook's ``kernel_<exercise>`` cell, read without
    executing anything (``cells``: the notebook's, already read); :class:`KernelCellError`
    when it cannot be read."""
    grade_id = kernel_cell_id(exercise_id)
    path = Path(notebook_path)
    if cells is not None:
        return _kernel_of(path, cells, grade_id, exercise_id)
    size = path.stat().st_size if path.is_file() else 0
    if size > NOTEBOOK_READ_LIMIT:  # never read a huge file whole
        raise KernelCellError(
            f"{path.name} is {size >> 20} MiB, more than the {NOTEBOOK_READ_LIMIT >> 20} MiB "
            "a notebook may be; clear its outputs and submit it again.")
    try:
        cells = _cells(path)
    except FileNotFoundError:
        others = sorted(p.name for p in path.parent.glob("*.ipynb"))
        raise KernelCellError(
            f"the notebook {path.name} was not submitted"
            + (f" (the folder holds {', '.join(others)}: the wrong assignment?)" if others else "")
        ) from None
    except UNREADABLE as exc:
        why = "its JSON is nested too deeply to read" if isinstance(exc, RecursionError) else exc
        raise KernelCellError(f"{path.name} is not a readable notebook ({why})") from None
    return _kernel_of(path, cells, grade_id, exercise_id)


def _kernel_of(path: Path, cells: list[Any], grade_id: str, exercise_id: str) -> str:
    found = [c for c in cells if _grade_id(c) == grade_id]
    if len(found) > 1:
        raise KernelCellError(
            f"{path.name} has {len(found)} cells with grade id {grade_id!r} (a copied kernel "
            "cell?); keep one, delete the others, and submit again.")
    cell = found[0] if found else None
    if cell is None:
        raise KernelCellError(_missing_cell(path, grade_id, {_grade_id(c) for c in cells}))
    return kernel_from_cell(str(cell.get("source", "")), grade_id,
                            exercises.get(exercise_id).variable)


def deleted_tests(path: Path, assignment: str) -> list[str]:
    """A sentence for each hidden-test cell of ``assignment`` that the submitted notebook
    no longer holds (its points still come from the grader's verdict, but nbgrader's
    feedback lists only the cells a notebook holds, so its total would not add up); none
    for a notebook that cannot be read (that is said elsewhere)."""
    try:
        ids = {_grade_id(c) for c in _cells(path)}
    except (*UNREADABLE, FileNotFoundError):
        return []
    out = []
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        ex = exercises.get(exercise_id)
        for kind in test_kinds(exercise_id):
            cell = test_cell_id(exercise_id, kind)
            if cell not in ids:
                most = ex.points_correct if kind == "correct" else ex.points_speed
                out.append(f"the hidden-test cell {cell} was deleted from {path.name}; its "
                           f"{most:g} point(s) come from the grader's verdict, which the "
                           "feedback's header counts, though no cell below shows them")
    return out


def _missing_cell(path: Path, grade_id: str, ids: set[str]) -> str:
    """Why a notebook has no kernel cell ``grade_id``: another assignment's, or deleted."""
    mine = next((e.assignment for e in exercises.EXERCISES.values()
                 if kernel_cell_id(e.id) == grade_id), None)
    found = {e.assignment for e in exercises.EXERCISES.values() if kernel_cell_id(e.id) in ids}
    other = next(iter(sorted(found)), None) if mine not in found else None
    if other is not None:
        return (
            f"{path.name} is the notebook of assignment {other}, not of the assignment it "
            "was submitted as; submit the right notebook."
        )
    return (
        f"no kernel cell {grade_id!r} in {path.name}: the cell holding the kernel was "
        "deleted or replaced; copy it back from the released notebook."
    )


def kernel_from_cell(source: str, grade_id: str = "the kernel cell",
                     name: str | None = None) -> str:
    """The string literal a kernel cell assigns to ``name`` (``KERNEL = r\"\"\"...\"\"\"``),
    the name the released notebook gives it, which its checks and hidden tests pass to the
    grader; where ``name`` is None, the cell's one string assigned last. What the cell binds
    ``name`` to last must be that literal: anything else (a sum of strings, a call, another
    statement that rebinds it) is refused with what to write, since the grader reads the
    cell without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise KernelCellError(
            f"{grade_id} is not valid Python (line {exc.lineno}: {exc.msg}); it must be "
            f'{name or "NAME"} = r"""<your CUDA C>"""'
        ) from None
    except (MemoryError, RecursionError):  # an expression nested thousands of levels deep
        raise KernelCellError(
            f"{grade_id} is nested too deeply for Python to read (thousands of operators or "
            f'brackets in a row?); it must be {name or "NAME"} = r"""<your CUDA C>"""'
        ) from None
    if name is not None:
        return _assigned_to(tree, name, grade_id)
    found: tuple[str, str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            names = _assigned_names(node)
            if found and found[0] in names:
                found = None  # the literal was rebound: what ran is not what we can read
            if names and node.value is not None and isinstance(value := _literal(node.value),
                                                               str):
                found = (names[0], value)
    if found is None:
        raise KernelCellError(
            f"{grade_id} does not assign the kernel as a plain string literal "
            '(NAME = r"""<your CUDA C>"""); the grader reads the literal without running '
            "the cell, so build the source in the string itself."
        )
    return found[1]


def _assigned_names(node: ast.Assign | ast.AnnAssign) -> list[str]:
    """The plain names an assignment statement sets (``A = B = ...``, ``A: str = ...``)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _literal(node: ast.expr) -> object:
    """A node's value where it is a literal (None where it is not)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def _binds(node: ast.AST, name: str) -> bool:
    """Whether ``node`` itself binds ``name`` in the cell's namespace (an assignment's
    target, a loop's, an import, a definition, a ``del``, a walrus, ``global``)."""
    if isinstance(node, ast.Name):
        return node.id == name and isinstance(node.ctx, ast.Store | ast.Del)
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Global | ast.Nonlocal):
        return name in node.names
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        return node.name == name
    return False


def _rebinds(statement: ast.stmt, name: str) -> bool:
    """Whether a top-level statement binds ``name`` anywhere in it: a function's or class's
    body only through ``global`` (its other names are its own)."""
    todo: list[ast.AST] = [statement]
    while todo:
        node = todo.pop()
        if _binds(node, name):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if any(_binds(n, name) for n in ast.walk(node) if isinstance(n, ast.Global)):
                return True
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _assigned_to(tree: ast.Module, name: str, grade_id: str) -> str:
    """The literal the cell's last binding of ``name`` assigns (see :func:`kernel_from_cell`)."""
    last = None
    for statement in tree.body:
        if _rebinds(statement, name):
            last = statement
    plain = (isinstance(last, ast.Assign) and all(isinstance(t, ast.Name) for t in last.targets)
             ) or isinstance(last, ast.AnnAssign)
    if plain and last is not None and last.value is not None and isinstance(
            value := _literal(last.value), str):
        return value
    if last is None:
        others = sorted({n for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                         for n in _assigned_names(node)})
        raise KernelCellError(
            f"{grade_id} does not assign {name}, the name the released notebook gives the "
            "kernel (its checks and tests read that name)"
            + (f"; it assigns {', '.join(others)}" if others else "")
            + f'. Put your kernel in {name} = r"""<your CUDA C>""".')
    raise KernelCellError(
        f"{grade_id} sets {name} last at its line {last.lineno}, and not to a plain string "
        f'literal ({name} = r"""<your CUDA C>"""); the grader reads the literal without '
        "running the cell, so build the source in the string itself, and set nothing else "
        f"to {name}.")


#: Consecutive lines of one solution block an output must show, in order, to count as
#: showing the solution: no grader message, hint or common CUDA line is that long a run.
SOLUTION_RUN = 6
#: Of those, how many must be distinctive (long enough not to be an idiom such as ``}``).
DISTINCTIVE = 4
DISTINCTIVE_LENGTH = 16


def _norm(line: str) -> str:
    """A line with its whitespace collapsed and its ``//`` comment dropped."""
    return " ".join(line.split("//", 1)[0].split())


def solution_blocks(source_notebooks: list[Path]) -> list[tuple[str, ...]]:
    """The lines between ``BEGIN SOLUTION`` and ``END SOLUTION`` of the course's source
    notebooks, one tuple per block (normalised, blank lines dropped)."""
    blocks: list[tuple[str, ...]] = []
    for path in source_notebooks:
        for cell in read(path).cells:
            block: list[str] | None = None
            for line in str(cell.get("source", "")).splitlines():
                if SOLUTION_MARKERS[0] in line:
                    block = []
                elif SOLUTION_MARKERS[1] in line:
                    if block:
                        blocks.append(tuple(block))
                    block = None
                elif block is not None and _norm(line):
                    block.append(_norm(line))
    return blocks


def _runs(blocks: list[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Every window of :data:`SOLUTION_RUN` consecutive lines of a block with at least
    :data:`DISTINCTIVE` distinctive lines."""
    out = set()
    for block in blocks:
        for i in range(len(block) - SOLUTION_RUN + 1):
            run = block[i:i + SOLUTION_RUN]
            if sum(len(x) >= DISTINCTIVE_LENGTH for x in run) >= DISTINCTIVE:
                out.add(run)
    return out


def _windows(text: str) -> set[str]:
    """The digests of every :data:`SOLUTION_RUN` consecutive lines of ``text``."""
    lines = [n for n in map(_norm, text.splitlines()) if n]
    return {_digest(lines[i:i + SOLUTION_RUN])
            for i in range(len(lines) - SOLUTION_RUN + 1)}


def _digest(run: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(run).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def secret_windows(blocks: list[tuple[str, ...]]) -> list[str]:
    """The digests of the solution blocks' runs (:func:`_runs`): what
    :func:`solution_shown` compares outputs with, in a process that never sees the
    solutions themselves (the sandbox of nbgrader's steps)."""
    return sorted(_digest(run) for run in _runs(blocks))


def notebook_text(notebook_text: str) -> str:
    """The source of a notebook's cells, joined (its raw text, if it is not a notebook)."""
    try:
        nb = nbformat.reads(notebook_text, as_version=4, capture_validation_error={})
        return "\n".join(str(c.get("source", "")) for c in nb.cells)
    except UNREADABLE:
        return notebook_text


def _text(value: Any) -> str:
    return "".join(map(str, value)) if isinstance(value, list) else str(value or "")


def _output_text(output: dict[str, Any]) -> str:
    parts = [output.get("text", ""), *output.get("traceback", [])]
    parts += list((output.get("data") or {}).values())
    return "\n".join(map(_text, parts))


def solution_shown(notebook: Path, secret: Iterable[str], own: str = "") -> int:
    """How many outputs of an executed ``notebook`` show a run of :data:`SOLUTION_RUN`
    consecutive lines of a solution block (``secret``: their digests,
    :func:`secret_windows`) that the submitted notebook (``own``: its text) does not hold:
    what its author could not have typed. A single line is never evidence
    (a guard such as ``if (row < M && col < N)`` is every learner's, and the grader's
    hints quote it). Nothing is changed: the feedback keeps every output."""
    try:
        nb = read(notebook)
    except UNREADABLE:
        return 0
    secret = set(secret) - _windows(notebook_text(own))
    if not secret:
        return 0
    return sum(bool(_windows(_output_text(o)) & secret)
               for cell in nb.cells for o in cell.get("outputs") or [])


def interrupted_cells(notebook: Path) -> int:
    """How many cells of an executed notebook were stopped by a time limit."""
    try:
        cells = read(notebook).cells
    except UNREADABLE:
        return 0
    return sum(
        any(o.get("ename") in ("KeyboardInterrupt", "CellTimeoutError")
            for o in c.get("outputs") or [])
        for c in cells
    )


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def empty_kernel(source: str, kernel: str) -> bool:
    """Whether the kernel ``kernel`` in ``source`` has an empty body (comments aside) and
    nothing else is written outside it but preprocessor lines: the released stub, left
    as it was. Such a kernel writes nothing; grading it would only say so, slowly."""
    text = _COMMENTS.sub("", source)
    m = re.search(rf"\b{re.escape(kernel)}\s*\([^)]*\)\s*\{{\s*\}}", text)
    if m is None:
        return False
    rest = text[: m.start()] + text[m.end():]
    lines = [ln.strip() for ln in rest.splitlines()]
    return all(not ln or ln.startswith("#") or ln in ("__global__ void", "__global__")
               for ln in lines)
