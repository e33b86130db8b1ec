"""The shared-memory bank rule, stated once: how many passes (Nsight Compute's
*wavefronts*) one warp-wide access takes.

Shared memory has 32 banks of 4 bytes; one pass (one wavefront) serves 128 bytes, one word
from each bank. A warp-wide access of ``width`` bytes per lane is served in *phases* of
consecutive lanes whose data fill one pass at most: all 32 lanes for 4-byte accesses, a
half-warp (16 lanes) for 8-byte ones, a quarter-warp (8 lanes) for 16-byte ones. Within a
phase, lanes that name the same address share its pass (a broadcast), and each bank
serves one distinct word per pass, so the phase takes as many passes as the most distinct
words any one bank holds. A load in which every lane reads what its neighbour ``lane ^ 1``
reads, or every lane what ``lane ^ 2`` reads, is served in half as many phases of twice
the lanes (NVIDIA's description of Volta-to-Hopper uniform loads): a 16-byte broadcast
then takes 2 passes, not 4. ``tilelab bench bank_wide`` holds the rule against the GPU's
own counts, pattern by pattern; the CPU emulator's analysis counts the same way
(``degree`` in ``tilelab/emu/prelude/tilelab_emu_analysis.h``).

Pure arithmetic: the book's diagrams, the throughput model and the tests import it.
"""

from __future__ import annotations

from collections.abc import Sequence

BANKS = 32
WORD = 4  # bytes per bank
PASS_BYTES = BANKS * WORD  # what one pass (wavefront) serves


def bank_passes(word_addresses: Sequence[int]) -> int:
    """Passes of a 32-bit access by one warp: the most distinct words in any one bank
    (threads reading the same word share a pass)."""
    per_bank: dict[int, set[int]] = {}
    for w in word_addresses:
        per_bank.setdefault(w % BANKS, set()).add(w)
    return max((len(s) for s in per_bank.values()), default=1)


def paired(addresses: Sequence[int | None]) -> bool:
    """Whether every active lane reads what lane ``lane ^ 1`` reads, or every active lane
    what ``lane ^ 2`` reads (``None``: an inactive lane, which pairs with anything)."""
    for step in (1, 2):
        if all(a is None or addresses[i ^ step] is None or a == addresses[i ^ step]
               for i, a in enumerate(addresses) if (i ^ step) < len(addresses)):
            return True
    return False


def phases(addresses: Sequence[int | None], width: int, load: bool = True
           ) -> list[list[int]]:
    """The lanes' byte addresses grouped into the phases the banks serve them in (the
    active lanes of each phase; phases with none are left out)."""
    per = BANKS if width <= WORD else BANKS * WORD // width
    if load and width > WORD and paired(addresses):
        per *= 2
    groups = [[a for a in addresses[i:i + per] if a is not None]
              for i in range(0, len(addresses), per)]
    return [g for g in groups if g]


def phase_passes(byte_addresses: Sequence[int], width: int) -> int:
    """Passes of one phase: the most distinct words one bank holds (a lane's access of
    ``width`` bytes covers ``width / 4`` consecutive words)."""
    words = {a // WORD + i for a in set(byte_addresses) for i in range(max(width // WORD, 1))}
    return bank_passes(sorted(words)) if words else 0


def wavefronts(addresses: Sequence[int | None], width: int, load: bool = True) -> int:
    """Passes (wavefronts) of one warp-wide shared access of ``width`` bytes per lane at
    these byte addresses (``None``: an inactive lane): the sum over its phases."""
    return sum(phase_passes(p, width) for p in phases(addresses, width, load))


def ideal(addresses: Sequence[int | None], width: int, load: bool = True) -> int:
    """The passes the access takes without a conflict: one per phase."""
    return len(phases(addresses, width, load))


def degree(addresses: Sequence[int | None], width: int, load: bool = True) -> int:
    """The conflict degree the emulator reports: the passes of the worst phase (1: none)."""
    return max((phase_passes(p, width) for p in phases(addresses, width, load)), default=1)


def quarter_warp_wavefronts(addresses: Sequence[int | None], width: int) -> int:
    """The rule without the pairing of uniform loads (every 16-byte access a quarter-warp
    at a time): the emulator's rule before it was held against the GPU's counts."""
    return wavefronts(addresses, width, load=False)


def merged_wavefronts(addresses: Sequence[int | None], width: int) -> int:
    """Another candidate: the distinct bytes of the whole warp, one pass per 128 of them,
    at least two for a wide access (the throughput model's rule before)."""
    chunks = {a // width for a in addresses if a is not None}
    least = 2 if width > WORD else 1
    return max(least, -(-len(chunks) * width // PASS_BYTES))
