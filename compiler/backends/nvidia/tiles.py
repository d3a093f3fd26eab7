"""The values of the NVIDIA lowering: a tile is one LLVM value per register of its linear layout,
held by every thread; the helpers that read a layout's registers; the LLVM types of Tile IR types
(global pointers in address space 1, shared in 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ir import types as T
from ...layouts import REGISTER, LinearLayout, fill_blocked
from ...passes.axis_info import AxisInfo
from ..llvm import scalar as S

__all__ = ["GPTR", "SPTR", "nv_type", "GPUTile", "SharedOperand", "blocked_for", "reg_coords", "num_regs",
           "constant_runs"]

GPTR = ir.PointerType(addrspace=1)
SPTR = ir.PointerType(addrspace=3)


def nv_type(t: T.Type) -> ir.Type:
    e = T.elem_of(t)
    if isinstance(e, T.PointerType):
        return GPTR
    return S.llvm_type(e)


@dataclass
class GPUTile:
    layout: LinearLayout
    regs: list[ir.Value]


@dataclass
class SharedOperand:
    """A tile that lives in shared memory in the layout its consumer (a wgmma dot) reads: the
    i32 shared address of its first byte (async_copy.py)."""

    addr: ir.Value


def blocked_for(shape: tuple[int, ...], vec: int, num_warps: int, fast: int = -1) -> LinearLayout:
    """The default blocked layout of a tile on 32-lane warps (layouts.fill_blocked): `vec`
    consecutive elements per thread along dim `fast` (default the last), lanes then warps filling
    the dims from that one, then from the last dim down; what is left over repeats along the
    slowest dim."""
    return fill_blocked(shape, vec, num_warps, 32, fast)


def reg_coords(layout: LinearLayout, r: int) -> tuple[int, ...]:
    out = [0] * len(layout.out_dims)
    for k, basis in enumerate(layout.bases(REGISTER)):
        if (r >> k) & 1:
            out = [a ^ b for a, b in zip(out, basis, strict=True)]
    return tuple(out)


def num_regs(layout: LinearLayout) -> int:
    return layout.in_dim_size(REGISTER)


def constant_runs(info: AxisInfo | None, layout: LinearLayout) -> list[int] | None:
    """For a tile whose values come in runs of equal values (axis info constancy), the register
    each register of `layout` can copy (the first of its run in this thread), or None when every
    register is its own. A run is aligned, so the lane and warp bits of a coordinate never move an
    element across a run boundary: registers whose coordinates agree above the run bits agree in
    every thread. A mask `cols < N` with N a multiple of 16 is computed once per 16 columns."""
    if info is None or len(info.constancy) != len(layout.out_dims) or all(k == 1 for k in info.constancy):
        return None
    shifts = [k.bit_length() - 1 for k in info.constancy]
    first: dict[tuple[int, ...], int] = {}
    out = [first.setdefault(tuple(c >> s for c, s in zip(reg_coords(layout, r), shifts, strict=True)), r)
           for r in range(num_regs(layout))]
    return None if len(first) == len(out) else out
