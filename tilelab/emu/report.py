"""What a launch reports: printf output, timings, and (analysis mode) races and bank conflicts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .traffic import TrafficLine, parse, table

XYZ = tuple[int, int, int]


@dataclass(frozen=True)
class Race:
    """Two threads touched one shared word between two barriers, and one of them wrote."""

    array: str
    index: tuple[int, ...]
    lines: tuple[int, int]
    kinds: tuple[str, str]
    threads: tuple[XYZ, XYZ]
    block: XYZ
    count: int

    @property
    def element(self) -> str:
        """The element, e.g. ``As[3][7]``."""
        return self.array + "".join(f"[{i}]" for i in self.index)

    def describe(self) -> str:
        """One sentence a learner can act on."""
        (k1, k2), (l1, l2), (t1, t2) = self.kinds, self.lines, self.threads
        return (f"{self.element}: {k1} on line {l1} by thread {t1} and {k2} on line {l2} by "
                f"thread {t2} (block {self.block}) with no __syncthreads() between them "
                f"[{self.count} time(s)]")


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

    @property
    def has_races(self) -> bool:
        return bool(self.races)

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
                "traffic": [asdict(t) for t in self.traffic]}

    def summary(self) -> str:
        """A readable table of the races and bank conflicts."""
        out = [f"Emulator analysis of kernel '{self.kernel}' (shared and global memory)"]
        if self.races:
            out.append(f"RACES ({len(self.races)} kind(s)) — add a __syncthreads() between:")
            out += [f"  {r.describe()}" for r in self.races]
            if self.races_dropped:
                out.append(f"  ... and {self.races_dropped} more")
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

    @classmethod
    def from_json(cls, kernel: str, data: dict, params: tuple[str, ...] = ()) -> AnalysisReport:
        """Build from the runtime's JSON (``params``: the kernel's parameter names)."""
        arrays = data.get("arrays", [])

        def name(i: int) -> str:
            return arrays[i]["name"] if 0 <= i < len(arrays) else "?"

        def index(i: int, flat: int) -> tuple[int, ...]:
            dims = arrays[i]["dims"] if 0 <= i < len(arrays) and not arrays[i]["dynamic"] else []
            out = []
            for d in reversed(dims[1:]):
                out.append(flat % d)
                flat //= d
            return (flat, *reversed(out))

        races = [Race(name(r["array"]), index(r["array"], r["element"]), tuple(r["lines"]),
                      tuple(r["kinds"]), tuple(tuple(t) for t in r["threads"]),
                      tuple(r["block"]), r["count"]) for r in data.get("races", [])]
        banks = sorted((BankLine(b["line"], name(b["array"]), b["kind"], b["accesses"],
                                 b["sum"] / b["accesses"] if b["accesses"] else 1.0, b["max"])
                        for b in data.get("banks", [])),
                       key=lambda b: (b.line, b.array, b.kind))
        return cls(kernel, races, banks, data.get("races_dropped", 0), parse(data, params))


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
