"""Value expressions of the ``measured`` and ``compare`` roles.

A reference names one value: ``experiment[column=value, ...].column`` (the filters must
match exactly one row; ``experiment.column`` when the file has one row). An expression
combines references and numbers with ``+ - * /`` and parentheses, and may end in a
format spec after a colon: ``matmul[kernel=naive,n=4096].median_ms /
matmul[kernel=tiled32,n=4096].median_ms :.2f``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilelab.book.data import (
    TIME_UNITS,
    DataError,
    Dataset,
    Missing,
    format_value,
    parse_filters,
)

REF = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*)(?:\[([^\]]*)\])?\.([A-Za-z_][A-Za-z0-9_]*)")
_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}

Loader = Callable[[str], Dataset | None]


@dataclass(frozen=True)
class Ref:
    """One value in one data file."""

    experiment: str
    filters: dict[str, list[str]]
    column: str

    def resolve(self, load: Loader) -> tuple[Any, str]:
        """The value and its unit; raises Missing when the data are not there."""
        ds = load(self.experiment)
        if ds is None:
            raise Missing(self.experiment)
        if not ds.has_column(self.column):
            raise Missing(self.experiment, f"{self.experiment} has no column {self.column!r}")
        row = ds.one(self.filters)
        if self.column not in row:
            raise Missing(self.experiment, f"the row has no {self.column!r}")
        return row[self.column], ds.unit(self.column)


@dataclass(frozen=True)
class Expr:
    """A parsed expression: its references, its arithmetic and its format spec."""

    text: str
    refs: tuple[Ref, ...]
    tree: ast.expr
    spec: str | None

    @property
    def experiments(self) -> list[str]:
        return list(dict.fromkeys(r.experiment for r in self.refs))

    def evaluate(self, load: Loader) -> tuple[Any, str]:
        """The value, and the unit of its first reference when it is a single reference."""
        values = [r.resolve(load) for r in self.refs]
        for ref, (v, _) in zip(self.refs, values, strict=True):
            if v is None:  # the row is there, the value is not (not counted on this run)
                raise Missing(ref.experiment, f"{ref.experiment}: {ref.column} has no value "
                              "in the row asked for")
        env = {f"_r{i}": v for i, (v, _) in enumerate(values)}
        value = _eval(self.tree, env)
        unit = values[0][1] if len(self.refs) == 1 and isinstance(self.tree, ast.Name) else ""
        return value, unit

    def render(self, load: Loader) -> str:
        value, _ = self.evaluate(load)
        return format_value(value, self.spec)


def valid_spec(spec: str) -> bool:
    """Whether ``spec`` formats a float or an int (``bytes`` is ours: KiB, MiB, GiB)."""
    if spec == "bytes":
        return True
    for sample in (1.5, 1):
        try:
            format(sample, spec)
            return True
        except ValueError:
            continue
    return False


def split_spec(text: str) -> tuple[str, str | None]:
    """Split a trailing ``:spec`` (outside brackets) off an expression."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == "]":
            depth += 1
        elif ch == "[":
            depth -= 1
        elif ch == ":" and depth == 0:
            return text[:i].strip(), text[i + 1 :].strip() or None
    return text.strip(), None


def parse(text: str) -> Expr:
    """Parse an expression; raises DataError on a syntax error."""
    body, spec = split_spec(text)
    refs: list[Ref] = []

    def sub(m: re.Match[str]) -> str:
        refs.append(Ref(m.group(1), parse_filters(m.group(2)), m.group(3)))
        return f" _r{len(refs) - 1} "

    code = REF.sub(sub, body)
    if not refs:
        raise DataError(f"{text!r} names no data value (expected experiment[filters].column)")
    try:
        tree = ast.parse(code.strip(), mode="eval").body
    except SyntaxError as exc:
        raise DataError(f"{text!r} is not an expression of data values: {exc.msg}") from exc
    _check(tree, text)
    if spec is not None and not valid_spec(spec):
        raise DataError(f"{spec!r} in {text!r} is not a format spec")
    return Expr(text, tuple(refs), tree, spec)


def _check(node: ast.AST, text: str) -> None:
    allowed = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.expr_context)
    for sub in ast.walk(node):
        if not isinstance(sub, (*allowed, ast.operator, ast.unaryop)):
            raise DataError(f"{text!r}: only + - * / and parentheses may combine values")
        if isinstance(sub, ast.operator) and type(sub) not in _OPS:
            raise DataError(f"{text!r}: only + - * / and parentheses may combine values")
        if isinstance(sub, ast.Constant) and not isinstance(sub.value, (int, float)):
            raise DataError(f"{text!r}: only numbers may appear besides data values")


def _eval(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if not all(isinstance(v, (int, float)) for v in (left, right)):
            raise DataError("arithmetic on a value that is not a number")
        try:
            return _OPS[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise DataError("division by zero in a data expression") from exc
    raise DataError(f"unsupported expression node {type(node).__name__}")


def compare(text: str, load: Loader) -> str:
    """``"A vs B"``: how A compares with B, e.g. ``"1.27× slower"`` or ``"1.36× faster"``.

    Times (lower is better) and rates (a unit per second) read as faster or slower;
    other values as higher or lower, unless the spec names two words:
    ``"A vs B :.1f more/fewer"``. The factor is always at least 1.
    """
    body, spec = split_spec(text)
    left, sep, right = body.partition(" vs ")
    if not sep:
        raise DataError(f"{text!r}: expected 'A vs B'")
    fmt, words = _spec_words(spec)
    a, b = parse(left), parse(right)
    (va, unit_a), (vb, _) = a.evaluate(load), b.evaluate(load)
    if not all(isinstance(v, (int, float)) and v > 0 for v in (va, vb)):
        raise DataError(f"{text!r}: both sides must be positive numbers")
    if unit_a in TIME_UNITS:
        word = "faster" if va < vb else "slower"
    else:
        up, down = words or (("faster", "slower") if unit_a.endswith("/s") else ("higher", "lower"))
        word = up if va > vb else down
    factor = max(va, vb) / min(va, vb)
    return f"{format_value(factor, fmt or '.2f')}× {word}"


def _spec_words(spec: str | None) -> tuple[str | None, tuple[str, str] | None]:
    fmt, words = None, None
    for token in (spec or "").split():
        if "/" in token and token.replace("/", "").isalpha():
            up, _, down = token.partition("/")
            words = (up, down)
        elif valid_spec(token):
            fmt = token
        else:
            raise DataError(f"{token!r} is not a format spec")
    return fmt, words


def compare_experiments(text: str) -> list[str]:
    """The experiments an ``A vs B`` comparison reads."""
    body, _ = split_spec(text)
    left, _, right = body.partition(" vs ")
    return list(dict.fromkeys(parse(left).experiments + parse(right).experiments))


#: the comparisons a claim may make between two data expressions
_COMPARISONS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclass(frozen=True)
class Constant:
    """A number written in a claim (``... < 2``): it names no data file."""

    text: str
    value: float
    experiments: tuple[str, ...] = ()

    def evaluate(self, load: Loader) -> tuple[Any, str]:
        return self.value, ""


def _side(text: str) -> Expr | Constant:
    try:
        return Constant(text, float(text))
    except ValueError:
        return parse(text)


@dataclass(frozen=True)
class Claim:
    """A sentence of the book that holds only while the data say so: its text, and the
    conditions (``A < B``, joined by `` and ``; either side may be a plain number) it
    rests on."""

    text: str
    conditions: tuple[tuple[Expr | Constant, str, Expr | Constant], ...]

    @property
    def experiments(self) -> list[str]:
        return list(dict.fromkeys(e for a, _, b in self.conditions
                                  for e in (*a.experiments, *b.experiments)))

    def failed(self, load: Loader) -> list[str]:
        """The conditions the data contradict, each with its two values (raises Missing
        where the data are not there)."""
        out = []
        for a, op, b in self.conditions:
            va, _ = a.evaluate(load)
            vb, _ = b.evaluate(load)
            if not all(isinstance(v, (int, float)) for v in (va, vb)):
                raise DataError(f"claim {self.text!r}: {a.text} and {b.text} must be numbers")
            if not _COMPARISONS[op](va, vb):
                out.append(f"{a.text} {op} {b.text}, but they are {format_value(va)} and "
                           f"{format_value(vb)}")
        return out


def parse_claim(text: str) -> Claim:
    """``"padding made it slower :: A > B and C < D"``: the sentence, then its conditions."""
    sentence, sep, rest = text.partition("::")
    if not sep or not sentence.strip() or not rest.strip():
        raise DataError(f"claim {text!r}: expected 'sentence :: A < B' (or >, <=, >=; "
                        "several joined by ' and ')")
    conditions = []
    for part in rest.split(" and "):
        m = re.fullmatch(r"\s*(.+?)\s*(<=|>=|<|>)\s*(.+?)\s*", part)
        if not m:
            raise DataError(f"claim {text!r}: {part.strip()!r} is not 'A < B' (or >, <=, >=)")
        a, b = _side(m.group(1)), _side(m.group(3))
        if isinstance(a, Constant) and isinstance(b, Constant):
            raise DataError(f"claim {text!r}: {part.strip()!r} names no data value")
        conditions.append((a, m.group(2), b))
    return Claim(sentence.strip(), tuple(conditions))
