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
    import json, time
    from tilelab.device import backend
    t0 = time.perf_counter()
    backend.begin_driver_start()
    thread = backend._STARTING
    spins = 0
    while thread.is_alive() and time.perf_counter() - t0 < 30:
        spins += 1
    took = time.perf_counter() - t0
    backend.driver_started()
    print(json.dumps({"spins": spins, "took": took, "alive": thread.is_alive(),
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
    """cuInit (0.1 s and more on an H200; about 0.3 s under Nsight Compute) runs without
    the GIL: the main thread runs Python all the while (one that held it would leave the
    main thread a handful of steps), and the driver is started after it."""
    got = probe()
    assert got["took"] > 0.02, got  # the driver's start took time ...
    assert got["spins"] > 100_000 * got["took"], got  # ... and the main thread ran meanwhile
    ok, why = backend.driver_device()
    assert ok, why
