"""A Jupyter kernel manager that starts each submitted notebook's kernel in a sandbox.

A class run points nbgrader's ``Execute`` preprocessor at
:class:`SandboxedKernelManager` (``kernel_manager_class``). The kernel then runs under
bubblewrap (see :mod:`tilelab.isolation.bubblewrap`): no network (it has its own, empty, network
namespace), the submission's folder read-only as its working folder, a private ``/tmp``,
the verdict cache of the class run read-only, the ``tilelab`` package without its
reference kernels, and nothing else of the course.

nbgrader reaches the kernel over ZeroMQ; across network namespaces TCP on the loopback
cannot work, so the kernel is told to use IPC transport: Unix sockets in a private folder
bound into the sandbox at the same path. Interrupts go as messages on the control channel
(the sandboxed kernel is in its own session, beyond a signal to a process group).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import zmq
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Dict, Float, Int, Unicode

from tilelab import settings
from tilelab.isolation import bubblewrap as sandbox
from tilelab.isolation import scratch
from tilelab.isolation.limits import Cgroup, Limits, shim, sized_folder, unmount

#: The course's reference kernels, hidden from a notebook (its hidden tests read the class
#: run's verdicts; nothing a notebook runs needs them).
REFERENCE_KERNELS = f"{sandbox.PACKAGE_ROOT}/tilelab/kernels"
CONNECTION_BYTES = 1 << 20  # the connection file and the sockets' names
MESSAGE_BYTES = 16 << 20  # the largest message taken from a notebook's kernel



#: The longest path of the kernel's sockets (``<folder>/k-<n>``): a Unix socket's path holds
#: at most 107 bytes, and a longer one fails every notebook of the run
IPC_PATH_MAX = 100


def ipc_folder() -> str:
    """A fresh folder for the kernel's sockets: in this process's scratch folder, or, where
    ``$TMPDIR`` is too deep for a socket's path there, in /tmp."""
    path = str(scratch.make("k"))
    if len(os.path.join(path, "k-99")) <= IPC_PATH_MAX:
        return path
    scratch.remove(path)
    return tempfile.mkdtemp(prefix="tilelab-k-", dir="/tmp")


#: The sandboxed kernels this process runs now (:func:`stop_kernels`).
_RUNNING: weakref.WeakSet[SandboxedKernelManager] = weakref.WeakSet()


def stop_kernels() -> None:
    """Kill every sandboxed kernel this process runs now (its launcher: the sandbox dies with
    it), from any thread: a class run that stops ends the notebook it runs, whose client
    then finds its kernel dead and returns."""
    for km in list(_RUNNING):
        process = getattr(km.provisioner, "process", None)
        if process is not None:
            with contextlib.suppress(OSError):
                process.kill()


def kernel_limits(wall_seconds: float, memory: int, processes: int, output_bytes: int,
                  shares_gpu: bool) -> Limits:
    """A notebook kernel's limits: the whole tree's memory in its cgroup; on the emulator
    each process's address space too, never where a GPU is bound in (CUDA maps far more
    than it uses)."""
    gpu = bool(sandbox.nvidia_devices()) and not shares_gpu
    return Limits(wall_seconds=wall_seconds, cpu_seconds=int(wall_seconds), memory=memory,
                  address_space=None if gpu else memory, processes=processes,
                  output_bytes=output_bytes)


def kernel_command(cmd: list[str], cwd: str, outer: Mapping[str, str],
                   environment: Mapping[str, str | None], ipc_dir: str, limits: Limits,
                   shares_gpu: bool, cgroup: Cgroup | None) -> list[str]:
    """The command line that starts kernel ``cmd`` in its sandbox, over ``cwd`` (read-only),
    its sockets in ``ipc_dir``: its ``TILELAB_`` variables the grader's own (``outer``)
    with ``environment`` over them (None: unset), never a lock's; the verdict cache they
    name bound read-only; no GPU where ``shares_gpu``."""
    env = {k: v for k, v in outer.items() if k.startswith("TILELAB_")}
    for k, v in environment.items():
        if k.startswith("TILELAB_"):
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
    for name in (settings.GPU_LOCK.name, settings.COUNTERS_LOCK.name,
                 settings.START_LOCK.name):
        env.pop(name, None)  # the lock is the grader's, never the notebook's
    if shares_gpu:
        env[settings.BACKEND.name] = "emu"
    env.update(HOME="/tmp", IPYTHONDIR="/tmp/.ipython", MPLCONFIGDIR="/tmp",
               JUPYTER_RUNTIME_DIR="/tmp", JUPYTER_PLATFORM_DIRS="1")
    read_only = []
    cache = env.get("TILELAB_VERDICT_CACHE")
    if cache and os.path.isdir(cache):
        read_only.append((cache, cache))
    inner = sandbox.command(cmd, cwd, env=env, read_only=read_only,
                            writable=[(ipc_dir, ipc_dir)], limits=limits,
                            work_read_only=True, hidden=[REFERENCE_KERNELS],
                            gpu=not shares_gpu)
    return [*shim(limits, cgroup, wall=limits.wall_seconds), *inner]


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel inside a bubblewrap sandbox, connected over IPC sockets."""

    wall_seconds = Float(1800.0, config=True,
                         help="Total seconds one notebook's kernel may live (all its cells).")
    memory_bytes = Int(8 << 30, config=True,
                       help="Memory of the kernel's whole tree of processes, tmpfs included.")
    processes = Int(256, config=True, help="Processes the kernel may start.")
    output_bytes = Int(1 << 20, config=True, help="Kernel stdout/stderr kept, per stream.")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ipc_dir = ipc_folder()
        # the kernel may write there: a small tmpfs where the grader may mount one
        self._ipc_sized = sized_folder(self._ipc_dir, CONNECTION_BYTES)
        self._cgroup: Cgroup | None = None
        self.transport = "ipc"
        self.connection_file = os.path.join(self._ipc_dir, "kernel.json")
        self.ip = os.path.join(self._ipc_dir, "k")

    environment = Dict(value_trait=Unicode(), config=True,
                       help="TILELAB_ variables the kernel is given, over the grader's own.")
    no_gpu = Bool(False, config=True,
                  help="Give the kernel no GPU (a class run whose clean grader times "
                       "kernels while the notebook runs).")

    @property
    def shares_gpu(self) -> bool:
        """Whether the notebook gets no GPU: asked for (:attr:`no_gpu`), or this class
        run's GPU is shared by several grading tasks (a lock named,
        :mod:`tilelab.isolation.gpulock`). In a class run its visible checks stand aside and
        its hidden tests read the clean grader's verdicts, so it needs none; without one it
        cannot put work beside a timed launch, nor hold the GPU from one."""
        return self.no_gpu or bool(settings.GPU_LOCK.get())

    @property
    def limits(self) -> Limits:
        return kernel_limits(self.wall_seconds, self.memory_bytes, self.processes,
                             self.output_bytes, self.shares_gpu)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        args = self._launch_args if isinstance(self._launch_args, dict) else {}
        if self._cgroup is None:
            self._cgroup = Cgroup.make(self.limits)
        return kernel_command(cmd, args.get("cwd") or os.getcwd(), args.get("env") or os.environ,
                              self.environment, self._ipc_dir, self.limits, self.shares_gpu,
                              self._cgroup)

    def client(self, **kwargs: Any) -> Any:
        """A client whose sockets refuse any one message over ``MESSAGE_BYTES`` as it
        arrives (ZeroMQ's MAXMSGSIZE), so a flood of huge outputs or widget messages never
        sits whole in the grader's memory. ZeroMQ then drops that connection: the
        notebook's later outputs are lost (its points come from the clean grade, never from
        its outputs); no sound notebook comes near the size."""
        kc = super().client(**kwargs)
        kc.context.setsockopt(zmq.MAXMSGSIZE, MESSAGE_BYTES)
        return kc

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        sandbox.require()
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        # a kernel's own stdout and stderr (not its cells' outputs, which come over ZeroMQ)
        # would go to the class run's terminal, unbounded: they are dropped
        kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        _RUNNING.add(self)
        return cmd, kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            _RUNNING.discard(self)
            if self._cgroup is not None:  # whatever the kernel left, then its cgroup
                self._cgroup.close()
                self._cgroup = None
            if self._ipc_sized:
                unmount(self._ipc_dir)
            shutil.rmtree(self._ipc_dir, ignore_errors=True)

    # what nbclient calls for a kernel found dead (the base class's points past the above)
    cleanup_resources = _async_cleanup_resources

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Killed, never asked to shut down: its cells have ended or been interrupted, their
        outputs are in, and its sandbox holds nothing to keep. Asked, a kernel still stuck
        in a cell (one that ignores its interrupt) holds the class run for jupyter_client's
        ``shutdown_wait_time`` (5 s) before it is killed all the same, and even a sound one
        for about 0.2 s."""
        await super()._async_shutdown_kernel(now=True, restart=restart)

    shutdown_kernel = _async_shutdown_kernel  # what nbclient calls (as above)


OUTPUT_LIMIT = 4 << 20  # bytes of outputs one notebook may leave (all its cells)
OUTPUT_NOTE = (f"[tilelab: the notebook's outputs, display updates and widget messages "
               f"passed {OUTPUT_LIMIT >> 20} MiB; the rest was dropped]\n")


@dataclass
class OutputCount:
    """What one notebook's outputs came to (all its cells, each display update counted
    once for every output it rewrites), and what was dropped past :data:`OUTPUT_LIMIT`."""

    asked: int = 0  # bytes the kernel sent, kept or not
    dropped: int = 0  # messages not kept


#: The counts of the notebooks this process ran (nbgrader makes the Execute step itself;
#: the sandbox of nbgrader's steps runs one notebook and reports its count).
COUNTS: list[OutputCount] = []


def _size(value: Any) -> int:
    """About the bytes ``value`` (a message's content) takes as JSON, without making the
    JSON (a hostile message of 100 MiB would be copied again); any depth."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, dict):
            total += sum(len(str(k)) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            total += len(item)
            stack.extend(item)
        else:
            total += 8
    return total


def _execute_class(manager: type) -> type:
    from nbgrader.preprocessors import Execute

    class SandboxedExecute(Execute):
        """nbgrader's Execute, its kernels started by ``manager`` (sandboxed), the
        outputs, display updates and comm (widget) messages of one notebook capped
        together at ``OUTPUT_LIMIT`` bytes (the rest is dropped, with a note): an update of
        a display id counts once for every output nbclient rewrites with it. No widget
        state is kept in the grader's memory nor written into the notebook."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["kernel_manager_class"] = manager  # Execute forces its own
            super().__init__(*args, **kwargs)
            self.store_widget_state = False
            self._count = OutputCount()
            COUNTS.append(self._count)
            self._noted = False
            self._at: tuple[Any, int] | None = None  # the cell now running, its index

        def _charge(self, msg: dict, times: int) -> bool:
            """Count ``msg`` ``times`` over; False (after one note) once past the cap."""
            size = _size(msg.get("content", {})) + sum(len(b) for b in msg.get("buffers") or ())
            self._count.asked += size * times
            if self._count.asked <= OUTPUT_LIMIT:
                return True
            self._count.dropped += 1
            if not self._noted and self._at is not None:
                self._noted = True
                cell, index = self._at
                note = {**msg, "msg_type": "stream",  # what nbclient reads it by, too:
                        "header": {**msg.get("header", {}), "msg_type": "stream"},
                        "content": {"name": "stderr", "text": OUTPUT_NOTE}}
                super().output(cell.outputs, note, None, index)
            return False

        def process_message(self, msg: dict, cell: Any, cell_index: int) -> Any:
            self._at = (cell, cell_index)
            return super().process_message(msg, cell, cell_index)

        def output(self, outs: list, msg: dict, display_id: str | None,
                   cell_index: int) -> Any:
            if self._charge(msg, 1):
                return super().output(outs, msg, display_id, cell_index)
            return None

        def _update_display_id(self, display_id: str, msg: dict) -> None:
            targets = sum(map(len, self._display_id_map.get(display_id, {}).values()))
            if targets and self._charge(msg, targets):
                super()._update_display_id(display_id, msg)

        def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
            if self._charge(msg, 1):
                super().handle_comm_msg(outs, msg, cell_index)

    return SandboxedExecute


def sandbox_autograde(config: Any, manager: type | None = None) -> None:
    """Make ``nbgrader autograde`` under ``config`` run every notebook's kernel sandboxed:
    its Execute step is replaced by one whose kernels ``manager`` starts in a sandbox
    (:class:`SandboxedKernelManager` unless named) and whose outputs are capped."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    steps = list(config.Autograde.get("autograde_preprocessors", default))
    sandboxed = _execute_class(manager or SandboxedKernelManager)
    config.Autograde.autograde_preprocessors = [sandboxed if s is Execute else s for s in steps]
