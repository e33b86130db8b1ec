"""The course package as a learner installs it: a wheel and an sdist built with
``python -m build``, installed into a fresh virtual environment, checking a kernel on the
emulator from there (the prelude headers and the course's kernels travel with it).

Hermetic: the build uses this environment's setuptools (``--no-isolation``), the install
takes nothing from an index (``--no-index``); numpy comes from this environment (a ``.pth``
file names its site-packages after the new environment's own, so the wheel's copy of the
package wins), and the test asserts the package imported is the installed copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tilelab import __version__

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    str(p.relative_to(REPO))
    for pattern in ("tilelab/emu/prelude/*.h", "tilelab/kernels/*.cu", "tilelab/book/static/*")
    for p in REPO.glob(pattern)
)

pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, env={**clean, **env}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


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


def test_wheel_and_sdist_carry_the_headers_and_kernels(dist):
    wheel = dist / f"tilelab-{__version__}-py3-none-any.whl"
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


def test_installed_wheel_checks_a_kernel_on_the_emulator(dist, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py, cli = venv / "bin" / "python", venv / "bin" / "tilelab"
    site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               tmp_path).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "tilelab-test-deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    wheel = dist / f"tilelab-{__version__}-py3-none-any.whl"
    run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--force-reinstall",
         str(wheel)], tmp_path)
    where = run([str(py), "-c", "import tilelab; print(tilelab.__file__)"], tmp_path).stdout
    assert Path(where.strip()).is_relative_to(venv), f"tilelab imported from {where}"
    kernel = tmp_path / "naive.cu"
    kernel.write_text((REPO / "tilelab" / "kernels" / "matmul_naive.cu").read_text())
    out = run([str(cli), "check", "naive", str(kernel), "--json"], tmp_path,
              TILELAB_BACKEND="emu").stdout
    verdict = json.loads(out)
    assert verdict["backend"] == "emu" and verdict["correct"] is True, out[-2000:]
