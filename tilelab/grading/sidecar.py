"""A GPU tool's run of the grading worker beside the grade: compute-sanitizer or Nsight
Compute over ``python -m tilelab.grading.worker --launch-once``, in a process group of its
own, its output in files of a folder of its own.

Started ahead of the grade, the worker starts CUDA and then waits for :meth:`Sidecar.go`
on its standard input before it reads the kernel's source: the tool's own start, Python's and
CUDA's overlap the grader's checks and compile, and no compiler sees a source before the
grader has validated it (one that is refused, or does not compile, never gets it: the
process is stopped instead). Read :meth:`Sidecar.output` once :meth:`Sidecar.wait` says it
ended; :meth:`Sidecar.stop` ends it, whatever it was doing.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

#: What a waiting worker reads before it goes on (anything else, or the pipe's end: it
#: returns without launching).
GO = "go"
#: A worker's line on its standard error at each of its steps (:func:`mark`)
_MARK = re.compile(r"^tilelab-worker (\w+) (\d+\.\d+)$", re.MULTILINE)


class Sidecar:
    """One tool process, its worker waiting for :meth:`go`; ``argv`` runs it, its output
    goes to ``folder`` (stdout and stderr apart, or in one file where ``merge``)."""

    def __init__(self, argv: list[str], folder: str | os.PathLike, name: str,
                 merge: bool = False) -> None:
        self.files: list[IO[bytes]] = [
            open(Path(folder) / f"{name}.{part}", "w+b")  # noqa: SIM115 (closed in stop)
            for part in (("log",) if merge else ("stdout", "stderr"))]
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE,
                stdout=self.files[0], stderr=self.files[-1] if not merge else subprocess.STDOUT,
                start_new_session=True)
        except OSError:
            self.close()
            raise
        self.started = time.monotonic()

    def go(self) -> None:
        """Let the worker read its source and launch (nothing once told, or ended)."""
        pipe = self.proc.stdin
        if pipe is None or pipe.closed:
            return
        with contextlib.suppress(OSError):  # ended meanwhile: its output says why
            pipe.write(f"{GO}\n".encode())
            pipe.flush()
        with contextlib.suppress(OSError):
            pipe.close()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the tool to end; False when it has not."""
        try:
            self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True

    def output(self, limit: int = 1 << 22) -> list[str]:
        """What it wrote (at most ``limit`` bytes of each file): [stdout, stderr], or the
        one merged text."""
        texts = []
        for f in self.files:
            f.seek(0)
            texts.append(f.read(limit).decode("utf-8", "replace"))
        return texts

    def timeline(self, name: str, texts: list[str]) -> dict[str, float]:
        """Seconds from this tool's start to each step its worker marked in ``texts``, its
        output (:func:`mark`), as ``<name>_<step>``, and to now as ``<name>_read`` (when
        the grader read it): where a grade's time goes (they decide nothing)."""
        out = {f"{name}_{event}": round(float(at) - self.started, 3)
               for text in texts for event, at in _MARK.findall(text)}
        out[f"{name}_read"] = round(time.monotonic() - self.started, 3)
        return out

    def stop(self) -> None:
        """End the tool and everything it started; close its files."""
        with contextlib.suppress(OSError):  # its group: what it started may outlive it
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self.close()

    def close(self) -> None:
        for f in self.files:
            f.close()


def wait_for_go(stream: IO[str]) -> bool:
    """In a waiting worker: True once the grader says go, False when it never will."""
    return stream.readline().strip() == GO


def mark(event: str) -> None:
    """In a tool's worker: say on standard error that it reached ``event`` (a word), and
    when (this machine's monotonic clock, which every process reads alike)."""
    print(f"tilelab-worker {event} {time.monotonic():.4f}", file=sys.stderr, flush=True)
