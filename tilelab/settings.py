"""Every ``TILELAB_*`` environment variable of the course: its name, default and meaning.

Values are read when asked for, never at import, so a typo in a variable cannot break
``import tilelab...`` inside a notebook; a bad value raises :class:`SettingsError`, whose
message names the variable and what it accepts.

The emulator (:mod:`tilelab.emu`) reads its own three (``TILELAB_EMU_TIMEOUT``,
``TILELAB_EMU_CXX``, ``TILELAB_CACHE``): it imports nothing else of tilelab, so it can be
used alone. They are listed in :data:`EMULATOR_VARIABLES` for reference.

The class run (:mod:`tilelab.classroom`) sets the protocol variables below for the
notebooks nbgrader runs: ``TILELAB_BACKEND``, ``TILELAB_CLASS_GRADING``,
``TILELAB_AWARD_SPEED_WITHOUT_GPU`` and, per submission, ``TILELAB_VERDICT_CACHE`` (with
``TILELAB_VERDICT_WAIT`` where the notebook runs beside the clean grade).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import platformdirs

T = TypeVar("T")
TRUE = ("1", "true", "yes", "on")
FALSE = ("", "0", "false", "no", "off")


class SettingsError(ValueError):
    """An environment variable holds a value the course cannot use."""


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: read, parsed and checked by :meth:`get`."""

    name: str
    default: str
    parse: Callable[[str], T]
    accepts: str  # what a good value looks like, for the error message
    meaning: str

    def raw(self) -> str:
        return os.environ.get(self.name, "").strip() or self.default

    def get(self) -> T:
        value = self.raw()
        try:
            return self.parse(value)
        except (ValueError, TypeError):
            raise SettingsError(
                f"{self.name}={value!r} is not valid: expected {self.accepts}. "
                f"Fix or unset {self.name} (default: {self.default or 'unset'})."
            ) from None

    def set_to(self, value: object | None) -> dict[str, str | None]:
        """``{name: text}`` for :func:`environ`: this variable set to ``value`` (None: unset)."""
        return {self.name: None if value is None else str(value)}


def _at_least_zero(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    low = text.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise ValueError(text)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if not value > 0:
            raise ValueError(text)
        return value

    return parse


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError(text)
        return text.lower()

    return parse


def _optional(text: str) -> str | None:
    return text or None


BACKEND: Variable[str] = Variable(
    "TILELAB_BACKEND", "auto", _choice("auto", "gpu", "emu"), "one of auto, gpu, emu",
    "where kernels run: a GPU through PyCUDA, the CPU emulator, or auto (a GPU when found)")
GRADE_TIMEOUT: Variable[float] = Variable(
    "TILELAB_GRADE_TIMEOUT", "300", _positive(float), "a number of seconds above 0",
    "how long grading one kernel source may take before the grader stops it")
CELL_TIMEOUT: Variable[int] = Variable(
    "TILELAB_CELL_TIMEOUT", "120", _positive(int), "a whole number of seconds above 0",
    "how long one notebook cell may run during a class run")
NOTEBOOK_TIMEOUT: Variable[int] = Variable(
    "TILELAB_NOTEBOOK_TIMEOUT", "600", _positive(int), "a whole number of seconds above 0",
    "how long one notebook may run in all (every cell together) during a class run")
AWARD_SPEED_WITHOUT_GPU: Variable[bool] = Variable(
    "TILELAB_AWARD_SPEED_WITHOUT_GPU", "", _flag, "1/true/yes or 0/false/no",
    "award speed points where speed cannot be measured (no GPU); set by `tilelab grade`")
LESSON_WITHOUT_COUNTERS: Variable[bool] = Variable(
    "TILELAB_LESSON_WITHOUT_COUNTERS", "", _flag, "1/true/yes or 0/false/no",
    "grade on a GPU whose performance counters cannot be read, every lesson graded as not "
    "measured (no speed points for it); otherwise such a GPU is refused before grading")
CLASS_GRADING: Variable[bool] = Variable(
    "TILELAB_CLASS_GRADING", "", lambda t: bool(t), "any non-empty value",
    "set while a class run's nbgrader executes notebooks: the visible checks stand aside")
VERDICT_CACHE: Variable[str | None] = Variable(
    "TILELAB_VERDICT_CACHE", "", _optional, "a folder",
    "verdicts a class run already measured, which the hidden tests read back")
VERDICT_WAIT: Variable[float] = Variable(
    "TILELAB_VERDICT_WAIT", "0", _at_least_zero, "a number of seconds, 0 or more",
    "how long a hidden test waits for the class run's verdict while the clean grader still "
    "grades beside the notebook (0: not at all)")
SANDBOXED: Variable[bool] = Variable(
    "TILELAB_SANDBOXED", "", lambda t: bool(t), "any non-empty value",
    "set inside a bubblewrap sandbox (tilelab.isolation.bubblewrap): grading there starts "
    "no second one")
BOOK_DATA: Variable[str | None] = Variable(
    "TILELAB_BOOK_DATA", "", _optional, "a folder",
    "the data folder a book build reads instead of book/data")
BOOK_STRICT: Variable[bool | None] = Variable(
    "TILELAB_BOOK_STRICT", "", lambda t: _flag(t) if t else None, "1/true/yes or 0/false/no",
    "a book build where every missing measured value is a warning")

GPU_LOCK: Variable[str | None] = Variable(
    "TILELAB_GPU_LOCK", "", _optional, "a folder",
    "the lock folder of the GPU a class run's grading tasks share (tilelab.isolation.gpulock): "
    "untimed GPU work holds it shared, a timed round alone; set by the class run per GPU")
COUNTERS_LOCK: Variable[str] = Variable(
    "TILELAB_COUNTERS_LOCK", "alone", _choice("alone", "shared"), "one of alone, shared",
    "how the launches Nsight Compute counts take a shared GPU's lock: alone (as a timed "
    "round), or shared with other tasks' untimed work where `tilelab bench counters_load` "
    "showed the counts equal under load on this GPU; one counted launch per GPU either way")
START_LOCK: Variable[str] = Variable(
    "TILELAB_START_LOCK", "shared", _choice("shared", "none"), "one of shared, none",
    "whether a grading process's CUDA start and teardown take a shared GPU's lock: shared "
    "(a timed round waits for them), or none where `tilelab bench start_load` showed that "
    "other processes' starts and ends leave timed launches as they are on this GPU")

ALL: tuple[Variable, ...] = (BACKEND, GRADE_TIMEOUT, CELL_TIMEOUT, NOTEBOOK_TIMEOUT,
                             AWARD_SPEED_WITHOUT_GPU,
                             LESSON_WITHOUT_COUNTERS, CLASS_GRADING, VERDICT_CACHE, VERDICT_WAIT,
                             SANDBOXED,
                             BOOK_DATA, BOOK_STRICT, GPU_LOCK, COUNTERS_LOCK,
                             START_LOCK)
EMULATOR_VARIABLES = ("TILELAB_EMU_TIMEOUT", "TILELAB_EMU_CXX", "TILELAB_CACHE",
                      "TILELAB_CACHE_BASE")


@contextlib.contextmanager
def environ(values: dict[str, str | None]) -> Iterator[None]:
    """Set (or, with None, remove) environment variables for the ``with`` block: how a
    class run speaks to the notebooks nbgrader runs. (nbgrader's ``utils.setenv`` restores
    nothing on an exception, hence this one.)"""
    old = {k: os.environ.get(k) for k in values}
    try:
        _apply(values)
        yield
    finally:
        _apply(old)


def _apply(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def cache_root() -> Path:
    """``$TILELAB_CACHE``, else the user's cache folder (``platformdirs``)."""
    return Path(os.environ.get("TILELAB_CACHE") or platformdirs.user_cache_dir("tilelab"))
