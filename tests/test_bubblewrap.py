"""The bubblewrap sandbox every graded submission runs in: what it hides, what it limits.

These run real sandboxes (bubblewrap must be installed and able to create user
namespaces; `make sandbox` installs it). Each hostile step is tried from inside and must
fail, while the sandbox itself always returns a result.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import running

from tilelab import settings
from tilelab.isolation import bubblewrap as sandbox
from tilelab.isolation import enter, gpulock

pytestmark = pytest.mark.skipif(sandbox.problem() is not None,
                                reason=f"no sandbox here: {sandbox.problem()}")


def run_py(code: str, work, **kw) -> sandbox.Result:
    """Python code in a sandbox; ``sys.argv[1]`` in it is the result pipe's descriptor."""
    return sandbox.run([sys.executable, "-c", textwrap.dedent(code), sandbox.CHANNEL], work,
                       **kw)


def test_inside_a_submission_sees_only_its_folder_and_no_network(tmp_path):
    secret = tmp_path / "gradebook.db"
    secret.write_text("instructor only")
    work = tmp_path / "work"
    work.mkdir()
    (work / "submission.ipynb").write_text("{}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    res = run_py(f"""
        import os, socket
        print("uid", os.getuid())
        print("files", sorted(os.listdir(".")))
        for path in ({str(secret)!r}, "/etc/shadow", {str(tmp_path)!r}):
            try:
                open(path).read(); print("READ", path)
            except OSError as e:
                print("hidden", type(e).__name__)
        try:
            socket.create_connection(("127.0.0.1", {port}), 2); print("CONNECTED")
        except OSError as e:
            print("no network", e.errno)
        try:
            open("/usr/evil", "w"); print("WROTE /usr")
        except OSError as e:
            print("read-only", e.errno)
        open("mine.txt", "w").write("ok")
    """, work)
    server.close()
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert "uid 65534" in out and "files ['submission.ipynb']" in out
    assert "READ" not in out and "CONNECTED" not in out and "WROTE" not in out
    assert out.count("hidden") == 3 and "no network" in out and "read-only" in out
    assert (work / "mine.txt").read_text() == "ok"  # its own folder is writable


def test_the_result_channel_holds_only_what_the_command_wrote(tmp_path):
    # a detached process (own session, double fork) tries to write a forged result after
    # the command has exited; the sandbox's pid namespace ends it first
    res = run_py("""
        import os, sys, time
        channel = int(sys.argv[1])
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1)
                os.write(channel, b"forged")
            os._exit(0)
        os.write(channel, b"real")
    """, tmp_path)
    assert res.channel == b"real"


def test_a_sandbox_keeps_the_graders_thread_caps_and_nothing_else_of_its_environment(
        tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # as a Dask worker has it
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("GRADER_SECRET", "instructor only")
    res = run_py("""
        import os, sys
        keys = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GRADER_SECRET")
        os.write(int(sys.argv[1]), repr([os.environ.get(k) for k in keys]).encode())
    """, tmp_path)
    assert res.channel == b"['1', '1', None]"


def test_the_wall_budget_kills_the_whole_tree(tmp_path):
    res = run_py("""
        import os, time
        if os.fork() == 0:
            os.setsid(); time.sleep(600)
        time.sleep(600)
    """, tmp_path, limits=sandbox.Limits(wall_seconds=2))
    assert res.timed_out and res.returncode is None


def test_output_is_capped(tmp_path):
    res = run_py("""
        import sys
        chunk = "x" * (1 << 20)
        for _ in range(1024):  # 1 GiB
            sys.stdout.write(chunk)
    """, tmp_path, limits=sandbox.Limits(output_bytes=1 << 16, wall_seconds=120))
    assert res.truncated and len(res.stdout) == 1 << 16


def test_memory_files_and_processes_are_limited(tmp_path):
    res = run_py("""
        import os, time
        try:
            b = bytearray(10 << 30); print("ALLOCATED 10 GB")
        except MemoryError:
            print("no 10 GB")
        try:
            with open("big", "wb") as f:
                f.seek(10 << 30); f.write(b"x")  # a sparse 10 GB file
            print("WROTE 10 GB")
        except OSError as e:
            print("file too large", e.errno)
        started = 0
        for _ in range(400):
            try:
                if os.fork() == 0:
                    time.sleep(30); os._exit(0)
                started += 1
            except OSError:
                break
        print("forks", started)
    """, tmp_path, limits=sandbox.Limits(processes=64, file_bytes=1 << 20,
                                          address_space=2 << 30, wall_seconds=60))
    out = res.stdout.decode()
    assert "no 10 GB" in out and "file too large 27" in out, (out, res.stderr)
    forks = int(out.split("forks")[1])
    assert forks < 64
    assert not (tmp_path / "big").exists() or (tmp_path / "big").stat().st_size <= 1 << 20


def test_a_missing_bwrap_is_reported_with_what_to_install(monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", "bwrap-not-installed-anywhere")
    sandbox.problem.cache_clear()
    try:
        why = sandbox.problem()
        assert why and "apt-get install bubblewrap" in why
        with pytest.raises(sandbox.SandboxUnavailable, match="install bubblewrap"):
            sandbox.require()
    finally:
        monkeypatch.undo()
        sandbox.problem.cache_clear()


def test_nvidia_nodes_are_bound_when_present(tmp_path):
    cmd = sandbox.command(["true"], tmp_path, env={})
    for node in sandbox.nvidia_devices():
        assert ["--dev-bind", node, node] == cmd[cmd.index(node) - 1:cmd.index(node) + 2]
    assert "--unshare-all" in cmd and "--die-with-parent" in cmd and "--clearenv" in cmd


@pytest.mark.timeout(300)
def test_a_notebook_kernel_runs_sandboxed_over_ipc(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    from tilelab.classroom.jupyter_sandbox import SandboxedKernelManager

    secret = tmp_path / "gradebook.db"
    secret.write_text("instructor only")
    sub = tmp_path / "submitted" / "ann"
    sub.mkdir(parents=True)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    cells = [
        "import os; print(os.getuid(), os.getcwd())",
        f"try:\n    open({str(secret)!r}).read(); print('READ')\n"
        "except OSError as e:\n    print('hidden')",
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
        "    print('CONNECTED')\nexcept OSError:\n    print('no network')",
        "try:\n    open('x', 'w'); print('WROTE')\nexcept OSError:\n    print('read-only')",
        "import glob\nprint(len(glob.glob('/opt/tilelab/tilelab/kernels/*')),"
        " len(glob.glob('/opt/tilelab/tilelab/*.py')) > 3)",
        "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
        "        try:\n            os.kill(int(p), 9)\n        except OSError:\n            pass",
        "print(6 * 7)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    NotebookClient(nb, kernel_manager_class=SandboxedKernelManager, timeout=60,
                   allow_errors=True, resources={"metadata": {"path": str(sub)}}).execute()
    server.close()
    texts = ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells]
    assert texts[0].split() == ["65534", sandbox.WORK]
    assert texts[1:4] == ["hidden\n", "no network\n", "read-only\n"]
    assert texts[4] == "0 True\n"  # the package, without its reference kernels
    assert texts[6] == "42\n"  # killing what it can see did not end the kernel


@pytest.mark.timeout(300)
def test_a_notebooks_kernel_is_killed_at_its_end_never_asked_to_shut_down(tmp_path,
                                                                          monkeypatch):
    """Once its cells are done the sandboxed kernel is killed at once: asked to shut down,
    a kernel that ignores the request (and SIGTERM) would hold the class run for
    jupyter_client's shutdown wait first."""
    import nbformat
    from nbclient import NotebookClient

    from tilelab.classroom.jupyter_sandbox import SandboxedKernelManager

    asked, killed = [], []
    ask, kill = (SandboxedKernelManager._async_request_shutdown,
                 SandboxedKernelManager._async_kill_kernel)

    async def request_shutdown(self, *args, **kwargs):
        asked.append(self)
        return await ask(self, *args, **kwargs)

    async def kill_kernel(self, *args, **kwargs):
        killed.append(self.provisioner.process)
        return await kill(self, *args, **kwargs)

    monkeypatch.setattr(SandboxedKernelManager, "_async_request_shutdown", request_shutdown)
    monkeypatch.setattr(SandboxedKernelManager, "_async_kill_kernel", kill_kernel)
    deaf = ("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "k = get_ipython().kernel\n"
            "for handlers in (k.control_handlers, k.shell_handlers):\n"
            "    handlers['shutdown_request'] = lambda *a, **kw: None\n"
            "print('deaf')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(deaf)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    sub = tmp_path / "submitted"
    sub.mkdir()
    NotebookClient(nb, kernel_manager_class=SandboxedKernelManager, timeout=60,
                   resources={"metadata": {"path": str(sub)}}).execute()
    assert nb.cells[0].outputs[0]["text"] == "deaf\n"
    assert asked == [] and len(killed) == 1
    assert killed[0].poll() is not None  # the sandbox's launcher, and the kernel with it


@pytest.mark.timeout(300)
@pytest.mark.parametrize("why", ["shared GPU", "graded beside"])
def test_a_notebook_in_a_class_run_that_shares_its_gpu_gets_neither_gpu_nor_lock(
        tmp_path, monkeypatch, why):
    """Where several grading tasks share a GPU, or the clean grade times kernels while the
    notebook runs (:func:`tilelab.classroom.steps.grade_beside`), the notebook's Python
    could otherwise put work beside a timed launch, or hold the lock from one: it runs on
    the emulator, with no GPU node, no lock folder and no lock variable. What the class
    run tells it through the kernel manager (not this process's environment, which the
    clean grade reads meanwhile) it gets, the verdict folder read-only."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    from tilelab.classroom.jupyter_sandbox import SandboxedKernelManager

    lock = gpulock.make(tmp_path / "locks", "0")
    config = Config()
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    if why == "shared GPU":
        monkeypatch.setenv(gpulock.ENV, str(lock))
    else:
        config.SandboxedKernelManager.no_gpu = True
        config.SandboxedKernelManager.environment = {
            settings.VERDICT_CACHE.name: str(verdicts), settings.VERDICT_WAIT.name: "8",
            "PATH": "/nowhere"}  # only TILELAB_ variables are given
    monkeypatch.setenv(settings.BACKEND.name, "gpu")  # as a class run on a GPU tells it
    sub = tmp_path / "submitted" / "ann"
    sub.mkdir(parents=True)
    cell = ("import glob, os\nprint(os.environ.get('TILELAB_BACKEND'), "
            "os.environ.get('TILELAB_GPU_LOCK'), os.environ.get('TILELAB_COUNTERS_LOCK'), "
            f"glob.glob('/dev/nvidia*'), os.path.exists({str(lock)!r}), "
            "os.environ.get('TILELAB_VERDICT_WAIT'), os.environ['PATH'] != '/nowhere', "
            f"os.path.isdir({str(verdicts)!r}) and not os.access({str(verdicts)!r}, os.W_OK))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    NotebookClient(nb, kernel_manager_class=SandboxedKernelManager, timeout=60, config=config,
                   resources={"metadata": {"path": str(sub)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    told = ["None", "True", "False"] if why == "shared GPU" else ["8", "True", "True"]
    assert text.split() == ["emu", "None", "None", "[]", "False", *told]
    cmd = sandbox.command(["true"], tmp_path, env={}, gpu=False)
    assert not [a for a in cmd if a.startswith("/dev/nvidia")]


def test_the_package_inside_is_the_whole_tilelab_package(tmp_path):
    res = run_py("""
        import tilelab.grading.worker, tilelab.emu
        print(tilelab.grading.worker.__file__)
    """, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().strip() == f"{sandbox.PACKAGE_ROOT}/tilelab/grading/worker.py"


def test_tilelab_grade_refuses_without_a_sandbox_and_says_what_to_install(
        monkeypatch, tmp_path, capsys):
    from tilelab import cli

    monkeypatch.setattr(sandbox, "BWRAP", "bwrap-not-installed-anywhere")
    sandbox.problem.cache_clear()
    try:
        assert cli.main(["grade", "--course", str(tmp_path), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "refusing to grade a class without a sandbox" in err
        assert "apt-get install bubblewrap" in err and "--no-sandbox" in err
    finally:
        monkeypatch.undo()
        sandbox.problem.cache_clear()


def test_a_supervised_sandbox_ends_when_the_grader_that_started_it_is_gone(tmp_path):
    """A Jupyter kernel's supervisor (enter.py --wall) once outlived a killed class run for
    its whole 30-minute budget, its sandboxed kernel with it; now it stops them both."""
    started = tmp_path / "pid"
    grader = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-S', {enter.__file__!r}, '[]', '[]', "
        "'--wall', '600', '--', 'sleep', '600'])\n"
        f"open({str(started)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n")])
    for _ in range(300):
        if started.exists() and started.read_text():
            break
        time.sleep(0.02)
    supervisor = int(started.read_text())
    for _ in range(300):
        children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
        if children:
            break
        time.sleep(0.02)
    command = int(children[0])
    grader.kill()
    grader.wait()
    for _ in range(100):
        if not running(supervisor) and not running(command):
            break
        time.sleep(0.1)
    assert not running(command) and not running(supervisor)


def _counting_bwrap(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bwrap that logs each call and runs the real one, but answers as bubblewrap does
    when it can make no sandbox: for a command other than the probe's ``true``, and for
    every command once the file ``broken`` exists (the wrapper itself unchanged)."""
    log, wrapper, broken = tmp_path / "calls", tmp_path / "bwrap", tmp_path / "broken"
    real = __import__("shutil").which("bwrap")
    wrapper.write_text(
        "#!/bin/sh\n"
        f"echo \"$@\" >> {log}\n"
        "for last; do :; done\n"
        f'if [ "$last" != true ] || [ -e {broken} ]; then\n'
        "  echo 'bwrap: No permissions to create new namespace' >&2; exit 1\n"
        "fi\n"
        f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log, broken


def test_a_passed_probe_is_remembered_until_bubblewrap_fails(tmp_path, monkeypatch):
    """The probe sandbox runs once per boot, user and bubblewrap (a check's start is
    shorter by it); where bubblewrap later makes no sandbox, the run says so as before and
    the next process probes again."""
    wrapper, log, broken = _counting_bwrap(tmp_path)
    monkeypatch.setenv("TILELAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sandbox, "BWRAP", str(wrapper))
    sandbox.problem.cache_clear()
    stamps = tmp_path / "cache" / "sandbox"
    try:
        assert sandbox.problem() is None
        sandbox.problem.cache_clear()
        assert sandbox.problem() is None  # remembered: not probed again
        assert len(log.read_text().splitlines()) == 1 and list(stamps.glob("probe-*"))
        work = tmp_path / "work"
        work.mkdir()
        res = sandbox.run(["sh", "-c", "exit 0"], work)  # bubblewrap made no sandbox
        assert res.returncode == 1 and res.stderr.startswith(b"bwrap: ")
        assert not list(stamps.glob("probe-*"))  # forgotten
        sandbox.problem.cache_clear()  # (as in the next process)
        assert sandbox.problem() is None and len(log.read_text().splitlines()) == 3
        broken.touch()  # now bubblewrap makes no sandbox at all
        sandbox.run(["sh", "-c", "exit 0"], work)
        sandbox.problem.cache_clear()
        assert "No permissions" in (sandbox.problem() or "")  # probed again: said so
        assert not list(stamps.glob("probe-*"))
    finally:
        monkeypatch.undo()
        sandbox.problem.cache_clear()


def test_the_package_is_byte_compiled_again_only_when_a_module_changed(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("X = 1\n")
    assert sandbox.byte_compiled(str(pkg))
    compiled = list((pkg / "__pycache__").glob("mod.*.pyc"))
    assert len(compiled) == 1 and list((pkg / "__pycache__").glob("compiled-*"))
    compiled[0].unlink()
    sandbox.byte_compiled.cache_clear()
    assert sandbox.byte_compiled(str(pkg))  # nothing changed: nothing read or written
    assert not compiled[0].exists()
    (pkg / "mod.py").write_text("X = 22\n")
    sandbox.byte_compiled.cache_clear()
    assert sandbox.byte_compiled(str(pkg)) and compiled[0].exists()
    assert len(list((pkg / "__pycache__").glob("compiled-*"))) == 1
