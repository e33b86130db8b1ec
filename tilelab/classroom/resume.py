"""Content hashes that let a rerun grade only what is missing or changed.

A submission is up to date when its feedback's ``tilelab_verdict.json`` names the hash of
the submitted files and the hash of the course's grading inputs it was graded with, and
the gradebook holds the points that file lists. The grading inputs are the source
notebooks, the nbgrader configuration, the run's settings (backend, gates, speed points
without a GPU, the cell time limit) and the grader itself (the tilelab package's files).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tilelab

PACKAGE = Path(tilelab.__file__).resolve().parent
PACKAGE_SUFFIXES = (".py", ".h", ".cu")


def digest_files(files: Mapping[str, bytes]) -> str:
    """One hash of named byte strings (names and contents, in name order)."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def read_tree(folder: Path, suffixes: Iterable[str] | None = None) -> dict[str, bytes]:
    """Every regular file under ``folder`` by its relative POSIX path: symbolic links (to
    files or to folders, never followed), pipes, sockets and devices left out."""
    keep = tuple(suffixes) if suffixes else None
    out = {}
    if folder.is_symlink() or not folder.is_dir():
        return out
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            path = Path(root, name)
            if stat.S_ISREG(path.lstat().st_mode) and (keep is None or name.endswith(keep)):
                out[path.relative_to(folder).as_posix()] = path.read_bytes()
    return dict(sorted(out.items()))


def package_digest() -> str:
    """A hash of the grader's own code (the tilelab package's sources)."""
    return digest_files(read_tree(PACKAGE, PACKAGE_SUFFIXES))


def inputs_digest(course_files: Mapping[str, bytes], settings: Mapping[str, Any]) -> str:
    """The hash of everything a submission's grade depends on besides the submission."""
    doc = json.dumps(dict(settings), sort_keys=True, default=str).encode()
    return digest_files({**course_files, "\0settings": doc, "\0grader": package_digest().encode()})


def recorded(verdict_json: Path) -> dict[str, Any] | None:
    """What the last grading of a submission recorded (None: never graded, or unreadable)."""
    try:
        doc = json.loads(verdict_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def up_to_date(
    doc: Mapping[str, Any] | None,
    submission: str,
    inputs: str,
    in_gradebook: Mapping[str, Mapping[str, float]] | None,
) -> bool:
    """Whether a submission graded as ``doc`` says need not be graded again: same files,
    same grading inputs, and its points still in the gradebook (``in_gradebook``: the
    hidden tests' scores there by exercise and kind, None when it has no submission)."""
    if not doc or in_gradebook is None:
        return False
    if doc.get("submission_sha256") != submission or doc.get("inputs_sha256") != inputs:
        return False
    return doc.get("points") == in_gradebook
