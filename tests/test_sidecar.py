"""The GPU tools a grade needs start ahead of it and wait: a tool's worker reads the
kernel's source only once the grader says go (after validating and compiling it), never
when the grader stops first, and no tool outlives the grade that did not take it. A
stand-in worker (a Python program using the real waiting code) and stand-in tools on PATH
play them here (no GPU); the real ones run in the `gpu` tests of test_gpu_grading.py."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import running

from tilelab.grading import ahead, counters, sanitizer
from tilelab.grading.sidecar import Sidecar
from tilelab.isolation import bubblewrap

REPO = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent("""\
    import sys
    sys.path.insert(0, sys.argv[2])
    from tilelab.grading.sidecar import mark, wait_for_go
    print("started", flush=True)
    if not wait_for_go(sys.stdin):
        print("never given the source")
        sys.exit(0)
    mark("go")
    with open(sys.argv[1]) as f:
        print("read:", f.read())
    """)


def stand_in_worker(tmp_path: Path) -> tuple[list[str], Path]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return [sys.executable, str(script), str(tmp_path / "kernel.cu"), str(REPO)], \
        tmp_path / "kernel.cu"


def test_a_waiting_tool_reads_the_source_only_once_told_go(tmp_path):
    argv, source = stand_in_worker(tmp_path)
    tool = Sidecar(argv, tmp_path, "tool")
    try:
        deadline = time.monotonic() + 30
        while "started" not in tool.output()[0] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not tool.wait(0.2), "it must wait for go"
        source.write_text("__global__ void k() {}")  # written once validated
        tool.go()
        assert tool.wait(30)
        assert "read: __global__ void k() {}" in tool.output()[0]
        marks = tool.timeline("tool", tool.output())  # its worker got go, from its start
        assert set(marks) == {"tool_go", "tool_read"}
        assert 0.2 <= marks["tool_go"] <= marks["tool_read"] < 30
    finally:
        tool.stop()


def test_a_tool_whose_grade_stops_first_never_reads_the_source(tmp_path):
    argv, source = stand_in_worker(tmp_path)
    source.write_text("refused by the grader")
    tool = Sidecar(argv, tmp_path, "tool")
    try:
        assert tool.proc.stdin is not None
        tool.proc.stdin.close()  # the grader ended without a go
        assert tool.wait(30)
        out = tool.output()[0]
        assert "never given the source" in out and "refused" not in out
    finally:
        tool.stop()


STAND_IN_TOOL = "#!/bin/sh\necho $$ >> \"$PIDS\"\nexec sleep 600\n"


def test_tools_started_ahead_and_not_taken_end_with_the_grade(tmp_path, monkeypatch):
    """A source refused, or a kernel that does not compile: the grade never takes the tools
    the worker started before it, and they end with it (and their folders go)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("compute-sanitizer", "ncu"):
        (bindir / name).write_text(STAND_IN_TOOL)
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    if sanitizer.find_sanitizer() != str(bindir / "compute-sanitizer") or \
            counters.find_ncu() != str(bindir / "ncu"):
        pytest.skip("another compute-sanitizer or ncu is found first")
    tools = ahead.start("tiled", speed=True, sanitize=True)
    folders = [Path(tools.sanitizers._tmp.name), Path(tools.counting._tmp.name)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
            not (tmp_path / "pids").exists()
            or len((tmp_path / "pids").read_text().split()) < 3):
        time.sleep(0.02)
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3 and all(running(p) for p in pids)  # racecheck, memcheck, ncu
    taken = tools.take_sanitizers()
    assert taken is not None and tools.sanitizers is None
    tools.stop()  # ncu: not taken
    taken.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.05)
    assert not any(running(p) for p in pids)
    assert not any(f.exists() for f in folders)


def test_only_the_tools_an_exercise_uses_are_started(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # none found: nothing is run
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert ahead.start("add2d", speed=True, sanitize=False).counting is None  # no speed test
    tools = ahead.start("tiled", speed=False, sanitize=True)
    assert tools.counting is None and tools.sanitizers is not None
    tools.stop()


def test_the_package_a_sandbox_imports_is_byte_compiled(tmp_path):
    """A sandbox binds the package read-only and writes no bytecode: the host compiles it
    first, or every sandboxed process compiles each module it imports again."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for path in (package / "__init__.py", package / "sub" / "mod.py"):
        path.write_text("X = 1\n")
    assert bubblewrap.byte_compiled(str(package))
    import importlib.util

    for path in (package / "__init__.py", package / "sub" / "mod.py"):
        assert Path(importlib.util.cache_from_source(str(path))).is_file()
    bubblewrap.byte_compiled.cache_clear()
    bubblewrap.command(["true"], tmp_path, env={})  # every sandbox's command line does it
    assert bubblewrap.byte_compiled.cache_info().misses == 1
    bubblewrap.command(["true"], tmp_path, env={})
    assert bubblewrap.byte_compiled.cache_info().hits == 1  # once a process
