"""Scans (tl.cumsum, tl.cumprod, tl.associative_scan) within a program on AMDGPU, by recursive
doubling over the bits of the scanned coordinate.

In a layout where every basis that moves along the scanned axis moves along it alone, each bit
of the axis coordinate is held by one hardware bit: a register, lane or wave bit. Taking the bits
in increasing significance, every thread keeps, per register, the inclusive prefix of its
element within the segment of the axis scanned so far and that segment's total. Merging two
halves of a segment along bit k: the upper half (bit set) puts the lower half's total before
its prefix, and both halves take the merged total. A reverse scan is the mirror image: the lower
half puts the upper half's total first, as the sequential definition (the CPU backend's) folds
from the end, `acc = combine(acc, x[j])` for j going down. Partners are another register of the
same thread (register bits), lane (this lane XOR 2^k) by `ds_bpermute` (lane bits), or the same
lane of wave (this wave XOR 2^k) through LDS between barriers (wave bits). The combine region is
applied in the order of the elements along the axis, so an associative but not commutative scan
is right (tests/compiler/test_amd_scan.py runs `doubling` on every thread at once against a
sequential fold).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE
from ...layouts.scan import doubling, scan_bits
from ..llvm.scalar import I1, I8, I32
from .convert import elem_bytes, lds_addr, lds_load, lds_store
from .reduce import _combine, lane_xor
from .tiles import WAVE, GPUTile, num_regs

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_scan", "scan_bits", "doubling"]  # the last two from compiler/layouts/scan.py


def lower_scan(lw: AmdLowering, op: Op) -> None:
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    region = op.regions[0]
    layout = lw.tile(op.operands[0]).layout
    bits = scan_bits(layout, axis)
    if bits is None:  # the canonical blocked layout always qualifies
        layout = lw.canonical(layout.out_shape)
        bits = scan_bits(layout, axis)
        assert bits is not None
    xs = [lw.tile(v, layout) for v in op.operands]
    elems = [T.elem_of(v.type) for v in op.operands]
    b = lw.b

    def upper(dim: str, k: int) -> ir.Value:
        src = lw.lane if dim == LANE else lw.warp
        return b.trunc(b.and_(b.lshr(src, ir.Constant(I32, k)), ir.Constant(I32, 1)), I1)

    def exchange(dim: str, k: int, total: list[list[ir.Value]]) -> list[list[ir.Value]]:
        if dim == LANE:
            return [[lane_xor(lw, v, 1 << k) for v in regs] for regs in total]
        return _exchange_waves(lw, op, total, k, elems)

    prefix = doubling(bits, reverse, [[x.regs[r] for x in xs] for r in range(num_regs(layout))],
                      lambda a, c: _combine(lw, region, a, c), b.select, upper, exchange)
    for i, res in enumerate(op.results):
        lw.vals[res] = GPUTile(layout, [p[i] for p in prefix])


def _exchange_waves(lw: AmdLowering, op: Op, total: list[list[ir.Value]], k: int,
                    elems: list[T.ElemType]) -> list[list[ir.Value]]:
    """Each thread's segment totals as the same lane of wave (this wave XOR 2^k) holds them: every
    thread writes its registers to its own LDS slots, and after a barrier reads its partner's."""
    b = lw.b
    n = len(total)
    threads = WAVE * lw.num_warps
    offsets, off = [], 0
    for e in elems:
        off = -(-off // 8) * 8
        offsets.append(off)
        off += threads * n * elem_bytes(e)
    area = lw.lds(off, op)
    bases = [lds_addr(lw, area, ir.Constant(I32, o), I8) if o else area for o in offsets]
    me = lw.tid
    other = b.xor(lw.tid, ir.Constant(I32, WAVE << k))
    lw.barrier()  # earlier readers of the scratch area are done
    for r in range(n):
        # register-major slots: the threads of a wave write consecutive words (no bank conflicts)
        slot = b.add(me, ir.Constant(I32, r * threads)) if r else me
        for v, p, e in zip(total[r], bases, elems, strict=True):
            lds_store(lw, p, slot, v, e)
    lw.barrier()
    out = []
    for r in range(n):
        slot = b.add(other, ir.Constant(I32, r * threads)) if r else other
        out.append([lds_load(lw, p, slot, e) for p, e in zip(bases, elems, strict=True)])
    return out
