"""Global-memory traffic in analysis mode: requests and 32-byte sectors per source line.

The translator rewrites every ``P[`` on a kernel parameter ``P`` into
``tl_emu::gl(P, __LINE__, i)[`` (see ``prelude/tilelab_emu_traffic.h``). For a pointer
parameter each element access is recorded; the lanes of a warp that make the k-th access of
(line, parameter, read/write) between two barriers form one warp-wide request, and the
request's cost is the number of distinct 32-byte sectors its lanes touch (the unit in which
L1, L2 and DRAM move global data): 4 for 32 consecutive floats, 32 for a column walk.
Accesses through other pointers (``*p``, a local ``float* q``) are not counted.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .kernels import KernelSource
from .lexer import matching

Edit = tuple[int, int, str]
SECTOR = 32  # bytes
COALESCED_SECTORS = 4  # 32 lanes x 4 bytes, aligned: one 128-byte line


@dataclass(frozen=True)
class TrafficLine:
    """The warp-wide global requests one source line makes through one parameter."""

    line: int
    param: str
    kind: str  # "read" or "write"
    requests: int  # warp-wide requests
    sectors: int  # 32-byte sectors touched, summed over the requests
    lanes: int  # thread accesses (active lanes), summed
    bytes: int  # bytes the threads asked for, summed
    max_sectors: int

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def efficiency(self) -> float:
        """Bytes used per byte moved (1.0: every byte of every sector was asked for)."""
        return self.bytes / (self.sectors * SECTOR) if self.sectors else 1.0


def _body(masked: str, k: KernelSource) -> tuple[int, int] | None:
    for m in re.finditer(rf"\b{re.escape(k.name)}\s*\(", masked):
        close = matching(masked, m.end() - 1)
        if close < 0:
            continue
        brace = close + 1
        while brace < len(masked) and masked[brace].isspace():
            brace += 1
        if brace < len(masked) and masked[brace] == "{":
            end = matching(masked, brace)
            if end > 0:
                return brace, end
    return None


def rewrite_params(masked: str, kernels: list[KernelSource]) -> list[Edit]:
    """Edits turning ``P[`` on each kernel parameter into a counted access."""
    edits: list[Edit] = []
    for k in kernels:
        body = _body(masked, k)
        if body is None:
            continue
        for i, name in enumerate(k.names):
            if name.startswith("#"):
                continue
            for m in re.compile(rf"\b{re.escape(name)}\s*\[").finditer(masked, *body):
                before = masked[max(0, m.start() - 40):m.start()].rstrip()
                if before.endswith((".", "->", "::")) or re.search(r"\bsizeof\s*\(?$", before):
                    continue
                edits.append((m.start(), m.end(), f"tl_emu::gl({name}, __LINE__, {i})["))
    return edits


def parse(data: dict, names: tuple[str, ...]) -> list[TrafficLine]:
    """The runtime's JSON records, with parameter names."""
    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else f"#{i}"

    return sorted((TrafficLine(t["line"], name(t["param"]), t["kind"], t["requests"],
                               t["sectors"], t["lanes"], t["bytes"], t["max_sectors"])
                   for t in data.get("traffic", [])),
                  key=lambda t: (t.line, t.param, t.kind))


@dataclass(frozen=True)
class Totals:
    """A kernel's global traffic summed over its lines."""

    load_requests: int
    load_sectors: int
    load_lanes: int
    load_bytes: int
    store_requests: int
    store_sectors: int
    store_bytes: int

    @classmethod
    def of(cls, lines: list[TrafficLine]) -> Totals:
        def total(kind: str, attr: str) -> int:
            return sum(getattr(t, attr) for t in lines if t.kind == kind)

        return cls(total("read", "requests"), total("read", "sectors"), total("read", "lanes"),
                   total("read", "bytes"), total("write", "requests"), total("write", "sectors"),
                   total("write", "bytes"))

    def to_dict(self) -> dict:
        return asdict(self)


def table(lines: list[TrafficLine]) -> str:
    """A readable table: one row per (line, parameter, kind)."""
    if not lines:
        return "No global-memory accesses through the kernel's parameters were recorded."
    w = max(5, *(len(t.param) for t in lines))
    out = ["Global-memory traffic (32-byte sectors per warp-wide request; 4 = coalesced floats):",
           f"  {'line':>5}  {'param':<{w}}  {'access':<6} {'requests':>9} {'sectors':>9} "
           f"{'per request':>11} {'max':>4}"]
    out += [f"  {t.line:>5}  {t.param:<{w}}  {t.kind:<6} {t.requests:>9} {t.sectors:>9} "
            f"{t.sectors_per_request:>11.2f} {t.max_sectors:>4}" for t in lines]
    return "\n".join(out)
