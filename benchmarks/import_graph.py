"""The shape of the ``tilelab`` package, from its source alone (nothing is imported).

Prints the import layers (a module stands one floor above the highest module it imports;
imports inside functions count), the floors and package cycles with every subpackage as
one room, the module cycles, function-local imports of the package's own modules and
private names imported across modules, the longest functions of the grading and class-run
code, and the lines of every module. Run from the repository root::

    python benchmarks/import_graph.py [--package tilelab]

``tests/test_structure.py`` holds the budget: no package cycle, no private name imported
across modules, no function-local import of the package outside its entry points.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

#: The packages or modules whose longest functions are reported.
WATCHED = ("grading", "isolation", "classroom", "cluster", "notebook")
#: The floor rules: a room (a subpackage) and the rooms above it that it must never import.
NEVER_IMPORTS = {
    "classroom": ("cluster",),
    "isolation": ("grading", "classroom", "cluster", "experiments", "book", "notebook",
                  "picture", "cli"),
}
#: No function of the grader is longer than this, the diagnosis's rules aside.
GRADER_FUNCTION_LINES = 60
#: The diagnosis's modules: its rules, and the differential comparison of a thread's
#: accesses with the reference's, one case after another.
DIAGNOSIS = ("diagnosis", "index_diff")
#: Modules that may import the package inside a function: the command line (each command
#: imports what it needs), the grading worker (it imports the grader only once its sandbox
#: is up) and the Sphinx extension's entry point (Sphinx imports it to find ``setup``).
ENTRY_POINTS = ("cli", "grading.worker", "book")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` (type hints only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if test is not None and "TYPE_CHECKING" in ast.unparse(test):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's own modules that ``name`` imports when it runs, at any depth of its
    code (function-local imports included; ``if TYPE_CHECKING:`` imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # ``from pkg import mod`` imports pkg.mod; ``from mod import name`` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Floor 1 imports nothing of the package; a module in a cycle shares its floor."""
    memo: dict[str, int] = {}

    def floor(v: str, seen: frozenset[str]) -> int:
        if v in memo:
            return memo[v]
        below = [floor(w, seen | {v}) for w in graph[v] if w not in seen | {v}]
        memo[v] = 1 + max(below, default=0)
        return memo[v]

    return {v: floor(v, frozenset()) for v in graph}


def chain(graph: dict[str, set[str]], fl: dict[str, int]) -> list[str]:
    """One longest import chain, top module first."""
    v = max(fl, key=lambda m: (fl[m], m))
    out = [v]
    while fl[v] > 1:
        v = max((w for w in graph[v] if fl[w] == fl[v] - 1), default=None)
        if v is None:
            break
        out.append(v)
    return out


def longest_functions(mods: dict[str, Path], watched: tuple[str, ...], top: int = 5):
    """(lines, module:line name) of the longest functions in the watched modules."""
    rows = []
    for name, path in mods.items():
        short = name.split(".", 1)[1] if "." in name else name
        if short.split(".")[0] not in watched:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                rows.append((n, f"{name}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)[:top]


def forbidden_imports(root: Path, rules: dict[str, tuple[str, ...]] = NEVER_IMPORTS
                      ) -> list[str]:
    """``module -> module`` of each import that breaks a floor rule: a module of a room in
    ``rules`` importing one of the rooms named beside it (names relative to the package)."""
    package = root.name
    out = []
    for m, deps in graph_of(root).items():
        for room, above in rules.items():
            if m == f"{package}.{room}" or m.startswith(f"{package}.{room}."):
                out += [f"{m} -> {d}" for d in sorted(deps)
                        if any(d == f"{package}.{a}" or d.startswith(f"{package}.{a}.")
                               for a in above)]
    return sorted(out)


def long_grader_functions(root: Path, limit: int = GRADER_FUNCTION_LINES) -> list[str]:
    """``lines module:line name`` of each function of the grader over ``limit`` lines,
    outside the diagnosis (its rules, one after another)."""
    rows = longest_functions(modules(root), ("grading",), top=1 << 30)
    return [f"{n} {where}" for n, where in rows if n > limit
            and not where.startswith(tuple(f"{root.name}.grading.{m}:" for m in DIAGNOSIS))]


def collapse(graph: dict[str, set[str]], units: tuple[str, ...]) -> dict[str, set[str]]:
    """The graph with every module of each subpackage in ``units`` (e.g. ``tilelab.emu``)
    merged into one node: the view of a reader who treats a subsystem as one part."""

    def unit(m: str) -> str:
        return next((u for u in units if m == u or m.startswith(u + ".")), m)

    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(unit(m), set()).update(unit(d) for d in deps)
    return {m: deps - {m} for m, deps in out.items()}


def subpackages(root: Path) -> tuple[str, ...]:
    """Every subpackage of the package at ``root`` (dotted), each one room of the house."""
    return tuple(sorted(
        ".".join(p.parent.relative_to(root.parent).parts)
        for p in root.rglob("__init__.py") if p.parent != root
    ))


def graph_of(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    mods = modules(root)
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def package_cycles(root: Path) -> list[list[str]]:
    """The cycles of the graph with every subpackage one room."""
    return cycles(collapse(graph_of(root), subpackages(root)))


def _function_bodies(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def local_imports(root: Path, allowed: tuple[str, ...] = ENTRY_POINTS) -> list[str]:
    """``module:line name`` of each import of the package inside a function, outside the
    modules in ``allowed`` (names relative to the package)."""
    package = root.name
    keep = tuple(f"{package}.{a}" for a in allowed)
    out = []
    for name, path in modules(root).items():
        if name in keep:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen = set()
        for fn in _function_bodies(tree):
            for node in _runtime_nodes(fn):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    targets = [("." * node.level) + (node.module or "")]
                else:
                    continue
                for t in targets:
                    if (t == package or t.startswith((f"{package}.", "."))) and \
                            node.lineno not in seen:
                        seen.add(node.lineno)
                        out.append(f"{name}:{node.lineno} {t}")
    return sorted(out)


def private_imports(root: Path) -> list[str]:
    """``module:line name`` of each private name (``_x``) imported from another module of
    the package."""
    package = root.name
    out = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").split(".")[0] == package
            ):
                out += [f"{name}:{node.lineno} {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="tilelab")
    ap.add_argument("--modules", action="store_true",
                    help="also print the module-level layers")
    a = ap.parse_args()
    root = Path(a.package)
    mods = modules(root)
    graph = graph_of(root)
    fl = floors(graph)
    print(f"modules: {len(mods)}   module-level import layers: {max(fl.values())}")
    if a.modules:
        for f in range(max(fl.values()), 0, -1):
            print(f"  {f:2d}  " + " ".join(sorted(m for m, x in fl.items() if x == f)))
    print("  longest chain: " + " -> ".join(chain(graph, fl)))
    rooms = subpackages(root)
    house = collapse(graph, rooms)
    hfl = floors(house)
    print(f"floors, every subpackage one room: {max(hfl.values())}")
    for f in range(max(hfl.values()), 0, -1):
        print(f"  {f:2d}  " + " ".join(sorted(m for m, x in hfl.items() if x == f)))
    for title, cyc in (("package cycles (every subpackage one room)", cycles(house)),
                       ("module cycles", cycles(graph))):
        print(f"{title}: {len(cyc)}")
        for c in cyc:
            print("  " + " <-> ".join(c))
    for title, rows in (
        ("function-local imports of the package outside "
         f"{', '.join(ENTRY_POINTS)}", local_imports(root)),
        ("private names imported across modules", private_imports(root)),
        ("imports that break a floor rule", forbidden_imports(root)),
        (f"grader functions over {GRADER_FUNCTION_LINES} lines, the diagnosis aside",
         long_grader_functions(root)),
    ):
        print(f"{title}: {len(rows)}")
        for row in rows:
            print(f"  {row}")
    print("longest functions (grading, isolation and class run):")
    for n, where in longest_functions(mods, WATCHED):
        print(f"  {n:4d}  {where}")
    print("lines per module:")
    for m, p in sorted(mods.items(), key=lambda kv: -len(kv[1].read_text().splitlines())):
        print(f"  {len(p.read_text(encoding='utf-8').splitlines()):5d}  {m}")


if __name__ == "__main__":
    main()
