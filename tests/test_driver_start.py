"""The CUDA driver's start on a thread of its own, beside a process's imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tilelab.device import backend

#: In a fresh process: the driver's start begun, then Python work on the main thread until
#: it ends; what the main thread got done meanwhile, and whether the thread ended.
PROBE = textwrap.dedent("""
    import contextlib, ctypes, json, threading, time
    from tilelab.device import backend
    with contextlib.suppress(OSError):  # loaded here first: the thread's time is cuInit's
        ctypes.CDLL("libcuda.so.1")
    done = threading.Thread(target=int)
    done.start(); done.join()
    spins, t0 = 0, time.perf_counter()  # the main thread's pace alone
    while done.is_alive() or time.perf_counter() - t0 < 0.05:
        spins += 1
    alone = spins / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    backend.begin_driver_start()
    thread = backend._STARTING
    spins = 0
    while thread.is_alive() and time.perf_counter() - t0 < 30:
        spins += 1
    took = time.perf_counter() - t0
    backend.driver_started()
    print(json.dumps({"pace": spins / took / alone, "took": took, "alive": thread.is_alive(),
                      "same": backend._STARTING is thread, "name": thread.name}))
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


@pytest.mark.gpu
def test_the_drivers_start_lets_the_main_thread_import_meanwhile():
    """cuInit (0.02 s on an H200 whose driver is loaded, 0.2 s where it is not; about 0.3 s
    under Nsight Compute) runs without the GIL: the main thread runs Python all the while at
    about its pace alone (a call that held the GIL would stop it for most of that time),
    and the driver is started after it."""
    got = probe()
    assert got["pace"] > 0.3, got
    ok, why = backend.driver_device()
    assert ok, why
