"""Global-memory traffic in analysis mode: requests and 32-byte sectors per source line.

Analysis builds see every load and store through g++'s TSan instrumentation; those inside the
device buffer a pointer parameter points into are global traffic, named for that parameter
whatever pointer they went through (``P[i]``, ``*p``, a local ``float* q = P + k``, a
``float4`` cast). The lanes of a warp that make the k-th access of (code address, parameter,
read/write) between two meeting points form one warp-wide request, and the request's cost is
the number of distinct 32-byte sectors its lanes touch (the unit in which L1, L2 and DRAM move
global data): 4 for 32 consecutive floats, 32 for a column walk. See
``prelude/tilelab_emu_traffic.h``; code addresses become source lines here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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


def parse(data: dict, names: tuple[str, ...], lines: dict[int, int] | None = None
          ) -> list[TrafficLine]:
    """The runtime's JSON records, with parameter names, summed per source line (``lines``
    maps code addresses to lines; a line compiled to several addresses is one row)."""
    lines = lines or {}

    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else f"#{i}"

    merged: dict[tuple[int, str, str], list[int]] = {}
    for t in data.get("traffic", []):
        line = t["line"] if "line" in t else lines.get(t["pc"], 0)
        acc = merged.setdefault((line, name(t["param"]), t["kind"]), [0, 0, 0, 0, 0])
        for k, field in enumerate(("requests", "sectors", "lanes", "bytes")):
            acc[k] += t[field]
        acc[4] = max(acc[4], t["max_sectors"])
    return [TrafficLine(line, param, kind, *acc)
            for (line, param, kind), acc in sorted(merged.items())]


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
