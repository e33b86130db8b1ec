"""The undefined (imported) dynamic symbols of a shared library, read from its ELF file.

What ``nm -D --undefined-only`` lists, without starting a process: every entry of the
dynamic symbol tables (``SHT_DYNSYM``) whose section index is ``SHN_UNDEF``, the null
entry left out. A file this reader does not know (not ELF, section headers past the
first 65,280, a table out of the file's bounds) raises :class:`Unreadable`; the caller
then asks ``nm``.
"""

from __future__ import annotations

import struct
from pathlib import Path

SHT_DYNSYM = 11
SHN_UNDEF = 0


class Unreadable(ValueError):
    """Not an ELF file this reader knows."""


def undefined_dynamic_symbols(path: Path) -> set[str]:
    """Names of the undefined entries of ``path``'s dynamic symbol tables."""
    data = path.read_bytes()
    try:
        return _undefined(data)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise Unreadable(f"{path.name}: {exc}") from None


def _undefined(data: bytes) -> set[str]:
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise Unreadable("not a 32- or 64-bit ELF file")
    wide, e = data[4] == 2, "<" if data[5] == 1 else ">"
    shoff = struct.unpack_from(e + ("Q" if wide else "I"), data, 0x28 if wide else 0x20)[0]
    shentsize, shnum = struct.unpack_from(e + "HH", data, 0x3A if wide else 0x2E)
    if shoff == 0 or shnum == 0:  # none, or more than 65,280 (counted in section 0)
        raise Unreadable("no section headers this reader can count")
    header = e + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
    if shentsize < struct.calcsize(header):
        raise Unreadable("section headers smaller than ELF's")
    # (type, offset, size, link, entry size) of each section
    sections = [(s[1], s[4], s[5], s[6], s[9]) for s in
                (struct.unpack_from(header, data, shoff + i * shentsize) for i in range(shnum))]
    symbol = e + ("IBBHQQ" if wide else "IIIBBH")
    names: set[str] = set()
    for kind, offset, size, link, entsize in sections:
        if kind != SHT_DYNSYM:
            continue
        if entsize < struct.calcsize(symbol) or offset + size > len(data):
            raise Unreadable("a dynamic symbol table out of bounds")
        _, str_off, str_size, _, _ = sections[link]
        strings = data[str_off:str_off + str_size]
        if len(strings) != str_size:
            raise Unreadable("a string table out of bounds")
        for k in range(1, size // entsize):  # entry 0 is the null symbol
            fields = struct.unpack_from(symbol, data, offset + k * entsize)
            name_at, index = fields[0], fields[3] if wide else fields[5]
            if index != SHN_UNDEF:
                continue
            end = strings.find(b"\0", name_at)
            name = strings[name_at:end if end >= 0 else len(strings)].decode("utf-8")
            if name:
                names.add(name)
    return names
