"""A class run's progress: a tqdm bar on a terminal, plain lines in a log (CI, a file).

Both show the count, the rate and the time left; each line of the plain form also names
the submission just recorded and how long it took.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO

from tilelab.classroom.escape import terminal_text


def _is_terminal(stream: IO[str]) -> bool:
    return stream.isatty() and not os.environ.get("CI")


class Progress:
    """Counts recorded submissions; ``enabled=False`` shows nothing."""

    def __init__(
        self, total: int, enabled: bool = True, stream: IO[str] | None = None, skipped: int = 0
    ) -> None:
        self.total, self.enabled, self.done = total, enabled, 0
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.bar = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=self.stream, unit="submission", dynamic_ncols=True)
        elif enabled:
            extra = f" ({skipped} up to date, not graded again)" if skipped else ""
            self._line(f"grading {total} submission(s){extra}")

    def _line(self, text: str) -> None:
        self.stream.write(f"tilelab grade: {text}\n")
        self.stream.flush()

    def step(self, label: str, seconds: float) -> None:
        """One more submission recorded (``label`` names it; it took ``seconds``)."""
        self.done += 1
        if not self.enabled:
            return
        label = terminal_text(label)  # a student's id is a folder's name: printed inert
        if self.bar is not None:
            self.bar.set_postfix_str(label[:40], refresh=False)
            self.bar.update(1)
            return
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed * 60 if elapsed > 0 else 0.0
        left = (self.total - self.done) * elapsed / self.done
        self._line(
            f"[{self.done}/{self.total}] {label}: {seconds:.1f} s; "
            f"{rate:.1f} submissions/min, about {_duration(left)} left"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            took = _duration(time.monotonic() - self.start)
            self._line(f"{self.done}/{self.total} recorded in {took}")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
