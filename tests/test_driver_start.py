"""The CUDA driver's start on a thread of its own, beside a process's imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tilelab.device import backend

#: In a fresh process: the driver's start begun, then waited for: whether its thread ended,
#: and is the one begun.
PROBE = textwrap.dedent("""
    import json
    from tilelab.device import backend
    backend.begin_driver_start()
    thread = backend._STARTING
    backend.driver_started()
    print(json.dumps({"alive": thread.is_alive(), "same": backend._STARTING is thread,
                      "name": thread.name}))
""")


def probe(code: str = PROBE) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_driver_start_ends_and_is_waited_for_where_no_driver_loads_too():
    """Without a CUDA driver (CI) the thread ends at once and says nothing: PyCUDA's own
    start, later, says why; with one, it ends once the driver has started."""
    got = probe()
    assert not got["alive"] and got["same"] and got["name"] == "tilelab-cuInit"
    twice = probe("from tilelab.device import backend\nimport json\n"
                  "backend.begin_driver_start(); first = backend._STARTING\n"
                  "backend.begin_driver_start(); backend.driver_started()\n"
                  "print(json.dumps({'one': backend._STARTING is first}))")
    assert twice["one"]


#: In a fresh process: whether the driver answers before and after the thread's start
#: (CUDA_ERROR_NOT_INITIALIZED, 3, until a cuInit of this process's).
STARTED = textwrap.dedent("""
    import ctypes, json
    from tilelab.device import backend
    lib, count = ctypes.CDLL("libcuda.so.1"), ctypes.c_int(0)
    before = lib.cuDeviceGetCount(ctypes.byref(count))
    backend.begin_driver_start()
    backend.driver_started()
    after = lib.cuDeviceGetCount(ctypes.byref(count))
    print(json.dumps({"before": before, "after": after, "count": count.value}))
""")


@pytest.mark.gpu
def test_the_driver_is_started_once_its_thread_is_waited_for():
    """What :func:`backend.driver_started` promises PyCUDA's start after it: this process's
    driver started. (That the start overlaps the imports, ctypes letting go of the GIL, is
    measured by ``benchmarks/check_times.py``: a check's Nsight Compute worker reaches CUDA
    about 0.3 s sooner on an H200.)"""
    got = probe(STARTED)
    assert got["before"] == 3 and got["after"] == 0 and got["count"] >= 1, got
    ok, why = backend.driver_device()
    assert ok, why
