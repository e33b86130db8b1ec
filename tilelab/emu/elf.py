"""The undefined (imported) dynamic symbols of a shared library, read from its ELF file.

What ``nm -D --undefined-only`` lists, without starting a process (about 2 ms, where two
``nm`` runs took about 80): every entry of the dynamic symbol tables (``SHT_DYNSYM``)
whose section index is ``SHN_UNDEF``, the null entry left out, read with pyelftools. A
file pyelftools cannot read raises :class:`Unreadable`; the caller then asks ``nm``.
"""

from __future__ import annotations

import struct
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile


class Unreadable(ValueError):
    """Not an ELF file pyelftools can read."""


def defined_symbols(path: Path) -> set[str]:
    """Names ``path`` defines, in its symbol tables (local and hidden ones too; an
    :class:`OSError` where the file cannot be opened)."""
    with open(path, "rb") as f:
        try:
            elf = ELFFile(f)
            return {sym.name for section in elf.iter_sections()
                    if section["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM")
                    for sym in section.iter_symbols()
                    if sym.name and sym["st_shndx"] != "SHN_UNDEF"
                    and sym["st_info"]["type"] not in ("STT_SECTION", "STT_FILE")}
        except (ELFError, struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{Path(path).name}: {exc}") from None


def undefined_dynamic_symbols(path: Path) -> set[str]:
    """Names of the undefined entries of ``path``'s dynamic symbol tables (an
    :class:`OSError` where the file cannot be opened)."""
    with open(path, "rb") as f:
        try:
            elf = ELFFile(f)
            return {sym.name for section in elf.iter_sections()
                    if section["sh_type"] == "SHT_DYNSYM"
                    for sym in section.iter_symbols()
                    if sym.name and sym["st_shndx"] == "SHN_UNDEF"}
        except (ELFError, struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{Path(path).name}: {exc}") from None
