"""PyCUDA's ``Event`` and ``Stream`` for the emulator, where every launch is synchronous.

An event records the host's clock, so ``start.time_till(end)`` measures how long the CPU
took to emulate what ran between the two records (in milliseconds, as on a GPU): useful to
compare versions of a kernel on the emulator, never a prediction of GPU time.
"""

from __future__ import annotations

import time

from .errors import LogicError


class Event:
    """``drv.Event()``: ``record``, ``synchronize``, ``query``, ``time_till``, ``time_since``."""

    def __init__(self, flags: int = 0) -> None:
        self.flags = flags
        self._t: float | None = None

    def record(self, stream: object = None) -> Event:
        """Take the time now (every earlier launch has already finished)."""
        self._t = time.perf_counter()
        return self

    def synchronize(self) -> Event:
        """Nothing to wait for on the emulator."""
        return self

    def query(self) -> bool:
        """Always done."""
        return True

    def _time(self) -> float:
        if self._t is None:
            raise LogicError("cuEventElapsedTime failed: invalid resource handle (the event "
                             "was never recorded: call event.record() first)")
        return self._t

    def time_till(self, end: Event) -> float:
        """Milliseconds from this event to ``end``."""
        return (end._time() - self._time()) * 1e3

    def time_since(self, start: Event) -> float:
        """Milliseconds from ``start`` to this event."""
        return (self._time() - start._time()) * 1e3


class Stream:
    """``drv.Stream()``: accepted wherever PyCUDA takes one; work in it is already done."""

    def __init__(self, flags: int = 0) -> None:
        self.flags = flags

    def synchronize(self) -> None:
        """Nothing to wait for on the emulator."""

    def is_done(self) -> bool:
        """Always done."""
        return True

    def wait_for_event(self, event: Event) -> None:
        """Nothing to wait for on the emulator."""
