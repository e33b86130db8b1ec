"""What a launch reports: printf output, timings, and (analysis mode) races and bank conflicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from .traffic import TrafficLine, parse, table

XYZ = tuple[int, int, int]


#: the runtime's array ids of a kernel's buffers (by parameter) and __device__ variables
GLOBAL_BASE, DEVICE_BASE = 1 << 20, 1 << 24


@dataclass(frozen=True)
class Race:
    """Two threads touched one word that nothing orders their accesses to, and one of them
    wrote (an atomic is a write; two atomics are no race): a shared word between two
    barriers, or a global one (a buffer, a __device__ variable) between two barriers of a
    block or by two blocks (``other_block``) of a launch."""

    array: str
    index: tuple[int, ...]
    lines: tuple[int, int]
    kinds: tuple[str, str]
    threads: tuple[XYZ, XYZ]
    block: XYZ
    count: int
    same_warp: bool = False  # both threads are lanes of one warp
    memory: str = "shared"  # or "global": a kernel's buffer or __device__ variable
    other_block: XYZ | None = None  # the first thread's block, where it is not ``block``
    #: which access came first in time: bit 0 set where (some instance of) the first listed
    #: did, bit 1 where the second did; 0: not recorded
    order: int = 0
    #: two plain writes of a shared word: bit 0 set where (an instance of) the second
    #: stored the value already there, bit 1 where it stored another; 0: not recorded
    values: int = 0

    @property
    def earlier(self) -> int | None:
        """The index (0 or 1) of the access that came first in every instance, where the
        two differ in line or kind; None where both orders were seen or none recorded."""
        if self.lines[0] == self.lines[1] and self.kinds[0] == self.kinds[1]:
            return None
        return {1: 0, 2: 1}.get(self.order)

    @property
    def element(self) -> str:
        """The element, e.g. ``As[3][7]``."""
        return self.array + "".join(f"[{i}]" for i in self.index)

    @property
    def fix(self) -> str:
        """What orders the two accesses, said so that it cannot be put in divergent code."""
        if self.other_block is not None:
            return ("the blocks of a launch run at the same time on a GPU, in no order, and no "
                    "barrier orders two blocks: give each block memory of its own (index the "
                    "buffer with blockIdx, or keep a block's working values in a __shared__ "
                    "array), and make an update that several blocks share one atomic "
                    "(atomicAdd)")
        if self.memory == "global" and "atomic write" not in self.kinds:
            return ("put __syncthreads() between the accesses, where every thread of the block "
                    "reaches it (it orders a block's global accesses too); an update that many "
                    "threads make to one word must be one atomic (atomicAdd(&x, v)), or a "
                    "reduction in shared memory whose one result one thread stores")
        if "atomic write" in self.kinds and self.kinds != ("atomic write", "atomic write"):
            return ("an atomic makes only its own read-modify-write one step: a plain read or "
                    "write of the word by another thread races with it; make the whole update "
                    "one atomic (atomicAdd(&x, v), not a read of x then atomicExch(&x, x + v)), "
                    "or put __syncthreads() between the plain access and the atomics")
        if self.same_warp:
            return ("the racing threads are lanes of one warp: put __syncwarp() between the "
                    "accesses (after each step of a warp-synchronous reduction); since Volta "
                    "the lanes of a warp need not run in step, and volatile does not order "
                    "them")
        return ("put __syncthreads() between the accesses, where every thread of the block "
                "reaches it (never inside an if that only some threads enter, such as "
                "`if (tid < 32)`); it orders the lanes of each warp too")

    def describe(self, fix: bool = True, between: str | None = None) -> str:
        """One sentence a learner can act on (without the fix when ``fix`` is False);
        ``between``: what orders the two accesses, where the caller knows better (the
        source's loops)."""
        (k1, k2), (t1, t2) = self.kinds, self.threads
        l1, l2 = (f"{n}" if n else "? (a line the emulator could not map)" for n in self.lines)
        if self.other_block is not None:
            return (f"{self.element}: {k1} on line {l1} by thread {t1} of block "
                    f"{self.other_block} and {k2} on line {l2} by thread {t2} of block "
                    f"{self.block} (two blocks of one launch) [{self.count} time(s)]"
                    + (f"; {self.fix}" if fix else ""))
        who = "lanes of one warp, " if self.same_warp else ""
        if between is None and (self.earlier == 1 or (self.earlier == 0
                                                      and self.lines[0] > self.lines[1])):
            # the order in time is against the source's
            (ka, la), (kb, lb) = ((k2, l2), (k1, l1)) if self.earlier else ((k1, l1), (k2, l2))
            between = (f"the {ka} on line {la} came first and the {kb} on line {lb} after it, "
                       "with no barrier between them")
        between = between or "no barrier between them"
        return (f"{self.element}: {k1} on line {l1} by thread {t1} and {k2} on line {l2} by "
                f"thread {t2} (block {self.block}; {who}{between}) "
                f"[{self.count} time(s)]" + (f"; {self.fix}" if fix else ""))


def representative(races: Sequence[Race]) -> Race | None:
    """The race whose fix orders them all: one between two blocks (each block's own memory),
    else one between warps (a block barrier orders the lanes of a warp too), else any."""
    blocks = [r for r in races if r.other_block is not None]
    cross = blocks or [r for r in races if not r.same_warp]
    return (cross or list(races) or [None])[0]


@dataclass(frozen=True)
class BankLine:
    """Bank conflicts of the warp-wide accesses made by one source line to one array."""

    line: int
    array: str
    kind: str  # "read" or "write"
    count: int  # warp-wide accesses
    avg_degree: float
    max_degree: int


@dataclass
class AnalysisReport:
    """Shared-memory races and bank-conflict degrees of one analysed launch."""

    kernel: str
    races: list[Race] = field(default_factory=list)
    bank_lines: list[BankLine] = field(default_factory=list)
    races_dropped: int = 0
    traffic: list[TrafficLine] = field(default_factory=list)  # global memory (traffic.py)
    #: what one block's threads touched (prelude/tilelab_emu_touch.h), parameters and shared
    #: arrays named, code addresses as lines: plain data for a picture
    touch: dict = field(default_factory=dict)

    @property
    def has_races(self) -> bool:
        return bool(self.races)

    @property
    def fix(self) -> str:
        """What orders every race found: for two blocks, memory of each block's own; a block
        barrier if any crosses warps (it orders the lanes of a warp too), else
        __syncwarp()."""
        shown = representative(self.races)
        return shown.fix if shown is not None else ""

    @property
    def average_degree(self) -> float:
        """Kernel-wide average degree, weighted by the number of warp-wide accesses."""
        n = sum(b.count for b in self.bank_lines)
        return sum(b.avg_degree * b.count for b in self.bank_lines) / n if n else 1.0

    @property
    def worst_degree(self) -> float | None:
        """The highest average degree of any one access line (what a bank gate judges:
        extra conflict-free accesses cannot dilute it); None when no shared array is used."""
        return max((b.avg_degree for b in self.bank_lines), default=None)

    def line(self, line: int, array: str | None = None, kind: str | None = None) -> BankLine:
        """The bank statistics of one source line (optionally one array and kind)."""
        for b in self.bank_lines:
            if b.line == line and array in (None, b.array) and kind in (None, b.kind):
                return b
        raise KeyError(f"no shared-memory access recorded on line {line}")

    def to_dict(self) -> dict:
        """Plain data (JSON-ready)."""
        return {"kernel": self.kernel, "races": [asdict(r) for r in self.races],
                "races_dropped": self.races_dropped,
                "bank_lines": [asdict(b) for b in self.bank_lines],
                "average_degree": self.average_degree, "worst_degree": self.worst_degree,
                "traffic": [asdict(t) for t in self.traffic], "touch": self.touch}

    def summary(self, fix: str | None = None) -> str:
        """A readable table of the races and bank conflicts; ``fix``: what to do about the
        races, where the caller knows better than :attr:`fix` (from the kernel's source)."""
        out = [f"Emulator analysis of kernel '{self.kernel}' (shared and global memory)"]
        if self.races:
            out.append(f"RACES ({len(self.races)} kind(s)) — accesses no barrier orders:")
            out += [f"  {r.describe(fix=False)}" for r in self.races]
            if self.races_dropped:
                out.append(f"  ... and {self.races_dropped} more")
            out.append(f"  Fix: {fix or self.fix}.")
        else:
            out.append("Races: none found.")
        if not self.bank_lines:
            out.append("No shared-array accesses recorded.")
            if self.traffic:
                out.append(table(self.traffic))
            return "\n".join(out)
        out.append("Bank conflicts (degree 1 = conflict-free, 32 = fully serialised):")
        w = max(5, *(len(b.array) for b in self.bank_lines))
        out.append(f"  {'line':>5}  {'array':<{w}}  {'access':<6} {'warp accesses':>13} "
                   f"{'avg degree':>10} {'max':>4}")
        for b in self.bank_lines:
            out.append(f"  {b.line:>5}  {b.array:<{w}}  {b.kind:<6} {b.count:>13} "
                       f"{b.avg_degree:>10.2f} {b.max_degree:>4}")
        out.append(f"Kernel-wide average degree: {self.average_degree:.2f}")
        if self.traffic:
            out.append(table(self.traffic))
        return "\n".join(out)

    __str__ = summary

    @staticmethod
    def code_addresses(data: dict) -> list[int]:
        """The code addresses the runtime's JSON names (to be turned into source lines)."""
        pcs = [p for r in data.get("races", []) for p in r.get("pcs", ())]
        return pcs + [b["pc"] for key in ("banks", "traffic") for b in data.get(key, [])
                      if "pc" in b] + [w["pc"] for w in data.get("touch", {}).get("warps", [])] \
            + sorted(set(data.get("touch", {}).get("trace", [])[1::6]))

    @classmethod
    def from_json(cls, kernel: str, data: dict, lines: dict[int, int] | None = None,
                  params: tuple[str, ...] = ()) -> AnalysisReport:
        """Build from the runtime's JSON; ``lines`` maps its code addresses to source lines,
        ``params`` names the kernel's parameters (for the global traffic)."""
        arrays = data.get("arrays", [])
        device = data.get("device_globals", [])
        lines = lines or {}

        def name(i: int) -> str:
            if i >= DEVICE_BASE:
                g = i - DEVICE_BASE
                return device[g] if g < len(device) else "a __device__ variable"
            if i >= GLOBAL_BASE:
                p = i - GLOBAL_BASE
                return params[p] if p < len(params) else f"parameter #{p}"
            return arrays[i]["name"] if 0 <= i < len(arrays) else "shared memory (word)"

        def index(i: int, flat: int) -> tuple[int, ...]:
            dims = arrays[i]["dims"] if 0 <= i < len(arrays) and not arrays[i]["dynamic"] else []
            out = []
            for d in reversed(dims[1:]):
                out.append(flat % d)
                flat //= d
            return (flat, *reversed(out))

        def line(pc: int) -> int:
            return lines.get(pc, 0)

        races: dict[tuple, Race] = {}
        for r in data.get("races", []):
            ls = tuple(r["lines"]) if "lines" in r else tuple(line(p) for p in r["pcs"])
            block, first = tuple(r["block"]), tuple(r.get("block1", r["block"]))
            race = Race(name(r["array"]), index(r["array"], r["element"]), ls,
                        tuple(r["kinds"]), tuple(tuple(t) for t in r["threads"]),
                        block, r["count"], bool(r.get("same_warp")),
                        "global" if r["array"] >= GLOBAL_BASE else "shared",
                        first if first != block else None, int(r.get("order", 0)),
                        int(r.get("values", 0)))
            key = (race.array, race.lines, race.kinds)
            if key in races:  # one source line, several code addresses
                race = replace(races[key], count=races[key].count + race.count,
                               order=races[key].order | race.order,
                               values=races[key].values | race.values)
            races[key] = race
        merged: dict[tuple, list[int]] = {}
        for b in data.get("banks", []):
            key = (b["line"] if "line" in b else line(b["pc"]), name(b["array"]), b["kind"])
            acc = merged.setdefault(key, [0, 0, 0])
            acc[0] += b["accesses"]
            acc[1] += b["sum"]
            acc[2] = max(acc[2], b["max"])
        banks = [BankLine(ln, arr, kind, n, total / n if n else 1.0, worst)
                 for (ln, arr, kind), (n, total, worst) in sorted(merged.items())]
        t = data.get("touch") or {}
        touch = {
            "block": t.get("block", [0, 0, 0]),
            "global": [dict(g, param=params[g["param"]] if g["param"] < len(params)
                            else f"#{g['param']}") for g in t.get("global", [])],
            "warps": [{"line": line(w["pc"]), "array": name(w["array"]), "kind": w["kind"],
                       "words": w["words"]} for w in t.get("warps", [])],
        } if t and "global" in t else {}
        if t and "trace" in t:  # flat: thread, code address, parameter, kind, element, block
            flat = t["trace"]
            touch.setdefault("block", [0, 0, 0])
            touch["trace"] = [(flat[i], line(flat[i + 1]), *flat[i + 2:i + 6])
                              for i in range(0, len(flat), 6)]
            touch["trace_dropped"] = t.get("trace_dropped", 0)
        return cls(kernel, list(races.values()), banks, data.get("races_dropped", 0),
                   parse(data, params, lines), touch)


#: What a launch's printf output says where the emulator cut it (``LaunchReport.printf_note``).
PRINTF_CUT = ("[printf: the output past 1 MiB was cut here. A GPU's printf buffer "
              "(cudaLimitPrintfFifoSize, 1 MiB unless the host raises it) drops what a launch "
              "prints past it too, but it counts its records (a format and its arguments), not "
              "the text, so a GPU may print more or fewer lines. Print less: from one thread, "
              "or fewer times.]")

@dataclass
class LaunchReport:
    """What one launch produced besides its buffers."""

    kernel: str
    grid: XYZ
    block: XYZ
    shared: int
    stdout: str = ""
    stdout_truncated: bool = False
    kernel_seconds: float = 0.0  # the grid's run time in the child
    wall_seconds: float = 0.0  # the whole launch, fork and copies included
    analysis: AnalysisReport | None = None

    @property
    def printf_note(self) -> str:
        """What to say of the printf output: where the emulator cut it at 1 MiB, and how a
        GPU's own limit differs ("" when nothing was cut)."""
        if not self.stdout_truncated:
            return ""
        return PRINTF_CUT
