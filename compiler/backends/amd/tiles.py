"""The values of the AMD lowering: a tile is one LLVM value per register of its linear layout,
held by every thread of the workgroup (wave64); the helpers that read a layout's registers; the
LLVM types of Tile IR types (global pointers in address space 1, LDS in 3); the error for an op
this backend does not lower.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Location, Op
from ...layouts import REGISTER, LinearLayout
from ..llvm import scalar as S

__all__ = ["GPUTile", "GPTR", "LPTR", "CPTR", "WAVE", "LDS_SYMBOL", "LDS_LIMIT", "amd_type", "num_regs",
           "reg_coords", "unsupported"]

WAVE = 64  # lanes of a wavefront on gfx9 (CDNA): gfx942 and gfx950 run wave64 only
GPTR = ir.PointerType(addrspace=1)  # global memory
LPTR = ir.PointerType(addrspace=3)  # LDS
CPTR = ir.PointerType(addrspace=4)  # constant memory (the implicit kernel arguments)
LDS_SYMBOL = "__anvil_lds"
LDS_LIMIT = 64 * 1024  # LDS one workgroup may allocate on gfx942 (gfx950 has 160 KiB; the slice keeps to 64)


def amd_type(t: T.Type) -> ir.Type:
    e = T.elem_of(t)
    if isinstance(e, T.PointerType):
        return GPTR
    return S.llvm_type(e)


@dataclass
class GPUTile:
    layout: LinearLayout
    regs: list[ir.Value]


def reg_coords(layout: LinearLayout, r: int) -> tuple[int, ...]:
    """The coordinates register `r` holds in lane 0 of wave 0 (a thread's own coordinates XOR them)."""
    return tuple(layout.apply({REGISTER: r}))


def num_regs(layout: LinearLayout) -> int:
    return layout.in_dim_size(REGISTER)


def unsupported(what: str, op: Op | None, arch: str, hint: str = "") -> UnsupportedError:
    """The error for an op this backend does not lower: names the op, its source line and the target."""
    loc: Location | None = op.loc if op is not None else None
    line = linecache.getline(loc.file, loc.line) if loc is not None and loc.line > 0 else ""
    return UnsupportedError(f"{what} is not supported by the AMD backend for amd:{arch} yet", loc, line,
                            hint or "compile for 'cpu' or a 'cuda' target, which support it")
