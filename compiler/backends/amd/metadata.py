"""What a loader needs to know about an AMD kernel, read from what LLVM and ld.lld produced.

- `kernel_metadata(asm)`: the kernel's entry of the code object's metadata note (the
  `.amdgpu_metadata` block of the assembly, YAML): the descriptor symbol (`<name>.kd`), the
  kernel arguments' layout in the kernarg segment, the LDS (group segment) and scratch (private
  segment) sizes, the wavefront size and register counts. Only the subset of YAML LLVM writes
  there is read (block mappings and sequences, scalars).
- `kernel_descriptor(code_object, symbol)`: the 64-byte kernel descriptor the `.kd` symbol names
  in the linked ELF, as the hardware's dispatch reads it (AMDGPU's documented layout).
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["kernel_metadata", "kernel_descriptor", "elf_machine", "EM_AMDGPU", "MACH"]

EM_AMDGPU = 224
# EF_AMDGPU_MACH values in the ELF header's e_flags (low byte)
MACH = {"gfx942": 0x4C, "gfx950": 0x4F}


def _scalar(s: str) -> Any:
    s = s.strip()
    if s.startswith(("'", '"')) and s.endswith(s[0]):
        return s[1:-1]
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(s, s)


def _block(asm: str) -> list[str]:
    start = asm.find(".amdgpu_metadata")
    end = asm.find(".end_amdgpu_metadata", start)
    if start < 0 or end < 0:
        return []
    return [ln for ln in asm[start:end].split("\n")[1:] if ln.strip() and ln.strip() not in ("---", "...")]


def _parse(lines: list[str], i: int, indent: int) -> tuple[Any, int]:
    """The node whose lines start at `lines[i]`, indented `indent`; returns (node, next line)."""
    first = lines[i]
    if first[indent:].startswith("- "):
        seq: list[Any] = []
        while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) == indent and \
                lines[i][indent:].startswith("- "):
            # an item: its first line with "- " read as two more spaces of indent
            lines[i] = lines[i][:indent] + "  " + lines[i][indent + 2:]
            item, i = _parse(lines, i, indent + 2)
            seq.append(item)
        return seq, i
    out: dict[str, Any] = {}
    while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) == indent:
        key, _, rest = lines[i].strip().partition(":")
        i += 1
        if rest.strip():
            out[key] = _scalar(rest)
        elif i < len(lines):
            sub = len(lines[i]) - len(lines[i].lstrip())
            if sub > indent or (sub == indent and lines[i][sub:].startswith("- ")):
                out[key], i = _parse(lines, i, sub)
            else:
                out[key] = None
    return out, i


def kernel_metadata(asm: str, symbol: str) -> dict[str, Any]:
    """The metadata note's entry for kernel `symbol` ({} when the assembly has none)."""
    lines = _block(asm)
    if not lines:
        return {}
    doc, _ = _parse(lines, 0, 0)
    for k in doc.get("amdhsa.kernels") or []:
        if k.get(".name") == symbol:
            return {key.lstrip("."): v for key, v in k.items()}
    return {}


def elf_machine(code_object: bytes) -> tuple[int, int]:
    """(e_machine, e_flags) of an ELF64 little-endian file."""
    if code_object[:4] != b"\x7fELF" or code_object[4] != 2:
        raise ValueError("not an ELF64 file")
    e_machine = struct.unpack_from("<H", code_object, 18)[0]
    e_flags = struct.unpack_from("<I", code_object, 48)[0]
    return e_machine, e_flags


def _sections(elf: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """(type, addr, offset, size, link, entsize) of each section."""
    shoff = struct.unpack_from("<Q", elf, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", elf, 58)
    out = []
    for k in range(shnum):
        _name, typ, _flags, addr, off, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", elf, shoff + k * shentsize)
        out.append((typ, addr, off, size, link, entsize))
    return out


def kernel_descriptor(code_object: bytes, symbol: str) -> dict[str, int] | None:
    """The fields of the kernel descriptor `symbol` (e.g. "k.kd") in a code object, or None."""
    elf_machine(code_object)
    secs = _sections(code_object)
    for typ, _addr, off, size, link, entsize in secs:
        if typ not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strtab = secs[link][2]
        for k in range(size // entsize):
            st_name, _info, _other, shndx, value, st_size = struct.unpack_from("<IBBHQQ", code_object,
                                                                              off + k * entsize)
            end = code_object.index(b"\0", strtab + st_name)
            if code_object[strtab + st_name:end].decode() != symbol or shndx >= len(secs):
                continue
            _t, saddr, soff, _s, _l, _e = secs[shndx]
            at = soff + (value - saddr)
            kd = code_object[at:at + 64]
            group, private, kernarg = struct.unpack_from("<III", kd, 0)
            rsrc3, rsrc1, rsrc2, props = struct.unpack_from("<IIIH", kd, 44)
            return {"size": st_size, "group_segment_fixed_size": group, "private_segment_fixed_size": private,
                    "kernarg_size": kernarg, "compute_pgm_rsrc1": rsrc1, "compute_pgm_rsrc2": rsrc2,
                    "compute_pgm_rsrc3": rsrc3, "kernel_code_properties": props}
    return None
