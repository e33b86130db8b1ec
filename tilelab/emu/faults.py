"""Turn a failed launch's report into the matching ``LaunchError``, in a learner's words."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import seccomp
from .args import ArgPlan
from .errors import (
    BarrierDivergence,
    EmulatorError,
    KernelCrash,
    KernelTimeout,
    LaunchStopped,
    MisalignedAccess,
    OutOfBoundsAccess,
)
from .kernels import param_name
from .native import ChildResult


@dataclass
class LaunchContext:
    """What the messages need to know about the launch."""

    kernel: dict
    plan: ArgPlan
    library: Path
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    timeout: float


def _xyz(v: list[int] | None) -> str:
    return f"({v[0]},{v[1]},{v[2]})" if v else "?"


def source_lines(library: Path, pcs: list[int]) -> dict[int, int]:
    """The learner's ``kernel.cu`` line of each code address (innermost inlined frame)."""
    pcs = sorted(set(pcs))
    if not pcs or not shutil.which("addr2line"):
        return {}
    try:
        out = subprocess.run(["addr2line", "-a", "-i", "-e", str(library),
                              *[hex(p) for p in pcs]],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    lines: dict[int, int] = {}
    pc = None
    for ln in out.splitlines():
        if ln.startswith("0x"):
            pc = int(ln, 16)
            continue
        m = re.search(r"(?:^|/)kernel\.cu:(\d+)", ln)
        if m and pc is not None and pc not in lines:
            lines[pc] = int(m.group(1))
    return lines


def source_line(library: Path, pcs: list[int]) -> int | None:
    """The learner's ``kernel.cu`` line of the innermost of ``pcs`` that has one."""
    found = source_lines(library, pcs)
    return next((found[p] for p in pcs if p in found), None)


def raise_for(report: dict, child: ChildResult, ctx: LaunchContext) -> None:
    """Raise the error a non-``ok`` report (or a timeout, or a silent death) describes."""
    name = ctx.kernel["name"]
    if child.stopped:
        raise LaunchStopped(f"the launch of kernel '{name}' (grid {ctx.grid}, block "
                            f"{ctx.block}) was stopped before it ended: its result was no "
                            "longer needed.")
    if child.timed_out:
        raise KernelTimeout(
            f"kernel '{name}' did not finish within {ctx.timeout:g} s (grid {ctx.grid}, block "
            f"{ctx.block}) and was stopped. Look for a loop whose condition never becomes "
            "false, or a thread spinning on a value another thread sets (in the emulator "
            "threads take turns only at barriers, warp-level calls and volatile accesses), or "
            "a block waiting for another block (the emulator runs one block at a time, so "
            "blocks cannot wait on each other; a GPU does not promise it either: end the "
            "kernel there and launch a second one). If the kernel is merely slow, pass "
            "timeout= (seconds) or set TILELAB_EMU_TIMEOUT.")
    status = report.get("status")
    if status == "ok":
        return
    where = f"thread {_xyz(report.get('thread'))} of block {_xyz(report.get('block'))}"
    if status == "fault":
        _fault(report, child, ctx, where)
    if status == "barrier":
        _barrier(report, name)
    if status == "warp":
        _warp(report, name)
    if status == "shared_oob":
        _shared_oob(report, name, where, ctx)
    if status == "misaligned":
        _misaligned(report, ctx, where)
    if status in ("assert", "trap"):
        line = report.get("line")
        what = (f"assertion `{report.get('expr')}` failed" if status == "assert"
                else "the kernel called __trap()")
        raise KernelCrash(f"kernel '{name}': {what} at kernel.cu line {line}, in {where}.",
                          line=line)
    if status == "syscall":
        raise KernelCrash(seccomp.describe(name, report.get("nr"), where))
    if status == "forged":
        raise KernelCrash(
            f"kernel '{name}': the kernel wrote on the emulator's own report channel (a line "
            "that only the emulator may write); kernels cannot. A kernel's results are its "
            "output buffers (and printf); the launch is not graded.")
    if status == "error":
        raise EmulatorError(f"the emulator could not run kernel '{name}': {report.get('message')}")
    if child.signal == signal.SIGSYS:
        raise KernelCrash(seccomp.describe(name, None))
    if child.signal:
        raise KernelCrash(f"kernel '{name}': the process running it was killed by "
                          f"{signal.Signals(child.signal).name} (out of memory?).")
    raise KernelCrash(f"kernel '{name}': the process running it exited (status {child.status}) "
                      "without a report.")


def _buffer_name(ctx: LaunchContext, b: int) -> tuple[str, str, int]:
    buf = ctx.plan.buffers[b]
    p = buf.params[0] if buf.params else 0
    param = ctx.kernel["params"][p]
    names = [param_name(ctx.kernel["params"][i]["text"], i) for i in buf.params]
    label = "/".join(dict.fromkeys(names)) or f"#{p}"
    return label, param["text"], p


def _fault(report: dict, child: ChildResult, ctx: LaunchContext, where: str) -> None:
    name = ctx.kernel["name"]
    kind = report.get("kind")
    access = report.get("access", "access")
    line = source_line(ctx.library, report.get("pcs", []))
    at = f" at kernel.cu line {line}" if line else ""
    block = tuple(report["block"]) if report.get("block") else None
    thread = tuple(report["thread"]) if report.get("thread") else None
    if kind in ("global", "canary"):
        b, index = report["buffer"], report["index"]
        label, text, p = _buffer_name(ctx, b)
        buf = ctx.plan.buffers[b]
        count = buf.nbytes // buf.elem
        off = ctx.plan.pointers.get(p, (b, 0))[1] // buf.elem
        if index >= count:
            side = f"{index - count + 1} element(s) past the end"
            fix = ("Check the bounds test that should guard this access (e.g. `if (row < M && "
                   "col < N)`, every bound tested, joined with &&) and the index arithmetic, "
                   "and that the buffer passed is as large as the kernel assumes.")
        else:
            side = f"{-index} element(s) before the start"
            fix = ("The index is below 0: a neighbour or halo read such as `x[i - 2]` needs a "
                   "test that keeps it at 0 or above for the first elements (`if (i >= 2)`), "
                   "or a clamped index (`x[max(i - 2, 0)]`); check the index arithmetic.")
        who = (f"by {where}" if kind == "global" else
               "found only after the kernel ended, so the thread and line are unknown")
        rel = f"{label}[{index - off}]" if off else f"{label}[{index}]"
        raise OutOfBoundsAccess(
            f"Out-of-bounds {access} in kernel '{name}'{at}: {rel}, {side} of `{text}` "
            f"(parameter #{p}), which holds {count - off} elements of {buf.elem} bytes; "
            f"{who}. {fix}",
            buffer=label, access=access, index=index - off, line=line, block=block,
            thread=thread)
    if kind == "dynamic_shared":
        raise OutOfBoundsAccess(
            f"Out-of-bounds {access} of dynamic shared memory (extern __shared__) in kernel "
            f"'{name}'{at}: byte {report.get('byte_offset')}, but the launch gave "
            f"shared={ctx.shared} bytes; by {where}. Pass a large enough shared= (in bytes, "
            "e.g. block_size * 4 for one float per thread) or fix the index.",
            buffer="extern __shared__", access=access, line=line, block=block, thread=thread)
    if kind == "stack":
        raise KernelCrash(
            f"Stack overflow in kernel '{name}'{at}, {where}: the emulator gives each thread "
            "64 KiB of stack, and a large local array (or deep recursion) used it up. Keep "
            "per-thread arrays small, or move the data to shared or global memory.", line=line)
    if not report.get("in_block"):
        raise EmulatorError(f"internal error in the emulator runtime ({report.get('signal')}) "
                            f"while running kernel '{name}'; please report it.")
    sig, addr = report.get("signal"), report.get("addr", 0)
    if kind == "null":
        what = f"null pointer dereference ({access} of address {addr:#x})"
        todo = "a pointer parameter or variable is NULL; check what was passed and computed."
    elif sig == "SIGFPE":
        what = "arithmetic exception"
        todo = ("an integer division the emulator could not compute as a GPU does (a GPU "
                "never stops there: x / 0 and x % 0 give all ones, INT_MIN / -1 gives "
                "INT_MIN); check the divisor.")
    elif sig in ("SIGSEGV", "SIGBUS") and report.get("code") == 128:
        what = "general protection fault"
        todo = ("most likely a misaligned vector access (float4 needs 16-byte, float2 8-byte "
                "aligned addresses) or a wild pointer.")
    elif sig in ("SIGSEGV", "SIGBUS"):
        what = f"invalid memory {access} at address {addr:#x}"
        todo = ("the address is in no buffer argument: a wild pointer, or an index far out of "
                "bounds.")
    elif sig == "SIGABRT":
        what = "abort"
        todo = "the kernel (or a library function it called) aborted."
    else:
        what = f"signal {sig}"
        todo = "the kernel executed an illegal instruction or trap."
    raise KernelCrash(f"Kernel '{name}' crashed{at}, {where}: {what}; {todo}", line=line)


def _barrier(report: dict, name: str) -> None:
    waits = report.get("waits", [])
    lines = tuple(w["line"] for w in waits)
    block = _xyz(report.get("block"))
    if report.get("exited"):
        w = waits[0] if waits else {"line": "?", "count": 0, "example": None}
        msg = (f"Barrier divergence in kernel '{name}', block {block}: {w['count']} thread(s) "
               f"wait at __syncthreads() on line {w['line']} (e.g. thread "
               f"{_xyz(w['example'])}), but {report.get('n_exited')} thread(s) of the block "
               f"already exited (e.g. thread {_xyz(report.get('exited_example'))}) and will "
               "never reach it. Every thread of a block must reach each __syncthreads(): do not "
               "`return` early before a barrier; guard the loads and stores with an if and keep "
               "the barrier outside it.")
    else:
        parts = "; ".join(f"line {w['line']}: {w['count']} thread(s), e.g. {_xyz(w['example'])}"
                          for w in waits)
        msg = (f"Barrier divergence in kernel '{name}', block {block}: threads wait at "
               f"different __syncthreads() calls ({parts}). A barrier inside an if/else, or in "
               "a loop whose trip count differs between threads, splits the block; move "
               "__syncthreads() out of the divergent code.")
    raise BarrierDivergence(msg, lines=lines, block=tuple(report.get("block") or ()))


def _warp(report: dict, name: str) -> None:
    op, line, lane = report.get("op", "?"), report.get("line"), report.get("missing_lane")
    block = _xyz(report.get("block"))
    if lane is None:
        why = ("the lanes it names wait at other kinds of warp-level calls, or with other "
               "masks; all the lanes a mask names must make the same kind of call with the "
               "same mask")
    elif report.get("missing_state") == "barrier":
        why = (f"lane {lane} (thread {_xyz(report.get('missing'))}), named in the mask, waits at "
               f"__syncthreads() on line {report.get('missing_line')} instead")
    else:
        who = _xyz(report.get("missing"))
        why = f"lane {lane} (thread {who}), named in the mask, never gets there"
    raise BarrierDivergence(
        f"Warp divergence in kernel '{name}', block {block}: thread "
        f"{_xyz(report.get('example'))} waits at {op} on line {line} with mask "
        f"{report.get('mask', 0):#010x}, but {why}; on a GPU the warp would hang. Every lane "
        "named in the mask must reach the same warp-level call: compute the mask with "
        "__ballot_sync / __activemask before branching, or call it where all those lanes get.",
        lines=(line,) if line else (), block=tuple(report.get("block") or ()))


def _shared_oob(report: dict, name: str, where: str, ctx: LaunchContext) -> None:
    array, line, index = report.get("array"), report.get("line"), report.get("index")
    extent, dim = report.get("extent"), report.get("dim")
    if dim:
        what = f"index {index} in dimension {dim} of {array}, whose size there is {extent}"
    else:
        what = (f"element {index} of extern __shared__ {array}, but shared={ctx.shared} bytes "
                f"hold only {extent} elements")
    raise OutOfBoundsAccess(
        f"Out-of-bounds shared-memory access in kernel '{name}' at kernel.cu line {line}: "
        f"{what}; by {where}. Fix the index (or the array size).",
        buffer=str(array), access="access", index=index, line=line,
        block=tuple(report.get("block") or ()), thread=tuple(report.get("thread") or ()))



def _type_name(report: dict) -> str:
    """The accessed type as the source spells it (UBSan writes ``'const struct float4'``)."""
    name = str(report.get("type", "?")).strip("'")
    return re.sub(r"\b(?:const|volatile|struct|union)\s+", "", name).strip() or "?"


def _misaligned(report: dict, ctx: LaunchContext, where: str) -> None:
    """A load or store off its type's alignment: where it was, and a fix for that memory."""
    name, access = ctx.kernel["name"], report.get("access", "access")
    align, tname = int(report.get("align") or 0), _type_name(report)
    line = report.get("line") or source_line(ctx.library, report.get("pcs", []))
    at = f" at kernel.cu line {line}" if line else ""
    space, off = report.get("space"), report.get("byte_offset")
    past = f"{off % align} bytes past a multiple of {align}" if off is not None and align \
        else f"not a multiple of {align}"
    words = max(align // 4, 1)
    label = space or "memory"
    if space == "global":
        b = int(report["buffer"])
        label, text, p = _buffer_name(ctx, b)
        buf = ctx.plan.buffers[b]
        start = ctx.plan.pointers.get(p, (b, 0))[1]
        rel = int(off) - start
        elem = f", element {label}[{rel // buf.elem}]" if rel % buf.elem == 0 else ""
        what = (f"byte {rel} of `{text}` (parameter #{p}{elem}), {past} from the start of "
                "its allocation")
        per = max(align // buf.elem, 1)
        if start % align:
            fix = (f"the pointer passed for {label} points {start} bytes into its allocation, "
                   f"not a multiple of {align}: pass an aligned pointer (an offset that is a "
                   f"multiple of {align} bytes), or read {label} one element at a time")
        else:
            fix = (f"read a {tname} only where its first element's index is a multiple of "
                   f"{per} (for a row-major matrix: the row length, such as K, and the column "
                   f"offset both multiples of {per}); test that (e.g. `if (K % {per} == 0)`) "
                   "and load the other rows or elements one at a time")
    elif space == "shared":
        what = f"byte {off} of the block's static __shared__ arrays, {past}"
        fix = (f"a row of a tile padded by one element (such as [32][33]) starts off a "
               f"{align}-byte boundary in every other row: pad by a multiple of {words} "
               f"floats (e.g. [32][{32 + words}]) and declare the array __align__({align}), "
               "or read it one element at a time")
    elif space == "dynamic_shared":
        what = f"byte {off} of the dynamic shared memory (extern __shared__), {past}"
        fix = (f"carve each array at a byte offset that is a multiple of its type's alignment "
               f"(round up: `offset = (offset + {align - 1}) / {align} * {align}`), or carve "
               "the widest types first")
    else:
        what = f"address {int(report.get('addr', 0)):#x}, {past}"
        fix = f"cast to {tname}* only a pointer that is a multiple of {align} bytes"
    raise MisalignedAccess(
        f"Misaligned address in kernel '{name}'{at}: a {tname} {access} by {where} at "
        f"{what}; a GPU stops the kernel there with \"misaligned address\" (a {tname} load "
        f"or store needs an address that is a multiple of {align} bytes). Fix: {fix}.",
        buffer=label, access=access, offset=off, align=align, type_name=tname, line=line,
        block=tuple(report["block"]) if report.get("block") else None,
        thread=tuple(report["thread"]) if report.get("thread") else None)
