"""Scans on NVIDIA GPUs by recursive doubling over the bits of the scanned coordinate.

Each bit of the axis coordinate is held by one hardware bit (a register, lane or warp bit); the
doubling itself (compiler/layouts/scan.py, shared with the AMD backend) merges halves in
increasing significance. Partners are found within a thread for register bits, by shuffles for
lane bits, through shared memory for warp bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE, REGISTER, WARP
from ...layouts.scan import doubling
from ..llvm.scalar import I1, I32
from .convert import smem_load, smem_store
from .reduce import _byte_offset, _combine, _shfl_xor
from .tiles import GPUTile, num_regs, nv_type

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_scan"]


def lower_scan(lw: NvLowering, op: Op) -> None:
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    region = op.regions[0]
    first = lw.tile(op.operands[0])
    layout = first.layout
    xs = [lw.tile(v, layout) for v in op.operands]
    elems = [T.elem_of(v.type) for v in op.operands]
    n = num_regs(layout)
    regs = [[x.regs[r] for x in xs] for r in range(n)]
    bits = []
    for dim in (REGISTER, LANE, WARP):
        for k, basis in enumerate(layout.bases(dim)):
            if basis[axis]:
                bits.append((basis[axis], dim, k))
    b = lw.b

    def upper(dim: str, k: int) -> ir.Value:
        src = lw.lane if dim == LANE else lw.warp
        return b.trunc(b.and_(b.lshr(src, ir.Constant(I32, k)), ir.Constant(I32, 1)), I1)

    def exchange(dim: str, k: int, total: list[list[ir.Value]]) -> list[list[ir.Value]]:
        if dim == LANE:
            return [[_shfl_xor(lw, v, 1 << k) for v in regs] for regs in total]
        return _exchange_warps(lw, total, k, elems)

    prefix = doubling(sorted(bits), reverse, regs, lambda a, c: _combine(lw, region, a, c), b.select, upper,
                      exchange)
    for i, res in enumerate(op.results):
        lw.vals[res] = GPUTile(layout, [prefix[r][i] for r in range(n)])


def _exchange_warps(lw: NvLowering, total: list[list[ir.Value]], k: int,
                    elems: list[T.ElemType]) -> list[list[ir.Value]]:
    """Each thread's segment totals as held by the same lane of warp ^ (1 << k)."""
    b = lw.b
    n = len(total)
    threads = 32 * lw.num_warps
    sizes = [8 if isinstance(e, T.PointerType) else max(1, e.bits // 8) for e in elems]
    offsets, off = [], 0
    for s in sizes:
        offsets.append(off)
        off += threads * n * s
    base = lw.scratch(off)
    me = b.add(b.mul(lw.warp, ir.Constant(I32, 32)), lw.lane)
    other = b.add(b.mul(b.xor(lw.warp, ir.Constant(I32, 1 << k)), ir.Constant(I32, 32)), lw.lane)
    lw.barrier()
    for r in range(n):
        for v, o, _e in zip(total[r], offsets, elems, strict=True):
            slot = b.add(b.mul(me, ir.Constant(I32, n)), ir.Constant(I32, r))
            smem_store(lw, _byte_offset(lw, base, o), slot, v)
    lw.barrier()
    out = []
    for r in range(n):
        slot = b.add(b.mul(other, ir.Constant(I32, n)), ir.Constant(I32, r))
        out.append([smem_load(lw, _byte_offset(lw, base, o), slot, nv_type(e))
                    for o, e in zip(offsets, elems, strict=True)])
    return out
