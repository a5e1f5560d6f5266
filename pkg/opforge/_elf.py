"""Reads an ELF file's header and one section without loading it.

load_op_library uses it to check a library's ``.opforge_stamp`` section
before dlopen runs any of the library's code.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

ET_DYN = 3


class NotElfError(ValueError):
    """The file is not an ELF object (or is truncated)."""


@dataclass(frozen=True)
class ElfInfo:
    elf_class: int   # 1: 32-bit, 2: 64-bit
    byte_order: str  # "<" or ">"
    type: int        # ET_DYN for shared libraries
    machine: int


def _header(data: bytes) -> tuple[ElfInfo, tuple]:
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise NotElfError("no ELF header")
    cls, order = data[4], {1: "<", 2: ">"}.get(data[5])
    if cls not in (1, 2) or order is None:
        raise NotElfError("bad ELF identification bytes")
    fmt = order + ("16sHHIQQQIHHHHHH" if cls == 2 else "16sHHIIIIIHHHHHH")
    if len(data) < struct.calcsize(fmt):
        raise NotElfError("truncated ELF header")
    fields = struct.unpack_from(fmt, data)
    return ElfInfo(cls, order, fields[1], fields[2]), fields


def info(path: str) -> ElfInfo:
    with open(path, "rb") as f:
        return _header(f.read(64))[0]


def read_section(path: str, name: str) -> tuple[ElfInfo, bytes | None]:
    """(header info, the named section's bytes or None if absent)."""
    with open(path, "rb") as f:
        return parse_section(f.read(), name)


def parse_section(data: bytes, name: str) -> tuple[ElfInfo, bytes | None]:
    """read_section on a file's bytes; raises NotElfError on anything malformed."""
    elf, fields = _header(data)
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    shfmt = elf.byte_order + ("IIQQQQIIQQ" if elf.elf_class == 2 else "IIIIIIIIII")
    if shoff == 0 or shentsize < struct.calcsize(shfmt):
        return elf, None

    def section(i: int) -> tuple:
        off = shoff + i * shentsize
        if off + shentsize > len(data):
            raise NotElfError("truncated section header table")
        return struct.unpack_from(shfmt, data, off)

    if shnum == 0:  # more than 0xff00 sections: the count is in section 0
        shnum = section(0)[5]
    if shstrndx == 0xFFFF:
        shstrndx = section(0)[6]
    names = section(shstrndx)
    strtab = data[names[4]:names[4] + names[5]]
    want = name.encode()
    for i in range(shnum):
        sh = section(i)
        end = strtab.find(b"\0", sh[0])
        if strtab[sh[0]:end] == want:
            if sh[4] + sh[5] > len(data):  # a short slice would pass for the section
                raise NotElfError(f"section {name} lies past the end of the file")
            return elf, data[sh[4]:sh[4] + sh[5]]
    return elf, None
