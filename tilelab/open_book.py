"""Open the built book in a browser, or say where it is when there is no browser."""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    index = Path(args[0] if args else "_build/html/index.html").resolve()
    if not index.exists():
        print(f"No built book at {index}; run `make book` first.", file=sys.stderr)
        return 1
    opened = False
    try:
        opened = webbrowser.open(index.as_uri())
    except webbrowser.Error:
        opened = False
    print(f"The book is built: {index.as_uri()}" + ("" if opened else " (open it in a browser)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
