"""The package's structure budget, from its source (``benchmarks/import_graph.py``).

No package cycle with every subpackage one room; no private name imported from another
module; no import of the package inside a function outside the entry points that need one
(the command line, the grading worker, the Sphinx extension's ``setup``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("import_graph",
                                              REPO / "benchmarks" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)
PACKAGE = REPO / "tilelab"


def test_no_package_cycle_with_every_subpackage_one_room():
    assert import_graph.package_cycles(PACKAGE) == []


def test_no_private_name_is_imported_across_modules():
    assert import_graph.private_imports(PACKAGE) == []


def test_no_function_local_import_of_the_package_outside_the_entry_points():
    assert import_graph.local_imports(PACKAGE) == []


def test_the_classroom_never_imports_the_cluster():
    graph = import_graph.graph_of(PACKAGE)
    reach = {m for m, deps in graph.items() if m.startswith("tilelab.classroom")
             for d in deps if d.startswith("tilelab.cluster")}
    assert reach == set()


def test_the_budget_sees_what_it_forbids(tmp_path):
    """The three checks find a cycle, a private import and a local import where there are."""
    pkg = tmp_path / "pkg"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from pkg.b.y import _hidden\n")
    (pkg / "b" / "y.py").write_text("_hidden = 1\n\ndef f():\n    from pkg.a import x\n")
    assert import_graph.package_cycles(pkg) == [["pkg.a", "pkg.b"]]
    assert import_graph.private_imports(pkg) == ["pkg.a.x:1 pkg.b.y._hidden"]
    assert import_graph.local_imports(pkg) == ["pkg.b.y:4 pkg.a"]
