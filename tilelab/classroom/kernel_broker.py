"""A notebook's kernel, started in its own sandbox for nbgrader's steps running in theirs.

nbgrader's steps over a learner's notebook run in a sandbox of their own
(:mod:`tilelab.classroom.notebook_sandbox`); the notebook's kernel runs in another, exactly
as :class:`~tilelab.classroom.jupyter_sandbox.SandboxedKernelManager` starts one (its own
cgroup, limits and ``/proc``, nothing of the course but the read-only notebook folder).
A sandbox cannot make the other inside itself, so the grader makes both: inside,
:class:`BrokeredKernelManager` asks for its kernel over the sandbox's pipes (launch, poll,
signal, kill, clean up), and outside, :class:`KernelLauncher` does it. The two sides share
only the kernel's socket folder. What the launcher starts is decided outside: the command
is the kernel's own (the interpreter and its connection file in that folder), over the
submission's autograded folder, with the grader's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from traitlets import Unicode

from tilelab.classroom import jupyter_sandbox
from tilelab.isolation import enter
from tilelab.isolation.limits import Cgroup, Limits, sized_folder, unmount

# ------------------------------------------------------------------ inside the sandbox


class Channel:
    """The sandbox's side of its pipes: JSON lines out on a descriptor, in on stdin."""

    def __init__(self, out_fd: int, inp: IO[bytes]) -> None:
        self.out_fd, self.inp = out_fd, inp

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\n"
        while data:
            data = data[os.write(self.out_fd, data):]

    def read(self) -> dict[str, Any]:
        line = self.inp.readline()
        if not line:
            raise EOFError("the grader closed the sandbox's input")
        return json.loads(line)

    def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(msg)
        return self.read()


#: The channel of this sandbox (set by :mod:`tilelab.classroom.nbgrader_steps`).
CHANNEL: Channel | None = None


def _ask(op: str, **fields: Any) -> dict[str, Any]:
    if CHANNEL is None:
        raise RuntimeError("no grader to ask for a kernel (not inside nbgrader's sandbox)")
    return CHANNEL.ask({"kernel": op, **fields})


class BrokeredProcess:
    """The kernel's process as :class:`~subprocess.Popen` would be, asked of the grader."""

    pid = 0
    stdin = stdout = stderr = None

    def poll(self) -> int | None:
        return _ask("poll").get("returncode")

    def wait(self, timeout: float | None = None) -> int | None:
        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("kernel", timeout or 0)
            time.sleep(0.1)
        return code

    def send_signal(self, signum: int) -> None:
        _ask("signal", signal=int(signum))

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class BrokeredProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, launching through the grader."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        cwd = str(kwargs.get("cwd") or os.getcwd())
        reply = _ask("launch", argv=list(cmd), cwd=cwd)
        if not reply.get("ok"):
            raise RuntimeError(f"the grader did not start the kernel: {reply.get('error')}")
        self.process = BrokeredProcess()
        self.pid, self.pgid, self.cwd = 0, None, cwd
        return self.connection_info

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart:
            _ask("cleanup")


class BrokeredKernelManager(AsyncKernelManager):
    """A kernel manager inside nbgrader's sandbox: the kernel connects over IPC sockets in
    :attr:`ipc_dir` (the folder both sandboxes see), the grader starts it
    (:class:`KernelLauncher`), interrupts go as messages."""

    ipc_dir = Unicode("", config=True, help="The kernel's socket folder (both sandboxes').")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport = "ipc"
        self.connection_file = os.path.join(self.ipc_dir, "kernel.json")
        self.ip = os.path.join(self.ipc_dir, "k")

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"
        if self.provisioner is None:
            self.provisioner = BrokeredProvisioner(kernel_id=self.kernel_id or "kernel",
                                                   kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Killed, never asked (see :class:`SandboxedKernelManager`)."""
        await super()._async_shutdown_kernel(now=True, restart=restart)

    shutdown_kernel = _async_shutdown_kernel
    cleanup_resources = AsyncKernelManager._async_cleanup_resources


# ------------------------------------------------------------------ outside


class KernelLauncher:
    """Starts, watches and ends the kernel sandboxes one nbgrader sandbox asks for."""

    def __init__(self, ipc_dir: str, cwd: Path, inside_cwd: str, limits: Limits,
                 environment: dict[str, str | None], shares_gpu: bool) -> None:
        self.ipc_dir, self.cwd, self.inside_cwd = ipc_dir, cwd, inside_cwd
        self.limits, self.environment, self.shares_gpu = limits, environment, shares_gpu
        self.proc: subprocess.Popen | None = None
        self.cgroup: Cgroup | None = None
        self.launched = 0

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One request of the sandbox's kernel manager, and its answer."""
        op = msg.get("kernel")
        try:
            if op == "launch":
                return self._launch(msg.get("argv"), msg.get("cwd"))
            if op == "poll":
                return {"returncode": None if self.proc is None else self.proc.poll()}
            if op == "signal":
                self._signal(int(msg.get("signal", signal.SIGKILL)))
                return {"ok": True}
            if op == "cleanup":
                self.close()
                return {"ok": True}
        except (OSError, ValueError, TypeError) as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": False, "error": f"no such request: {op!r}"}

    def _launch(self, argv: Any, cwd: Any) -> dict[str, Any]:
        connection = os.path.join(self.ipc_dir, "kernel.json")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                and argv[:1] == [sys.executable] and connection in argv):
            return {"ok": False, "error": "not the kernel's command"}
        if cwd != self.inside_cwd:  # the kernel sees this submission's folder, none other
            return {"ok": False, "error": f"not the submission's folder: {cwd!r}"}
        self.close()
        self.cgroup = Cgroup.make(self.limits)
        cmd = jupyter_sandbox.kernel_command(argv, str(self.cwd), os.environ, self.environment,
                                             self.ipc_dir, self.limits, self.shares_gpu,
                                             self.cgroup)
        self.proc = subprocess.Popen(cmd, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.launched += 1
        return {"ok": True}

    def _signal(self, signum: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if signum == signal.SIGKILL:
            enter.kill_tree(self.proc.pid, self.cgroup.folders if self.cgroup else [])
        else:  # the launcher forwards an interrupt, and ends the tree on a stop
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def close(self) -> None:
        """End the kernel, whatever it left, and its cgroup."""
        if self.proc is not None:
            enter.kill_tree(self.proc.pid, self.cgroup.folders if self.cgroup else [])
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc = None
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None


def socket_folder() -> tuple[str, bool]:
    """A fresh folder for a kernel's sockets, a small tmpfs where this process may mount
    one; (its path, whether it is mounted)."""
    path = jupyter_sandbox.ipc_folder()
    return path, sized_folder(path, jupyter_sandbox.CONNECTION_BYTES)


def remove_socket_folder(path: str, mounted: bool) -> None:
    if mounted:
        unmount(path)
    shutil.rmtree(path, ignore_errors=True)
