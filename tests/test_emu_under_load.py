"""An honest kernel on a busy machine is never refused for what the load did.

- The emulator's forked children (a library's loading, each launch) run only what they
  were handed. The cause found behind an honest kernel refused, under load, as "calling
  the operating system while loading": garbage the parent's threads had left (an object
  in a reference cycle whose finalizer removes a temporary folder, say) was collected in
  the child once the child's own allocations crossed the collector's threshold, and its
  finalizer's system call was made under the loading filter. The test makes that timing
  certain (a low threshold, the garbage made just at the fork).
- g++'s limit is its own CPU time, not the wall clock: the cause found behind an honest
  kernel's intermittent CompileError with two emulator runs compiling beside each other
  (a build that waited for a core past the 30 s a build had). The test makes the wait
  certain (a compiler that sleeps before it compiles).
"""

from __future__ import annotations

import gc
import os
import shutil
import signal

import pytest

from tilelab import emu
from tilelab.emu import compile as emu_compile
from tilelab.emu import native, seccomp

pytestmark = pytest.mark.skipif(not seccomp.available(),
                                reason=f"no seccomp here: {seccomp.unavailable()}")


class LeftOver:
    """Garbage in a reference cycle whose finalizer calls the operating system."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        os.getppid()  # not a call the loading filter allows


def child(fd: int, tag: bytes) -> None:
    seccomp.install_loading_filter()
    made = [[i] for i in range(2000)]  # a child's own allocations, as loading makes them
    os.write(fd, native.tagged(tag, b'{"made": %d}' % len(made)))


def test_a_forked_child_runs_no_finalizer_of_the_parents_garbage(monkeypatch):
    seccomp.prepare()
    real_fork = os.fork

    def fork_beside_garbage() -> int:  # another thread's garbage, left at the fork
        gc.collect()
        LeftOver()
        return real_fork()

    monkeypatch.setattr(os, "fork", fork_beside_garbage)
    old = gc.get_threshold()
    try:
        gc.set_threshold(500)  # the child's own allocations, past the filter, trigger one
        res = native.run_forked(child, timeout=30)
    finally:
        gc.set_threshold(*old)
        monkeypatch.undo()
        gc.collect()
    assert res.signal != signal.SIGSYS, "the child was killed for a finalizer's system call"
    assert res.report == b'{"made": 2000}' and res.status == 0


def test_a_build_that_waits_for_a_core_is_not_refused(tmp_path, monkeypatch):
    """A compiler that sleeps 3 s before it compiles (as one waits for a core on a busy
    machine), under a 1 s budget: the kernel builds; what g++ itself computes is what the
    budget holds (tests/test_emu_errors.py: a constexpr loop is still refused)."""
    cxx, version = emu_compile.compiler()
    slow = tmp_path / "busy-g++"
    slow.write_text(f"#!/bin/sh\nsleep 3\nexec {shutil.which(cxx)} \"$@\"\n")
    slow.chmod(0o755)
    # the same compiler's key: the prelude's builds already made are used as they are
    monkeypatch.setattr(emu_compile, "compiler", lambda: (str(slow), version))
    monkeypatch.setattr(emu_compile, "COMPILE_SECONDS", 1.0)
    monkeypatch.setenv("TILELAB_EMU_NVCC", "0")
    src = (f"// waits for a core {id(tmp_path)}\n"
           "__global__ void k(float* x) { atomicAdd(&x[0], 1.0f); }\n")
    module = emu.SourceModule(src)
    assert module.get_function("k") is not None
