"""Operand staging for tensor-core dots: a 2-D register tile written into shared memory in the
layout the MMA reads (padded rows for ldmatrix, swizzled atoms for wgmma descriptors), as
16-byte vectors wherever a thread holds consecutive elements along the fast dimension."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from llvmlite import ir

from ...layouts import REGISTER, LinearLayout
from ..llvm.scalar import I8, I32
from .tiles import GPUTile, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["stage", "runs", "Offset"]

Offset = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]
"""(builder, row i, column j) -> byte offset of element (i, j) in the staged operand."""


def stage(lw: NvLowering, tile: GPUTile, base: ir.Value, byte_off: int, offset_of: Offset, fast_dim: int,
          bits: int) -> None:
    """Store a 2-D register tile of `bits`-bit elements at `base + byte_off + offset_of(i, j)`
    (bytes), in vectors of up to 16 bytes where the thread holds consecutive elements along
    `fast_dim`. fp32 elements are rounded to tf32 on the way."""
    b = lw.b
    layout = tile.layout
    vec = 1
    for basis in layout.bases(REGISTER):
        want = tuple(vec if d == fast_dim else 0 for d in range(2))
        if basis != want or vec * bits >= 128:
            break
        vec *= 2
    ity = ir.IntType(bits)
    esize = bits // 8
    p8 = b.bitcast(base, ir.PointerType(I8, addrspace=3))
    for r0, i, j in runs(lw, layout, vec):
        off = b.add(offset_of(b, i, j), ir.Constant(I32, byte_off))
        ptr = b.gep(p8, [off])
        vals = [_bits(lw, tile.regs[r0 + t], ity) for t in range(vec)]
        if vec == 1:
            st = b.store(vals[0], b.bitcast(ptr, ir.PointerType(ity, addrspace=3)))
            st.align = esize
            continue
        vty = ir.VectorType(ity, vec)
        v: ir.Value = ir.Constant(vty, None)
        for t, x in enumerate(vals):
            v = b.insert_element(v, x, ir.Constant(I32, t))
        st = b.store(v, b.bitcast(ptr, ir.PointerType(vty, addrspace=3)))
        st.align = esize * vec


def runs(lw: NvLowering, layout: LinearLayout, vec: int) -> Iterator[tuple[int, ir.Value, ir.Value]]:
    """(first register, row, column) of each run of `vec` registers of a 2-D tile this thread holds,
    once per distinct element (registers that repeat another's element are skipped)."""
    b = lw.b
    hw = lw.hw_coords(layout)
    seen: set[tuple[int, ...]] = set()
    for r0 in range(0, num_regs(layout), vec):
        rc = reg_coords(layout, r0)
        if rc in seen:
            continue
        seen.add(rc)
        i = b.or_(hw[0], ir.Constant(I32, rc[0])) if rc[0] else hw[0]
        j = b.or_(hw[1], ir.Constant(I32, rc[1])) if rc[1] else hw[1]
        yield r0, i, j


def _bits(lw: NvLowering, v: ir.Value, ity: ir.IntType) -> ir.Value:
    if v.type == ity:
        return v
    if isinstance(v.type, ir.FloatType):  # fp32 -> tf32, rounded to nearest
        return lw.intrinsic("llvm.nvvm.f2tf32.rna", I32, [v])
    return lw.b.bitcast(v, ity)
