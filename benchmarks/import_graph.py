"""The shape of the ``tilelab`` package, from its source alone (nothing is imported).

Prints the import layers (a module stands one floor above the highest module it imports;
imports inside functions count), the cycles, the longest functions of the grading and
class-run code, and the lines of every module. Run from the repository root::

    python benchmarks/import_graph.py [--package tilelab]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

#: The packages or modules whose longest functions are reported.
WATCHED = ("grading", "classroom", "grade", "grade_worker", "check", "sanitizer",
           "source_checks", "verdict", "gates", "isolation", "notebook")


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


def collapse(graph: dict[str, set[str]], units: tuple[str, ...]) -> dict[str, set[str]]:
    """The graph with every module of each subpackage in ``units`` (e.g. ``tilelab.emu``)
    merged into one node: the view of a reader who treats a subsystem as one part."""

    def unit(m: str) -> str:
        return next((u for u in units if m == u or m.startswith(u + ".")), m)

    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(unit(m), set()).update(unit(d) for d in deps)
    return {m: deps - {m} for m, deps in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="tilelab")
    ap.add_argument("--units", nargs="*", default=["emu", "book"],
                    help="subpackages also counted as one module each (default: emu book)")
    a = ap.parse_args()
    mods = modules(Path(a.package))
    graph = {m: imports(m, p, set(mods)) for m, p in mods.items()}
    fl = floors(graph)
    print(f"modules: {len(mods)}   import layers: {max(fl.values())}")
    for f in range(max(fl.values()), 0, -1):
        print(f"  {f:2d}  " + " ".join(sorted(m for m, x in fl.items() if x == f)))
    print("  longest chain: " + " -> ".join(chain(graph, fl)))
    if a.units:
        units = tuple(f"{a.package}.{u}" for u in a.units)
        whole = collapse(graph, units)
        wfl = floors(whole)
        print(f"import layers with {', '.join(units)} as one module each: {max(wfl.values())}")
        print("  longest chain: " + " -> ".join(chain(whole, wfl)))
    cyc = cycles(graph)
    print(f"cycles: {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
    print("longest functions (grading and class run):")
    for n, where in longest_functions(mods, WATCHED):
        print(f"  {n:4d}  {where}")
    print("lines per module:")
    for m, p in sorted(mods.items(), key=lambda kv: -len(kv[1].read_text().splitlines())):
        print(f"  {len(p.read_text(encoding='utf-8').splitlines()):5d}  {m}")


if __name__ == "__main__":
    main()
