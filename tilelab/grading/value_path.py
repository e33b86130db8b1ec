"""The path a kernel's values take through its source: the accumulator of a sum (where it
is set, reset, added to or assigned), and a guard's condition worked out for one thread.

A diagnosis that knows *what* went wrong with a sum (each element holds only its last
term, or the last tile's part) asks here *where*: an accumulator set to 0 inside the loop
that adds to it is a reset on that line, even when the line that adds uses ``+=``; a
product assigned (``acc = a * b``) is an assignment on its own line; an accumulator
declared without a value is never initialised. The source alone is read: a line that
cannot be found is not named.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping, Sequence

from tilelab.grading.diagnosis import Diagnosis
from tilelab.grading.kernel_lines import Kernel

_ADD = re.compile(r"^(?:\w+\s+)*?(\w+)((?:\s*\[[^\]]*\])*)\s*(\+=|=)\s*(.*);")
_MUL = re.compile(r"\w(?:\s*\[[^\]]*\])*\s*\*\s*\w")


def _indent(kern: Kernel, line: int) -> int:
    return kern._indent[line - 1]


def _enclosing_loops(kern: Kernel, line: int) -> list[int]:
    """The ``for`` lines whose body holds ``line`` (by indentation, or a one-line body)."""
    loops, depth = [], _indent(kern, line)
    for n in range(line - 1, 0, -1):
        code = kern.lines[n - 1]
        if not code or code in ("{", "}") or code.startswith("#"):  # `#pragma unroll`
            continue
        if _indent(kern, n) < depth:
            depth = _indent(kern, n)
            if re.search(r"\bfor\s*\(", code):
                loops.append(n)
        if depth == 0:
            break
    return loops


def accumulator_fault(kern: Kernel) -> Diagnosis | None:
    """Where a sum's accumulator goes wrong in the source: reset inside the loop that adds
    to it, the product assigned instead of added, or never given a first value; None
    where the source shows none of them. An accumulator is a local (a scalar or a register
    array such as ``acc[i][j]``) that a loop adds a product to."""
    for n, code in enumerate(kern.lines, 1):
        m = _ADD.match(code)
        if not m or m.group(1) in kern.shared or not _MUL.search(
                re.sub(r"\[[^\]]*\]", "[]", m.group(4))):  # a product, not one in a subscript
            continue
        acc, subs, op, rhs = m.group(1), m.group(2), m.group(3), m.group(4)
        if not kern.find(rf"^(?:float|double)\s+(?:[^;]*[\s,])?{acc}\b", 1, n):
            continue  # not a local the kernel declares (an output, a parameter)
        loops = _enclosing_loops(kern, n)
        if not loops:
            continue
        target = acc + subs.replace(" ", "")
        if op == "=" and not re.search(rf"\b{acc}\b", rhs) and not kern.find(
                rf"\+=.*\b{acc}\b|\b{acc}\b[^;=]*\+="):
            return Diagnosis("one term only", f"each pass of the loop{kern.at(loops[0])} "
                             f"assigns the product to {target} (=) instead of adding it (+=), "
                             f"so each element holds a single product{kern.at(n)}.")
        if op != "+=":
            continue
        zero = (rf"(?:^|[{{;)]\s*)(?:(?:float|double|const)\s+)*{acc}\b(?:\s*\[[^\]]*\])*"
                r"\s*=\s*0*\.?0*f?\s*;")
        for loop in loops:
            reset = kern.find(zero, loop, n - 1)  # the loop's own line: after its `{`
            here = re.search(zero, kern.lines[loop - 1]) if reset == loop else None
            if here is not None and "{" not in kern.lines[loop - 1][:here.start() + 1]:
                reset = kern.find(zero, loop + 1, n - 1)
            if reset and (reset == loop or _indent(kern, reset) > _indent(kern, loop)):
                return Diagnosis("accumulator reset", f"{acc} is set to 0{kern.at(reset)} "
                                 f"inside the loop{kern.at(loop)}, so each pass throws away "
                                 f"what the passes before added and each element keeps only "
                                 f"the last pass's part; the += itself{kern.at(n)} is right: "
                                 f"set {acc} to 0 once, before the loop.")
        decl = kern.last_before(rf"^(?:float|double)\s+(?:\w+\s*,\s*)*{acc}\s*(?:\[[^\]]*\]\s*)*"
                                r"(?:,|;)", n)
        if decl and not kern.find(rf"\b{acc}\b(?:\s*\[[^\]]*\])*\s*=[^=]", decl + 1, n - 1):
            return Diagnosis("never initialised", f"{acc} is declared without a value"
                             f"{kern.at(decl)} and then added to{kern.at(n)}: it starts from "
                             "whatever the register held; give it 0.0f first (`float "
                             f"{acc} = 0.0f;`, or a loop setting each element to 0.0f).")
    return None


# ------------------------------------------------------------------ a guard's values


def _condition(code: str) -> str | None:
    """The condition of an ``if (...)`` or of a ``cond ? a : b`` on ``code``."""
    m = re.search(r"\bif\s*\(", code)
    if m:
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        return code[m.end():i - 1] if not depth else None
    m = re.search(r"[^=!<>]=\s*(.*?)\?", code)
    cond = m.group(1).strip() if m else None
    while cond and cond[0] == "(" and cond[-1] == ")" and _balanced(cond[1:-1]):
        cond = cond[1:-1].strip()
    return cond


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _py(expr: str) -> str:
    expr = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|long|float)\s*\)", "", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    expr = re.sub(r"(?<![/])/(?![/])", "//", expr)
    return re.sub(r"\b(\d+)[uUlLfF]+\b", r"\1", expr)


def _split_top(cond: str) -> list[str]:
    """``cond``'s terms joined by && at the top level (the whole of it where there are none
    or where || joins them)."""
    parts, depth, cur = [], 0, ""
    i = 0
    while i < len(cond):
        ch = cond[i]
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and cond.startswith("&&", i):
            parts.append(cur.strip())
            cur, i = "", i + 2
            continue
        if depth == 0 and cond.startswith("||", i):
            return [cond.strip()]
        cur += ch
        i += 1
    return [p for p in (*parts, cur.strip()) if p]


def condition_values(kern: Kernel, line: int, sizes: Mapping[str, int],
                     thread: Sequence[int], block: Sequence[int],
                     block_dim: Sequence[int], holds: bool = False) -> str:
    """The terms of line ``line``'s condition that are false for this thread, with the
    values they compare (e.g. "`row < M - 1` is false: row = 36, M = 37"); with ``holds``,
    the terms that hold instead (a guard that let an access through); "" where a value
    cannot be worked out from the source (a loop's variable)."""
    cond = _condition(kern.lines[line - 1]) if 0 < line <= len(kern.lines) else None
    if not cond:
        return ""
    env: dict[str, int] = dict(sizes)
    for axis, k in zip("xyz", range(3), strict=True):
        env[f"threadIdx_{axis}"], env[f"blockIdx_{axis}"] = thread[k], block[k]
        env[f"blockDim_{axis}"] = block_dim[k]
    for m in re.finditer(r"#define\s+(\w+)\s+(\d+)\b", kern.text):
        env.setdefault(m.group(1), int(m.group(2)))
    decl = re.compile(r"^(?:const\s+)?(?:unsigned\s+)?(?:int|long)\s+(.*);$")
    for n in range(1, line):
        m = decl.match(kern.lines[n - 1])
        if not m:
            continue
        for part in m.group(1).split(","):
            name, _, value = part.partition("=")
            name = name.strip()
            try:
                env[name] = _value(_py(_dotted(value)), env)
            except ValueError:  # a value the source alone does not give (a loop's)
                env.pop(name, None)
    false = []
    for term in _split_top(cond):
        try:
            ok = _value(_py(_dotted(term)), env)
        except ValueError:
            return ""
        if bool(ok) == holds:
            used = dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", _dotted(term)))
            vals = ", ".join(f"{_undotted(v)} = {env[v]}" for v in used if v in env)
            false.append(f"`{term}` {'holds' if holds else 'is false'} ({vals})")
    return "; ".join(false)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: lambda a, b: int(a / b), ast.Mod: lambda a, b: a - b * int(a / b),
        ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.USub: operator.neg,
        ast.Not: operator.not_}


def _value(expr: str, env: Mapping[str, int]) -> int:
    """An integer expression of C (as :func:`_py` spells it) over ``env``'s names, worked
    out without running any code of it: names, numbers, + - * / %, comparisons, ! && ||;
    anything else raises ValueError."""
    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in env:
            return int(env[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return int(_OPS[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return int(_OPS[type(node.op)](ev(node.operand)))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return int(all(vals) if isinstance(node.op, ast.And) else any(vals))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            return int(_OPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0])))
        raise ValueError("not a simple integer expression")
    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, ZeroDivisionError, RecursionError) as exc:
        raise ValueError(str(exc)) from exc


def _undotted(name: str) -> str:
    return re.sub(r"^(threadIdx|blockIdx|blockDim)_", r"\1.", name)


def _dotted(expr: str) -> str:
    """``threadIdx.x`` as the name ``threadIdx_x`` (and so for blockIdx and blockDim)."""
    return re.sub(r"\b(threadIdx|blockIdx|blockDim)\.([xyz])\b", r"\1_\2", expr)


def variable_values(kern: Kernel, sizes: Mapping[str, int], thread: Sequence[int],
                    block: Sequence[int], block_dim: Sequence[int]) -> dict[str, tuple[int, int]]:
    """Each integer variable the kernel declares before its first loop, with its line and
    its value for this thread (those the source alone gives)."""
    env: dict[str, int] = dict(sizes)
    for axis, k in zip("xyz", range(3), strict=True):
        env[f"threadIdx_{axis}"], env[f"blockIdx_{axis}"] = thread[k], block[k]
        env[f"blockDim_{axis}"] = block_dim[k]
    for m in re.finditer(r"#define\s+(\w+)\s+(\d+)\b", kern.text):
        env.setdefault(m.group(1), int(m.group(2)))
    decl = re.compile(r"^(?:const\s+)?(?:unsigned\s+)?(?:int|long)\s+(.*);$")
    out: dict[str, tuple[int, int]] = {}
    for n, code in enumerate(kern.lines, 1):
        if re.search(r"\b(for|while)\s*\(", code):
            break
        m = decl.match(code)
        if not m:
            continue
        for part in m.group(1).split(","):
            name, _, value = part.partition("=")
            name = name.strip()
            try:
                env[name] = _value(_py(_dotted(value)), env)
                out[name] = (n, env[name])
            except ValueError:
                env.pop(name, None)
    return out


def variable_fault(kern: Kernel, ref: Kernel, sizes: Mapping[str, int], thread: Sequence[int],
                   block: Sequence[int], block_dim: Sequence[int]) -> str | None:
    """The first variable the learner's kernel and the reference both declare (before
    their loops) whose value for this thread differs, said with its line and both
    values; None where every shared name agrees."""
    mine = variable_values(kern, sizes, thread, block, block_dim)
    theirs = variable_values(ref, sizes, thread, block, block_dim)
    for name, (line, value) in sorted(mine.items(), key=lambda kv: kv[1][0]):
        if name in theirs and theirs[name][1] != value:
            code = ref.lines[theirs[name][0] - 1]
            return (f"{name} is {value} for this thread where it should be {theirs[name][1]} "
                    f"(as `{code}` gives){kern.at(line)}")
    return None
