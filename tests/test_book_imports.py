"""A Sphinx build of the book loads no grading, emulator or GPU-runtime module: the book
reads data files and the catalogue's tables, never the grader (a page with every kind of
directive and role, built in a fresh process that then lists the tilelab modules it holds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "tests" / "data" / "book"
FORBIDDEN = ("tilelab.grading", "tilelab.emu", "tilelab.device.runtime")

PAGE = """\
# Every directive

```{provenance} sgemm
```

{measured}`matmul[kernel=naive,n=4096].gflops :,.0f` and
{compare}`matmul[kernel=tiled32_padded,n=4096].median_ms vs
matmul[kernel=tiled32,n=4096].median_ms`.

```{measured-table} matmul
:where: n=4096
:columns: kernel, median_ms
```

```{measured-figure} matmul
:kind: bar
:y: gflops
:hue: n
```

```{ablation-table} sgemm
:sizes: 4096
```

```{kernel-listing} sgemm_04_warptile.cu
:section: core
:against: sgemm_03_vectorized.cu
```

```{diagram} banks
```

```{diagram} warp-reads
```

```{tiling-trace}
```

```{reuse-table}
:sizes: 4x2
```

```{exercise-table}
```
"""

SCRIPT = """
import json, sys
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace
src, out, result = sys.argv[1:4]
with docutils_namespace():
    Sphinx(src, src, out, out + "/doctrees", "html", status=None, warning=sys.stderr,
           freshenv=True).build()
json.dump(sorted(m for m in sys.modules if m == "tilelab" or m.startswith("tilelab.")),
          open(result, "w"))
"""


@pytest.mark.slow
def test_a_book_build_loads_no_grader_emulator_or_gpu_runtime(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "index.md").write_text(PAGE)
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'tilelab.book']\n"
        "html_theme = 'sphinx_book_theme'\n"
        "myst_enable_extensions = ['dollarmath', 'colon_fence']\n"
        f"tilelab_data_dir = {str(EXAMPLES)!r}\n"
        "suppress_warnings = ['config.cache']\n")
    result = tmp_path / "modules.json"
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(src), str(tmp_path / "out"),
                        str(result)], capture_output=True, text=True, timeout=300,
                       cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr[-3000:]
    modules = json.loads(result.read_text())
    assert "tilelab.book.directives" in modules and "tilelab.catalog.road" in modules
    loaded = [m for m in modules if m.startswith(FORBIDDEN)]
    assert loaded == [], f"a book build imports {loaded}"
    assert "Every directive" in (tmp_path / "out" / "index.html").read_text()
