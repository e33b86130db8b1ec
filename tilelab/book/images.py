"""Where the book's generated images go, and a content-addressed cache for them.

Images are drawn at build time into ``book/_generated/`` (git-ignored) under a name that
hashes everything that shapes them: the drawing code, the options and the data files.
Sphinx then copies them into ``_images`` like any other image; an unchanged image is not
drawn again on the next build.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

GENERATED = Path("book") / "_generated"
_HERE = Path(__file__).parent
_CODE = ("charts.py", "diagrams.py", "style.py", "worked.py")


def code_version() -> str:
    """A hash of the modules that draw images: change one and every image is redrawn."""
    h = hashlib.sha256()
    for name in _CODE:
        path = _HERE / name
        if path.exists():
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def image_key(kind: str, options: dict[str, Any], files: Iterable[Path]) -> str:
    """A short hash of what an image depends on."""
    h = hashlib.sha256(code_version().encode())
    h.update(kind.encode())
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    for path in files:
        h.update(str(path.name).encode())
        h.update(path.read_bytes() if path.is_file() else b"<missing>")
    return h.hexdigest()[:16]


def png_width(path: Path) -> int:
    """The width in pixels of the PNG at ``path`` (from its IHDR header)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big")


def ensure_image(srcdir: Path, name: str, draw: Callable[[Path], None]) -> str:
    """Draw ``name`` under ``book/_generated`` unless it exists; return its source-root URI."""
    target = Path(srcdir) / GENERATED / name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        ignore = target.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# drawn by the book build (tilelab.book); never committed\n*\n")
        fd, tmp = tempfile.mkstemp(suffix=target.suffix, dir=target.parent)
        os.close(fd)
        try:
            draw(Path(tmp))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return "/" + (GENERATED / name).as_posix()
