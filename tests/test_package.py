"""The course package as a learner and an instructor install it: a wheel and an sdist built
with ``python -m build``, installed with ``[grade]`` into a fresh virtual environment that
sees only what the wheel declares, then a notebook's check and a class run from there.

Hermetic: the build uses this environment's setuptools (``--no-isolation``). The install
takes nothing but a wheelhouse of the declared dependencies (``--no-index --find-links``;
no pip configuration, no development site-packages, no ``.pth``): the wheelhouse is made
once with ``pip download`` of the wheel's own requirements under ``constraints.txt`` and
kept under ``.pytest_cache/`` (keyed by those requirements and the constraints), so a
rerun downloads nothing. A module a learner's or an instructor's code imports that the
wheel does not declare fails here (``No module named 'PIL'``), as it would for them.
``test_every_import_is_declared`` checks the same statically, module by module.

Time on 2 cores (warm wheelhouse): about 45 s for the install, the notebook check and a
one-submission class run; the first run adds the download (about a minute here).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tilelab import __version__

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    str(p.relative_to(REPO))
    for pattern in ("tilelab/emu/prelude/*.h", "tilelab/kernels/*.cu", "tilelab/book/static/*")
    for p in REPO.glob(pattern)
)
WHEELHOUSES = REPO / ".pytest_cache" / "tilelab-wheelhouse"

# which extras a part of the package may import from (the base always): the parts a learner
# runs (the notebook, the picture, the grader, the emulator) take the base alone
EXTRAS_OF = {
    "tilelab/classroom/": ("grade",),
    "tilelab/publish.py": ("grade", "book"),
    "tilelab/cluster/": ("grade", "cluster", "gpu", "postgres"),
    "tilelab/book/": ("book",),
    "tilelab/experiments/": ("gpu",),
    "tilelab/device/": ("gpu",),
}
# imported only where present, each with its fallback: not requirements of any role
OPTIONAL = {
    "pycuda": "the GPU backend (the [gpu] extra); the emulator without it",
    "dask_cuda": "one Dask worker per GPU (requirements-gpu.txt); a worker per device without it",
    "IPython": "inside a Jupyter kernel only; a PNG written to a file without it",
    "torch": "the bench's second cuBLAS binding, PyTorch or else CuPy, where installed",
    "cupy": "the bench's second cuBLAS binding, PyTorch or else CuPy, where installed",
}


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: int = 600) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, env={**clean, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def declared() -> dict[str, set[str]]:
    """The distributions pyproject.toml names: the base's under "", each extra's by name."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    name = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")

    def names(reqs: list[str]) -> set[str]:
        return {canonical(name.match(r).group(1)) for r in reqs}

    out = {"": names(project["dependencies"])}
    out.update({k: names(v) for k, v in project["optional-dependencies"].items()})
    return out


def canonical(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def third_party_imports(path: Path) -> set[str]:
    """Top-level modules a file imports, anywhere in it, besides the standard library's."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"tilelab"}


def test_every_import_is_declared():
    """Each module of the package imports only what the base, or an extra of its part,
    declares (a learner's parts: the base alone)."""
    deps = declared()
    dists = packages_distributions()
    files = sorted((REPO / "tilelab").rglob("*.py"))
    assert files
    missing = []
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        extras = next((v for k, v in EXTRAS_OF.items() if rel.startswith(k)), ())
        allowed = deps[""].union(*(deps[e] for e in extras))
        for module in sorted(third_party_imports(path)):
            if module in OPTIONAL:
                continue
            owners = {canonical(d) for d in dists.get(module, [module])}
            if not owners & allowed:
                missing.append(f"{rel} imports {module} ({', '.join(sorted(owners))}), "
                               f"declared in none of: base{''.join(', ' + e for e in extras)}")
    assert not missing, "\n".join(missing)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """``python -m build`` (sdist, then the wheel from it) of a copy of the package's files."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "tilelab", src / "tilelab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)], src)
    return out


def wheel_of(dist: Path) -> Path:
    return dist / f"tilelab-{__version__}-py3-none-any.whl"


@pytest.mark.slow
def test_wheel_and_sdist_carry_the_headers_and_kernels(dist):
    wheel = wheel_of(dist)
    sdist = dist / f"tilelab-{__version__}.tar.gz"
    assert SHIPPED and any(s.endswith(".h") for s in SHIPPED)
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for path in SHIPPED:
        assert path in in_wheel, f"{path} missing from the wheel"
        assert path in in_sdist, f"{path} missing from the sdist"
    entry = zipfile.ZipFile(wheel).read(f"tilelab-{__version__}.dist-info/entry_points.txt")
    assert b"tilelab = tilelab.cli:main" in entry


def requirements(wheel: Path, extras: tuple[str, ...]) -> list[str]:
    """The wheel's own Requires-Dist lines for the base and ``extras`` (markers dropped)."""
    meta = zipfile.ZipFile(wheel).read(f"tilelab-{__version__}.dist-info/METADATA").decode()
    out = []
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        req, _, marker = line.removeprefix("Requires-Dist: ").partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra is None or extra.group(1) in extras:
            out.append(req.strip())
    return sorted(set(out))


def no_pip_config(**more: str) -> dict[str, str]:
    """An environment in which pip reads no configuration file and no PIP_* variable of
    this machine (its own find-links and indexes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, **more}


def wheelhouse(wheel: Path) -> Path:
    """The declared dependencies of ``tilelab[grade]`` as wheels, pinned by constraints.txt:
    downloaded once (with this machine's pip configuration: its index), then reused."""
    reqs = requirements(wheel, ("grade",))
    constraints = (REPO / "constraints.txt").read_bytes()
    key = hashlib.sha256("\n".join(reqs).encode() + b"\0" + constraints).hexdigest()[:16]
    house = WHEELHOUSES / key
    if (house / ".complete").is_file():
        return house
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir(parents=True)
    (house / "requirements.txt").write_text("\n".join(reqs) + "\n")
    run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d",
         str(house), "-r", str(house / "requirements.txt"), "-c", str(REPO / "constraints.txt")],
        house, timeout=900)
    (house / ".complete").write_text(key + "\n")
    return house


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A fresh virtual environment holding ``tilelab[grade]`` from the wheel and the
    wheelhouse only: no development site-packages, no pip configuration, no index."""
    wheel = wheel_of(dist)
    house = wheelhouse(wheel)
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)], venv.parent)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-compile", "--no-index", "--find-links", str(house),
                    "-c", str(REPO / "constraints.txt"), f"{wheel}[grade]"],
                   cwd=venv.parent, env=no_pip_config(), check=True, capture_output=True,
                   text=True, timeout=600)
    return venv


def in_venv(venv: Path, code: str, cwd: Path, **env: str) -> str:
    return run([str(venv / "bin" / "python"), "-c", code], cwd, env=env).stdout


@pytest.mark.slow
def test_the_wheel_venv_sees_only_what_the_wheel_declares(installed, tmp_path):
    where = in_venv(installed, "import tilelab, sys; print(tilelab.__file__); print(sys.path)",
                    tmp_path)
    assert Path(where.splitlines()[0]).is_relative_to(installed), where
    for p in (REPO, Path(sys.prefix) / "lib"):
        assert str(p) not in where.splitlines()[1], f"{p} is on the wheel venv's path: {where}"
    pths = [p.name for p in installed.glob("lib/python*/site-packages/*.pth")]
    assert not [p for p in pths if "tilelab" in p or "test" in p], pths


@pytest.mark.slow
def test_a_notebook_check_runs_from_the_installed_wheel(installed, tmp_path):
    """The notebook's cells as a learner runs them: the set-up line, then a check of a
    kernel that never writes its output, which draws the picture without asking."""
    out = in_venv(installed, (
        "from tilelab import notebook\n"
        "notebook.setup()\n"
        "notebook.check('naive', '__global__ void matmul_naive(const float* A, const float* "
        "B, float* C, int M, int N, int K) { }')\n"
    ), tmp_path, TILELAB_BACKEND="emu")
    assert "CPU emulator" in out and "FAIL" in out, out[-2000:]
    assert "no picture" not in out, out[-2000:]
    assert "(picture written to tilelab_naive.png)" in out, out[-2000:]
    assert (tmp_path / "tilelab_naive.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_a_class_is_graded_from_the_installed_wheel(installed, tmp_path):
    """nbgrader's own command adds the student, ``tilelab grade`` grades the reference
    kernel's notebook: its points, and feedback without a traceback from the course's
    cells (a module the wheel forgot shows there as ModuleNotFoundError)."""
    from support.classroom import (
        SANDBOXED,
        copy_course,
        kernel_cell,
        released_stub,
        solution_kernel,
        submission,
    )

    root = tmp_path / "course"
    copy_course(root)
    folder = root / "autograder" / "submitted" / "ann" / "01-naive"
    folder.mkdir(parents=True)
    cells = {e: kernel_cell(released_stub(e), solution_kernel(e)) for e in ("add2d", "naive")}
    (folder / "naive.ipynb").write_text(json.dumps(submission("01-naive", cells)))
    bin_ = installed / "bin"
    env = {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "TILELAB_BACKEND": "emu"}
    run([str(bin_ / "nbgrader"), "db", "student", "add", "ann"], root / "autograder", env=env)
    out = run([str(bin_ / "tilelab"), "grade", "--course", str(root), "--quiet", "--json"]
              + ([] if SANDBOXED else ["--no-sandbox"]), root, env=env).stdout
    summary = json.loads(out)
    assert summary["failures"] == [], summary["failures"]
    assert [(s["student"], s["score"]) for s in summary["submissions"]] == [("ann", 5.0)]
    html = (root / "autograder" / "feedback" / "ann" / "01-naive" / "naive.html").read_text()
    assert "ModuleNotFoundError" not in html and "No module named" not in html
    for said in ("Traceback (most recent call last)", "AssertionError"):
        assert said not in html, f"{said} in the feedback of a correct submission"
