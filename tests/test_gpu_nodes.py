"""A sandbox gets the grader's own GPU only: its device node, not every GPU's."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from tilelab.device.backend import Backend
from tilelab.grading.sandbox import sandbox_limits
from tilelab.isolation import bubblewrap as sandbox
from tilelab.isolation import gpu_nodes

SMI = """0, GPU-6ab737fb-805c-2744-bbca-daa7a72673be, 00000000:18:00.0
1, GPU-1b3fb574-e448-aa16-b3f9-02cd6ba8ed38, 00000000:2A:00.0
"""
TWO = [
    gpu_nodes.Gpu(0, "GPU-6ab737fb-805c-2744-bbca-daa7a72673be", "0000:18:00.0", 2),
    gpu_nodes.Gpu(1, "GPU-1b3fb574-e448-aa16-b3f9-02cd6ba8ed38", "0000:2a:00.0", 0),
]
NODES = ["/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
         "/dev/nvidia0", "/dev/nvidia2", "/dev/nvidiactl"]


def test_nvidia_smi_and_the_driver_name_each_gpu_and_its_device_node(tmp_path):
    assert gpu_nodes.parse_smi(SMI + "garbage\n") == [
        (0, TWO[0].uuid, "0000:18:00.0"), (1, TWO[1].uuid, "0000:2a:00.0")]
    info = tmp_path / "0000:2a:00.0" / "information"
    info.parent.mkdir()
    info.write_text("Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nDevice Minor: \t 0\n")
    assert gpu_nodes.minor_number("0000:2a:00.0", tmp_path) == 0
    assert gpu_nodes.minor_number("0000:18:00.0", tmp_path) is None  # no such GPU


def test_the_gpu_count_and_listing_read_nvidia_smi_through_one_runner(tmp_path, monkeypatch):
    from tilelab.cluster import start

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n"
                   'if [ "$1" = "-L" ]; then printf "GPU 0: H200 (UUID: a)\\nGPU 1: H200 '
                   '(UUID: b)\\n"; else printf "%s" "$SMI_CSV"; fi\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("SMI_CSV", SMI)
    info = tmp_path / "proc" / "0000:2a:00.0" / "information"
    info.parent.mkdir(parents=True)
    info.write_text("Device Minor: \t 0\n")
    assert start.gpu_count() == 2
    assert gpu_nodes.listing(tmp_path / "proc") == [TWO[1]]  # GPU 0 has no /proc entry
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert start.gpu_count() == 0 and gpu_nodes.listing(tmp_path / "proc") == []


@pytest.mark.parametrize(("visible", "index"), [
    (None, 0), ("", None), ("1", 1), ("1,0", 1), ("0,1", 0), (" 1 ", 1),
    ("GPU-1b3fb574", 1), ("GPU-6ab737fb-805c-2744-bbca-daa7a72673be,1", 0),
    ("2", None), ("MIG-4f6e", None), ("GPU-ffff", None),
])
def test_the_graders_gpu_is_the_first_cuda_visible_devices_names(visible, index):
    gpu = gpu_nodes.pick(visible, TWO)
    assert (gpu.index if gpu else None) == index


def test_a_sandbox_gets_the_control_nodes_and_its_own_gpus_node_only(monkeypatch, tmp_path):
    assert gpu_nodes.only(NODES, TWO[1]) == [
        "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
        "/dev/nvidia0", "/dev/nvidiactl"]
    monkeypatch.setattr(sandbox, "nvidia_devices", lambda: NODES)
    monkeypatch.setattr(gpu_nodes, "own_gpu", lambda visible: gpu_nodes.pick(visible, TWO))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # a Dask worker of GPU 0
    cmd = sandbox.command(["true"], tmp_path, env={})
    bound = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dev-bind"]
    assert "/dev/nvidia2" in bound and "/dev/nvidia0" not in bound
    assert "/dev/nvidiactl" in bound and "/dev/nvidia-uvm" in bound
    env = {cmd[i + 1]: cmd[i + 2] for i, a in enumerate(cmd) if a == "--setenv"}
    assert env["CUDA_VISIBLE_DEVICES"] == TWO[0].uuid  # never the caller's "0,1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU for the grader: none inside
    cmd = sandbox.command(["true"], tmp_path, env={})
    bound = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dev-bind"]
    assert "/dev/nvidiactl" in bound and not {"/dev/nvidia0", "/dev/nvidia2"} & set(bound)


def test_several_gpus_that_cannot_be_told_apart_are_all_bound_with_a_warning(
        monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "nvidia_devices", lambda: NODES)
    monkeypatch.setattr(gpu_nodes, "own_gpu", lambda visible: None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4f6e")
    gpu_nodes._warn_unknown.cache_clear()
    with pytest.warns(RuntimeWarning, match="cannot tell which of this machine's 2 GPUs"):
        cmd = sandbox.command(["true"], tmp_path, env={})
    bound = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dev-bind"]
    assert {"/dev/nvidia0", "/dev/nvidia2"} <= set(bound)
    env = {cmd[i + 1]: cmd[i + 2] for i, a in enumerate(cmd) if a == "--setenv"}
    assert env["CUDA_VISIBLE_DEVICES"] == "MIG-4f6e"


PROBE = """
import json, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(16)))  # as a hostile cell would
import pycuda.driver as cuda
cuda.init()
buses = [cuda.Device(i).pci_bus_id().lower() for i in range(cuda.Device.count())]
with os.fdopen(int(sys.argv[1]), "w") as f:
    json.dump(buses, f)
"""


@pytest.mark.gpu
@pytest.mark.skipif(sandbox.problem() is not None, reason=f"no sandbox: {sandbox.problem()}")
def test_each_graders_sandbox_reaches_its_own_gpu_and_no_other(monkeypatch, tmp_path):
    gpus = gpu_nodes.listing()
    assert gpus, "nvidia-smi and /proc/driver/nvidia name no GPU"
    seen = {}
    for gpu in gpus:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(
            str(g.index) for g in [gpu, *(g for g in gpus if g != gpu)]))  # as dask-cuda
        work = tmp_path / str(gpu.index)
        work.mkdir()
        res = sandbox.run([sys.executable, "-c", textwrap.dedent(PROBE), sandbox.CHANNEL],
                          work, env={}, limits=sandbox_limits(Backend.GPU, 120))  # as a grader
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        seen[gpu.bus_id] = json.loads(res.channel)
    print(seen)
    assert seen == {bus: [bus] for bus in seen}
