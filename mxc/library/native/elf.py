"""Refuse a truncated ELF library before ``dlopen`` maps it.

``dlopen`` maps a library's loadable segments where its program headers say
they are in the file.  When the file is shorter than that (an interrupted
copy, a full disk), the pages past its end are still mapped, and the first
touch of one -- relocation processing inside ``dlopen`` itself -- kills the
process with SIGBUS; no Python code gets a chance to report it.  So before
``dlopen`` the ELF header and every program header are read and checked
against the file's size.  Files that are not ELF (a text file, a Mach-O or PE
library) are left to the platform loader, whose message MXNet users know.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ...errors import ExtensionError

__all__ = ["check_elf_extent"]

_MAGIC = b"\x7fELF"
#: e_ident[EI_CLASS] -> (header format after e_ident, program header format)
_LAYOUT = {
    1: ("HHIIIIIHHHHHH", "IIIIIIII"),        # ELFCLASS32
    2: ("HHIQQQIHHHHHH", "IIQQQQQQ"),        # ELFCLASS64
}
_ENDIAN = {1: "<", 2: ">"}                   # e_ident[EI_DATA]
_PT_LOAD = 1


def _refuse(path: Path, size: int, what: str) -> ExtensionError:
    return ExtensionError(f"Error loading library: '{path}'\nextension library {path.name!r} is "
                          f"truncated or damaged ({size} bytes): {what}; refusing to dlopen it "
                          f"(copy the library again)")


def check_elf_extent(path: Path) -> None:
    """Raise :class:`ExtensionError` naming *path* when its ELF headers or loadable
    segments reach past the end of the file.  Non-ELF files pass unchecked."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        ident = fh.read(16)
        if len(ident) < 4 or ident[:4] != _MAGIC:
            return
        if len(ident) < 16 or ident[4] not in _LAYOUT or ident[5] not in _ENDIAN:
            raise _refuse(path, size, "its ELF identification is incomplete or unknown")
        header_fmt, phdr_fmt = (_ENDIAN[ident[5]] + f for f in _LAYOUT[ident[4]])
        raw = fh.read(struct.calcsize(header_fmt))
        if len(raw) < struct.calcsize(header_fmt):
            raise _refuse(path, size, "the ELF header is cut short")
        fields = struct.unpack(header_fmt, raw)
        phoff, phentsize, phnum = fields[4], fields[8], fields[9]
        if phnum == 0:
            raise _refuse(path, size, "it has no program headers")
        if phentsize < struct.calcsize(phdr_fmt):
            raise _refuse(path, size, f"program header entries of {phentsize} bytes are too "
                                      f"small")
        if phoff + phnum * phentsize > size:
            raise _refuse(path, size, f"its {phnum} program headers end at byte "
                                      f"{phoff + phnum * phentsize}")
        is64 = ident[4] == 2
        for i in range(phnum):
            fh.seek(phoff + i * phentsize)
            ph = struct.unpack(phdr_fmt, fh.read(struct.calcsize(phdr_fmt)))
            if is64:
                p_type, p_offset, p_filesz = ph[0], ph[2], ph[5]
            else:
                p_type, p_offset, p_filesz = ph[0], ph[1], ph[4]
            if p_type == _PT_LOAD and p_offset + p_filesz > size:
                raise _refuse(path, size, f"loadable segment {i} needs bytes up to "
                                          f"{p_offset + p_filesz}")
