"""Fat binaries: cubins for several architectures and PTX in one image.

The container ``nvcc -fatbin`` writes (payloads uncompressed), which
``cuLibraryLoadData`` takes as it takes a cubin; the driver picks each
device's code when a context first uses the library, so one ``CUkernel``
runs on devices of different architectures (docs/architecture.md, "Images
for several architectures").
"""

import re
import struct
import sys
from dataclasses import dataclass

__all__ = ["FatbinEntry", "build_fatbin", "is_fatbin", "truncation", "fatbin_entries",
           "driver_choice"]

MAGIC = 0xBA55ED50
_VERSION = 1
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
# kind, entry version, entry header size, padded payload size, compressed size,
# offset of the header's extension, code version minor, major, architecture,
# object name offset, length, flags, (unused), uncompressed size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
# PTX entries carry a 16-byte extension (its first word 0x48), as nvcc 13
# writes them; the driver misreads a PTX entry without it.
_PTX_EXTENSION = struct.pack("<I12x", 0x48)
_ENTRY_VERSION = 0x0101
_KINDS = {1: "ptx", 2: "cubin"}
_KIND_CODES = {v: k for k, v in _KINDS.items()}
# 64-bit addresses, and the host the code was built for.
_FLAGS = 0x1 | (0x40 if sys.platform.startswith("win") else 0x10)
# The code version of a cubin entry: the ELF format revision nvcc records.
_CUBIN_VERSION = (1, 8)
_PTX_VERSION = re.compile(rb"^\s*\.version\s+(\d+)\.(\d+)", re.M)


@dataclass(frozen=True)
class FatbinEntry:
    """One image of a fatbin: ``kind`` ``"cubin"`` or ``"ptx"``, ``cc`` the
    ``(major, minor)`` it is built for, ``data`` its bytes (PTX text ends
    with a NUL)."""

    kind: str
    cc: tuple
    data: bytes


def _ptx_version(text):
    m = _PTX_VERSION.search(text)
    if m is None:
        raise ValueError("PTX without a .version directive")
    return int(m.group(1)), int(m.group(2))


def build_fatbin(cubins, ptx=None):
    """The fatbin holding *cubins* (``{(major, minor): cubin bytes}``) and,
    when given, *ptx* (``((major, minor), PTX text)``), as bytes."""
    parts = [("cubin", cc, bytes(data), _CUBIN_VERSION) for cc, data in sorted(cubins.items())]
    if ptx is not None:
        cc, text = ptx
        text = text.encode() if isinstance(text, str) else bytes(text)
        text = text.rstrip(b"\0") + b"\0"
        parts.append(("ptx", cc, text, _ptx_version(text)))
    body = bytearray()
    for kind, (major, minor), data, (vmajor, vminor) in parts:
        padded = len(data) + (-len(data) % 8)
        extension = _PTX_EXTENSION if kind == "ptx" else b""
        body += _ENTRY.pack(_KIND_CODES[kind], _ENTRY_VERSION, _ENTRY.size + len(extension),
                            padded, 0, _ENTRY.size if extension else 0, vminor, vmajor,
                            major * 10 + minor, 0, 0, _FLAGS, 0, 0)
        body += extension + data + b"\0" * (padded - len(data))
    return _HEADER.pack(MAGIC, _VERSION, _HEADER.size, len(body)) + bytes(body)


def is_fatbin(data):
    """True when *data* (bytes) starts with a fatbin header."""
    return len(data) >= _HEADER.size and _HEADER.unpack_from(data)[0] == MAGIC


def truncation(data):
    """Why fatbin *data* (bytes starting with the fatbin magic) is cut short,
    or None: its header and the entries it announces must be there."""
    if len(data) < _HEADER.size:
        return "its header is %d bytes of %d" % (len(data), _HEADER.size)
    _, _, header_size, size = _HEADER.unpack_from(data)
    if header_size + size > len(data):
        return "it is %d bytes; its header announces %d" % (len(data), header_size + size)
    return None


def fatbin_entries(data):
    """The :class:`FatbinEntry` list of fatbin *data* (bytes), in order;
    ValueError for anything that is not a fatbin. Entries of kinds other
    than cubin and PTX are skipped."""
    if not is_fatbin(data):
        raise ValueError("not a fatbin (no 0x%08X header)" % MAGIC)
    cut = truncation(data)
    if cut is not None:
        raise ValueError("truncated fatbin: " + cut)
    _, _, header_size, size = _HEADER.unpack_from(data)
    pos, end = header_size, header_size + size
    out = []
    while pos + _ENTRY.size <= end:
        kind, _, entry_size, padded, compressed, _, _, _, arch = _ENTRY.unpack_from(data, pos)[:9]
        if entry_size < _ENTRY.size:
            raise ValueError("malformed fatbin entry at byte %d" % pos)
        payload = bytes(data[pos + entry_size:pos + entry_size + padded])
        if kind in _KINDS:
            if compressed:
                raise ValueError("compressed fatbin entries are not read here")
            if kind == _KIND_CODES["ptx"]:
                payload = payload.rstrip(b"\0") + b"\0"
            out.append(FatbinEntry(_KINDS[kind], divmod(arch, 10), payload))
        pos += entry_size + padded
    return out


def driver_choice(entries, cc):
    """The entry the driver runs on a device of compute capability *cc*:
    the cubin of its architecture family with the highest minor version not
    above the device's, else the newest PTX not newer than the device, else
    None (the driver then fails with ``CUDA_ERROR_NO_BINARY_FOR_GPU``)."""
    cc = tuple(cc)
    cubins = [e for e in entries if e.kind == "cubin" and e.cc[0] == cc[0] and e.cc <= cc]
    if cubins:
        return max(cubins, key=lambda e: e.cc)
    ptx = [e for e in entries if e.kind == "ptx" and e.cc <= cc]
    return max(ptx, key=lambda e: e.cc) if ptx else None
