"""The symbols of a shared library, read from its ELF file with pyelftools.

What ``nm -D --undefined-only`` lists (the imported names: every entry of the dynamic symbol
tables whose section index is ``SHN_UNDEF``, the null entry left out) and what ``nm
--defined-only`` lists, in one pass and without starting a process (about 2 ms, where two
``nm`` runs took about 80). A file pyelftools cannot read raises :class:`Unreadable`; the
caller then asks ``nm``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile


class Unreadable(ValueError):
    """Not an ELF file pyelftools can read."""


@dataclass(frozen=True)
class Symbols:
    """A shared library's symbols, read in one pass."""

    imported: frozenset[str]  # the dynamic tables' undefined entries (nm -D --undefined-only)
    defined: frozenset[str]  # every table's defined names, local and hidden ones too


def read_symbols(path: Path) -> Symbols:
    """``path``'s :class:`Symbols` (an :class:`OSError` where the file cannot be opened)."""
    imported: set[str] = set()
    defined: set[str] = set()
    with open(path, "rb") as f:
        try:
            for section in ELFFile(f).iter_sections():
                kind = section["sh_type"]
                if kind not in ("SHT_SYMTAB", "SHT_DYNSYM"):
                    continue
                for sym in section.iter_symbols():
                    if not sym.name:
                        continue
                    if sym["st_shndx"] == "SHN_UNDEF":
                        if kind == "SHT_DYNSYM":
                            imported.add(sym.name)
                    elif sym["st_info"]["type"] not in ("STT_SECTION", "STT_FILE"):
                        defined.add(sym.name)
        except (ELFError, struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{Path(path).name}: {exc}") from None
    return Symbols(frozenset(imported), frozenset(defined))
