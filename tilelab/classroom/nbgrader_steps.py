"""Inside the sandbox of nbgrader's steps: everything that reads one learner's notebook.

Run as ``python -m tilelab.classroom.nbgrader_steps FD`` by
:class:`~tilelab.classroom.notebook_sandbox.NotebookSandbox`, in the task's private course
(the solutions hidden). It reads one request on its standard input and answers on
descriptor ``FD``, one JSON line per step, each step started by a command:

1. ``kernels``: the notebook read once (its JSON first, for its size), each exercise's
   kernel cell (``source``, or the ``error`` a learner reads), and ``refused``: why nbgrader
   will not run a notebook past :data:`CELL_LIMIT` cells or :data:`MARKDOWN_LIMIT` bytes
   of markdown (the time of nbgrader's steps grows with both, some of it with the square);
2. ``autograded`` (on ``{"do": "autograde"}``): nbgrader's autograde, its kernel started
   by the grader in a sandbox of its own (:mod:`tilelab.classroom.kernel_broker`), then the
   executed notebook's cells stopped by a time limit and outputs that show solution lines
   (compared by digest: the solutions are never here), and what its outputs came to;
3. ``feedback`` (on ``{"do": "feedback"}``): nbgrader's generate_feedback.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from pathlib import Path
from typing import Any

from tilelab.catalog import exercises
from tilelab.classroom import course, jupyter_sandbox, kernel_broker, submissions

#: A notebook nbgrader runs holds at most this many cells, and this much markdown (the
#: course's own notebooks: 29 cells, 11 KB)
CELL_LIMIT = 1000
MARKDOWN_LIMIT = 256 << 10
TAIL = 4000  # characters of nbgrader's log and error kept
PR_SET_DUMPABLE = 4


def _undumpable() -> None:
    """Nothing else of the same user may read this process's memory or files through
    ``/proc`` (its kernel's sandbox cannot anyway: another pid namespace)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def refused(cells: list[Any]) -> str | None:
    """Why nbgrader will not run a notebook of these cells (None: it will)."""
    if len(cells) > CELL_LIMIT:
        return (f"the notebook has {len(cells):,} cells, more than the {CELL_LIMIT:,} a "
                "class run lets nbgrader run")
    markdown = sum(len(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown")
    if markdown > MARKDOWN_LIMIT:
        return (f"the notebook holds {markdown / 1024:,.0f} KiB of markdown, more than the "
                f"{MARKDOWN_LIMIT >> 10} KiB a class run lets nbgrader render")
    return None


def read_kernels(path: Path, assignment: str) -> dict[str, Any]:
    """Each exercise's kernel source (or why it cannot be read) and why nbgrader will not
    run the notebook; its text, for the solution check."""
    text = submissions.read_capped(path)
    try:
        cells = submissions.json_cells(text)
    except submissions.UNREADABLE:
        cells = None
    why = refused(cells) if cells is not None else None
    kernels: dict[str, dict[str, str]] = {}
    for exercise_id in exercises.ASSIGNMENTS[assignment]:
        try:  # nbformat's reading, unless the notebook is too big for it to be quick
            source = submissions.extract_kernel(path, exercise_id,
                                                cells=cells if why else None)
            kernels[exercise_id] = {"source": source}
        except submissions.KernelCellError as exc:
            kernels[exercise_id] = {"error": str(exc)}
    return {"kernels": kernels, "refused": why, "text": text,
            "deleted": submissions.deleted_tests(path, assignment)}


def _tail(text: Any) -> str:
    return str(text or "")[-TAIL:]


def autograde(api: Any, req: dict[str, Any], environment: dict[str, str | None],
              own: str) -> dict[str, Any]:
    """nbgrader's autograde of the submission, and what the executed notebook shows."""
    root, a, s = Path(req["root"]), req["assignment"], req["student"]
    if not req["sandboxed"]:  # the kernel is this process's child: its environment
        os.environ.update({k: v for k, v in environment.items() if v is not None})
        for k in [k for k, v in environment.items() if v is None]:
            os.environ.pop(k, None)
    result = api.autograde(a, s, force=True, create=True)
    executed = root / "autograder" / "autograded" / s / a / req["notebook"]
    counts = jupyter_sandbox.COUNTS
    return {
        "success": bool(result.get("success")),
        "error": _tail(result.get("error")), "log": _tail(result.get("log")),
        "interrupted": submissions.interrupted_cells(executed),
        "shown": submissions.solution_shown(executed, req["secret"], own),
        "output_bytes": max((c.asked for c in counts), default=0),
        "output_dropped": sum(c.dropped for c in counts),
    }


def open_api(req: dict[str, Any]) -> Any:
    """nbgrader's API on the private course, its kernels the grader's to start."""
    root = Path(req["root"])
    manager = kernel_broker.BrokeredKernelManager if req["sandboxed"] else None
    api = course.open_api(root, req["cell_timeout"], sandboxed=req["sandboxed"],
                          gradebook=root / course.PRIVATE_GRADEBOOK,
                          notebook_timeout=req["notebook_timeout"], kernel_manager=manager)
    if manager is not None:
        api.config.BrokeredKernelManager.ipc_dir = req["ipc_dir"]
    return api


def main(argv: list[str] | None = None) -> int:
    """The steps, each as the grader asks for it; 0 also where the grader ends them early
    (it closes this process's input: nothing more is wanted)."""
    try:
        return _steps(sys.argv[1:] if argv is None else argv)
    except EOFError:
        return 0


def _steps(args: list[str]) -> int:
    _undumpable()
    channel = kernel_broker.Channel(int(args[0]), sys.stdin.buffer)
    kernel_broker.CHANNEL = channel
    req = channel.read()
    root = Path(req["root"])
    path = root / "autograder" / "submitted" / req["student"] / req["assignment"] / req["notebook"]
    read = read_kernels(path, req["assignment"])
    own = read.pop("text")
    channel.send({"kernels": read})
    command = channel.read()
    api = None
    if command.get("do") == "autograde" and not read["refused"]:
        api = open_api(req)
        channel.send({"autograded": autograde(api, req, command.get("environment") or {}, own)})
        command = channel.read()
    if command.get("do") == "feedback":
        api = api or open_api(req)
        result = api.generate_feedback(req["assignment"], req["student"], force=True)
        channel.send({"feedback": {"success": bool(result.get("success")),
                                   "error": _tail(result.get("error") or result.get("log"))}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
