"""The package's structure budget, from its source (``benchmarks/import_graph.py``).

No package cycle with every subpackage one room; no private name imported from another
module; no import of the package inside a function outside the entry points that need one
(the command line, the grading worker, the Sphinx extension's ``setup``); the floor rules
(the class run never imports the cluster; the isolation, which both the grader and the
class run use, imports nothing that grades or runs a class); no function of the grader
over 60 lines, the diagnosis aside.
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


def test_no_room_imports_a_room_its_floor_rule_forbids():
    """The class run never imports the cluster; the isolation never imports the grader,
    the class run or anything above them."""
    assert {"classroom", "isolation"} <= set(import_graph.NEVER_IMPORTS)
    assert import_graph.forbidden_imports(PACKAGE) == []


def test_no_function_of_the_grader_is_over_60_lines_but_the_diagnosis():
    assert import_graph.long_grader_functions(PACKAGE) == []


def test_the_budget_sees_what_it_forbids(tmp_path):
    """The checks find a cycle, a private import, a local import, an import a floor rule
    forbids and a long function of the grader where there are."""
    pkg = tmp_path / "pkg"
    for sub in ("a", "b", "isolation", "grading"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from pkg.b.y import _hidden\n")
    (pkg / "b" / "y.py").write_text("_hidden = 1\n\ndef f():\n    from pkg.a import x\n")
    (pkg / "isolation" / "walls.py").write_text("from pkg.grading import steps\n")
    body = "".join(f"    x = {i}\n" for i in range(60))
    (pkg / "grading" / "steps.py").write_text(f"def long():\n{body}\n\ndef short():\n    pass\n")
    (pkg / "grading" / "diagnosis.py").write_text(f"def rules():\n{body}")
    assert import_graph.package_cycles(pkg) == [["pkg.a", "pkg.b"]]
    assert import_graph.private_imports(pkg) == ["pkg.a.x:1 pkg.b.y._hidden"]
    assert import_graph.local_imports(pkg) == ["pkg.b.y:4 pkg.a"]
    assert import_graph.forbidden_imports(pkg) == ["pkg.isolation.walls -> pkg.grading.steps"]
    assert import_graph.long_grader_functions(pkg) == ["61 pkg.grading.steps:1 long"]
