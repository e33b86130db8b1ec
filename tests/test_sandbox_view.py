"""Everything each kind of sandbox can see, listed from inside a real one.

A grading worker, a notebook's Jupyter kernel and the base-cache build each walk the
whole file system they are given; beyond the read-only system, Python and ``tilelab``
folders they must find only their own submission and their own scratch, and write only
there. The course around them (a gradebook, other students' folders, solutions, the
course's config) sits beside the submission on the host and must not appear.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from tilelab import settings
from tilelab.grading import sandbox
from tilelab.isolation import bubblewrap as bwrap
from tilelab.isolation import limits

pytestmark = pytest.mark.skipif(bwrap.problem() is not None,
                                reason=f"no sandbox here: {bwrap.problem()}")

#: Walks "/" inside the sandbox: prints (or writes on ``fd:N``) every path outside the
#: read-only roots it is given, and every folder it may write to.
WALK = textwrap.dedent("""
    import json, os, sys
    roots = json.loads(sys.argv[1])
    def under(p, rs):
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in rs)
    seen, writable = [], []
    for top, dirs, files in os.walk("/"):
        if under(top, ["/proc", "/sys"]) or (under(top, ["/dev"]) and
                                             not under(top, ["/dev/shm"])):
            dirs[:] = []
            continue
        if os.access(top, os.W_OK):
            writable.append(top)
        for name in dirs + files:
            p = os.path.join(top, name)
            if not under(p, roots + ["/proc", "/sys", "/dev"]):
                seen.append(p)
    report = json.dumps({"seen": sorted(seen), "writable": sorted(writable)})
    out = sys.argv[2] if len(sys.argv) > 2 else ""
    if out.startswith("fd:"):
        from tilelab.grading.verdict import Verdict
        v = Verdict("naive", "emu", messages=[report])
        os.write(int(out[3:]), json.dumps(v.to_dict()).encode())
    else:
        print(report)
""")


def read_only_roots() -> list[str]:
    """What every sandbox may read: the system, Python and the package (all read-only)."""
    system = [*bwrap._SYSTEM_DIRS, *bwrap._ETC_FILES]
    return [*system, *bwrap.python_paths(), *bwrap.cuda_paths(), bwrap.PACKAGE_ROOT]


def course_beside(tmp_path: Path) -> Path:
    """A course around one submission: a gradebook, another student, solutions, a config."""
    root = tmp_path / "course"
    (root / "source" / "01-naive").mkdir(parents=True)
    (root / "source" / "01-naive" / "naive.ipynb").write_text("SOLUTION")
    (root / "gradebook.db").write_text("SQLite format 3 every student's e-mail")
    (root / "nbgrader_config.py").write_text("c = get_config()")
    (root / "submitted" / "zoe" / "01-naive").mkdir(parents=True)
    (root / "submitted" / "zoe" / "01-naive" / "naive.ipynb").write_text("ZOE")
    own = root / "autograded" / "ann" / "01-naive"
    own.mkdir(parents=True)
    (own / "naive.ipynb").write_text("{}")
    return own


def assert_only(view: dict, allowed: list[str], writable: list[str]) -> None:
    def under(p: str, rs: list[str]) -> bool:
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in rs)

    # the mount points themselves (/, /opt, /tmp, ...) are the sandbox's own empty folders
    stray = [p for p in view["seen"] if not under(p, allowed)
             and not any(r.startswith(p.rstrip("/") + "/") for r in allowed + read_only_roots())]
    assert stray == [], stray
    text = json.dumps(view)
    for secret in ("gradebook", "zoe", "nbgrader_config", "source/01-naive"):
        assert secret not in text, secret
    assert [p for p in view["writable"] if not under(p, writable)] == []


@pytest.mark.slow
def test_a_grading_worker_sees_its_kernel_and_scratch_only(tmp_path, monkeypatch):
    course_beside(tmp_path)
    monkeypatch.chdir(tmp_path / "course")
    monkeypatch.setenv(settings.CLASS_GRADING.name, "1")  # as in a class run (no own cache)
    monkeypatch.setattr(sandbox, "worker_command", lambda *a: [
        sys.executable, "-c", WALK, json.dumps(read_only_roots()), a[2]])
    v = sandbox.grade_source("naive", "__global__ void k() {}", backend_name="emu",
                             sandboxed=True, timeout=120)
    assert v.messages, v
    view = json.loads(v.messages[0])
    assert f"{bwrap.WORK}/kernel.cu" in view["seen"]
    assert_only(view, [bwrap.WORK, "/tmp", "/dev/shm", sandbox.BASE_CACHE],
                [bwrap.WORK, "/tmp", "/dev/shm"])


@pytest.mark.slow
def test_a_cache_build_sees_its_folder_and_scratch_only(tmp_path, monkeypatch):
    # the base cache is built as every sandbox runs: bwrap.run over a fresh folder, no binds
    course_beside(tmp_path)
    monkeypatch.chdir(tmp_path / "course")
    folder = tmp_path / "cache"
    folder.mkdir()
    res = bwrap.run([sys.executable, "-c", WALK, json.dumps(read_only_roots())], folder)
    assert res.returncode == 0, res.stderr
    view = json.loads(res.stdout)
    assert_only(view, [bwrap.WORK, "/tmp", "/dev/shm"], [bwrap.WORK, "/tmp", "/dev/shm"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_notebook_kernel_sees_its_submission_and_verdicts_only(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    from tilelab.classroom import guards
    from tilelab.classroom.jupyter_sandbox import SandboxedKernelManager

    made: list[limits.Cgroup] = []
    real = limits.Cgroup.make.__func__

    def make(cls, lim):  # the real cgroup, recorded
        made.append(real(cls, lim))
        return made[-1]

    monkeypatch.setattr(limits.Cgroup, "make", classmethod(make))
    own = course_beside(tmp_path)
    db = tmp_path / "course" / "gradebook.db"
    cache = tmp_path / "verdicts"  # as a class run has it while the notebook runs
    cache.mkdir()
    (cache / "naive-0123.json").write_text("{}")
    code = f"import sys\nsys.argv = ['walk', {json.dumps(read_only_roots())!r}]\n" + WALK
    fill = ("import errno, os\nfrom ipykernel.connect import get_connection_file\n"
            "d = os.path.dirname(get_connection_file())\n"
            "try:\n    open(d + '/fill', 'wb').write(b'x' * (4 << 20)); print('WROTE')\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno])\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code),
                                         nbformat.v4.new_code_cell(fill)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    with (guards.GradebookGuard(db, "ann"),  # its copy of the gradebook exists meanwhile
          settings.environ(settings.VERDICT_CACHE.set_to(cache))):
        NotebookClient(nb, kernel_manager_class=SandboxedKernelManager, timeout=120,
                       resources={"metadata": {"path": str(own)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    view = json.loads(text)
    assert f"{bwrap.WORK}/naive.ipynb" in view["seen"]
    assert f"{cache}/naive-0123.json" in view["seen"]
    ipc = [p for p in view["seen"] if p.endswith("/kernel.json")]
    assert len(ipc) == 1  # its own connection folder
    folder = str(Path(ipc[0]).parent)
    assert_only(view, [bwrap.WORK, "/tmp", "/dev/shm", str(cache), folder],
                ["/tmp", "/dev/shm", folder])
    filled = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    if os.geteuid() == 0:  # a grader that may mount: the connection folder is a small tmpfs
        assert filled == "ENOSPC\n"
    # once the notebook has run: its connection folder and its cgroup are gone
    assert not Path(folder).exists()
    assert all(not Path(f).exists() for cg in made if cg for f in cg.folders)
