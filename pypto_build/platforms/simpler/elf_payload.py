"""The loadable payload of a device kernel (the `.text` bytes of ld.lld's output) and an ELF's build-id.

On a2a3/a5 PyPTO stores, as a kernel's binary, the raw `.text` section of the
linked image `ccec` + `ld.lld` produce (its own extractor,
`python/pypto/runtime/elf_parser.py: extract_text_section`). What that extractor
does, and what `kernel_payload` does with it:

* it takes the **first** section header, in index order, whose name is `.text`
  (names read from the `e_shstrndx` table, up to a NUL or the table's end, with
  non-ASCII bytes dropped; a name offset past the table reads as ""), and returns
  the file bytes `[sh_offset, sh_offset + sh_size)`. It looks at no type, flag,
  symbol or relocation, so an unlinked object's `.text` (COMDAT `.text.*` and
  `.rela.text` left aside), an empty `.text` or a `.text` that is not code are
  all returned as they are. We return the same bytes in all those cases.
* it reads every file as a little-endian ELF64 with 64-byte section headers,
  slices without bounds checks and reads headers lazily. Where that yields bytes
  that are not the section's contents, we refuse instead (one line, `PayloadError`):
  an ELF32 or big-endian file; `e_shentsize` not 64; a section header table,
  name table or `.text` reaching past the end of the file (PyPTO returns a short
  or empty payload, or succeeds on a truncated file whose `.text` header came
  before the cut); `e_shstrndx` past the table (incl. extended numbering); a
  `.text` of type SHT_NOBITS (PyPTO returns whatever file bytes lie at its
  offset) or SHF_COMPRESSED (PyPTO returns the compressed bytes). It also
  accepts Mach-O, which ld.lld never writes; we refuse it.
  So: wherever we return bytes PyPTO returns the same bytes, and wherever PyPTO
  fails we fail; we fail on more inputs, all of them corrupt or not ld.lld's.

simpler's own extractor (`simpler_setup/elf_parser.py`, used by its scene tests)
is stricter still: `.text` must be SHT_PROGBITS, any SHT_PROGBITS `.text.*` or a
`.rela.text*` section is an error, and a `kernel_entry` symbol must sit at
`.text`'s start. On a correctly linked image all three agree.
"""
from __future__ import annotations

import io
import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ...errors import UserError

SHDR_SIZE = 64               # an ELF64 section header
PHDR_SIZE = 56               # an ELF64 program header
SHF_COMPRESSED = 0x800
NT_GNU_BUILD_ID = 3
_MACH_O_64 = b"\xcf\xfa\xed\xfe"
_FIX = "rebuild the kernel (expected ld.lld's linked ELF64 image)"


class PayloadError(UserError, ValueError):
    """A kernel image is not an ELF we can take the `.text` payload from."""


def kernel_payload(elf_bytes: bytes, source_name: str) -> bytes:
    """The `.text` bytes PyPTO would store for the linked kernel image `elf_bytes` (see the module).

    `source_name` names the image (or the kernel it was built from) in the error.
    """
    elf = _open_elf64(elf_bytes, source_name)
    shoff, shnum, shstrndx = elf["e_shoff"], elf["e_shnum"], elf["e_shstrndx"]
    if shnum == 0:
        raise PayloadError(f"{source_name}: no .text section (the ELF has no section headers); {_FIX}")
    if shoff == 0 or elf["e_shentsize"] != SHDR_SIZE:
        raise PayloadError(f"{source_name}: bad section header table (offset {shoff}, entry size "
                           f"{elf['e_shentsize']}); {_FIX}")
    if shoff + shnum * SHDR_SIZE > len(elf_bytes):
        raise PayloadError(f"{source_name}: the section header table runs past the end of the file "
                           f"({len(elf_bytes)} bytes): truncated; {_FIX}")
    if shstrndx >= shnum:
        raise PayloadError(f"{source_name}: the section name table index {shstrndx} is past the "
                           f"{shnum} section headers; {_FIX}")

    def section_header(index: int):
        start = shoff + index * SHDR_SIZE
        return elf.structs.Elf_Shdr.parse(elf_bytes[start:start + SHDR_SIZE])

    names = _contents(elf_bytes, section_header(shstrndx), source_name, "the section name table")
    for index in range(shnum):
        section = section_header(index)
        if _name(names, section["sh_name"]) != b".text":
            continue
        if section["sh_type"] == "SHT_NOBITS" and section["sh_size"]:
            raise PayloadError(f"{source_name}: .text is SHT_NOBITS (it has no bytes in the file); {_FIX}")
        if section["sh_flags"] & SHF_COMPRESSED:
            raise PayloadError(f"{source_name}: .text is compressed (SHF_COMPRESSED); {_FIX}")
        return _contents(elf_bytes, section, source_name, ".text")
    raise PayloadError(f"{source_name}: no .text section (does the kernel define kernel_entry?); {_FIX}")


def build_id_64(elf_bytes: bytes) -> int | None:
    """The runtime's 64-bit id of an ELF64 (the GNU build-id note's first 8 bytes, little-endian), or None.

    Same search as simpler's `elf_build_id.h`: PT_NOTE program headers in order,
    each note walked until a malformed one; a note needs the name "GNU", type 3
    and at least 8 descriptor bytes. None where the runtime falls back to
    FNV-1a-64 of the whole file (no note, not a little-endian ELF64, headers
    past the end of the file).
    """
    try:
        elf = _open_elf64(elf_bytes, "")
    except PayloadError:
        return None
    phoff, phnum, phentsize = elf["e_phoff"], elf["e_phnum"], elf["e_phentsize"]
    if phoff == 0 or phentsize < PHDR_SIZE or phoff + phnum * phentsize > len(elf_bytes):
        return None
    for index in range(phnum):
        start = phoff + index * phentsize
        segment = elf.structs.Elf_Phdr.parse(elf_bytes[start:start + PHDR_SIZE])
        if segment["p_type"] != "PT_NOTE" or segment["p_offset"] + segment["p_filesz"] > len(elf_bytes):
            continue
        found = _gnu_build_id(elf_bytes, segment["p_offset"], segment["p_offset"] + segment["p_filesz"])
        if found is not None:
            return found
    return None


def _open_elf64(elf_bytes: bytes, source_name: str) -> ELFFile:
    """The parsed header of a little-endian ELF64, or PayloadError saying what the bytes are instead."""
    if elf_bytes[:4] == _MACH_O_64:
        raise PayloadError(f"{source_name}: a Mach-O object, not an ELF; {_FIX}")
    if len(elf_bytes) < 64 or elf_bytes[:4] != b"\x7fELF":
        what = "too short" if len(elf_bytes) < 64 else "no ELF magic"
        raise PayloadError(f"{source_name}: not an ELF file ({what}, {len(elf_bytes)} bytes); {_FIX}")
    if elf_bytes[4] != 2 or elf_bytes[5] != 1:
        raise PayloadError(f"{source_name}: not a little-endian ELF64 (EI_CLASS {elf_bytes[4]}, "
                           f"EI_DATA {elf_bytes[5]}); {_FIX}")
    try:
        return ELFFile(io.BytesIO(elf_bytes))
    except ELFError as exc:
        raise PayloadError(f"{source_name}: unreadable ELF header ({exc}); {_FIX}") from None


def _contents(elf_bytes: bytes, section, source_name: str, what: str) -> bytes:
    """The file bytes of a section; PayloadError when they run past the end of the file."""
    start, size = section["sh_offset"], section["sh_size"]
    if start + size > len(elf_bytes):
        raise PayloadError(f"{source_name}: {what} (offset {start}, {size} bytes) runs past the end of the "
                           f"file ({len(elf_bytes)} bytes): truncated or corrupt; {_FIX}")
    return elf_bytes[start:start + size]


def _name(names: bytes, offset: int) -> bytes:
    """A section name as PyPTO reads it: up to a NUL or the table's end, non-ASCII bytes dropped."""
    end = names.find(b"\0", offset)
    raw = names[offset:] if end < 0 else names[offset:end]
    return bytes(b for b in raw if b < 0x80)


def _gnu_build_id(data: bytes, start: int, end: int) -> int | None:
    """The first GNU build-id in the notes `data[start:end]`, as a little-endian u64; None if absent/malformed."""
    note = start
    while note + 12 <= end:
        namesz, descsz, kind = struct.unpack_from("<III", data, note)
        name = note + 12
        desc = name + ((namesz + 3) & ~3)
        following = desc + ((descsz + 3) & ~3)
        if following > end:
            return None
        if kind == NT_GNU_BUILD_ID and namesz == 4 and data[name:name + 4] == b"GNU\0" and descsz >= 8:
            return struct.unpack_from("<Q", data, desc)[0]
        note = following
    return None
