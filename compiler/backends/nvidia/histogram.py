"""tl.histogram on NVIDIA GPUs: per-program bins in shared memory.

Phases, separated by barriers: zero the bins (thread t clears bins t, t + T, ...), count (the
owning copy of each element does one shared-memory atomic add when its value is in
[0, num_bins) and its mask is set), then read the bins back in the result's layout.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ..llvm.scalar import I32, I64
from .convert import linear_index, smem_load, smem_store
from .ownership import owned_registers, owner_predicate
from .tiles import GPUTile, num_regs

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_histogram"]


def lower_histogram(lw: NvLowering, op: Op) -> None:
    x_v = op.operands[0]
    mask_v = op.operands[1] if len(op.operands) > 1 else None
    nbins = T.shape_of(op.result.type)[0]
    xe = T.elem_of(x_v.type)
    assert isinstance(xe, T.ScalarType)
    x = lw.tile(x_v)
    mask = lw.tile(mask_v, x.layout) if mask_v is not None else None
    b = lw.b
    base = lw.scratch(nbins * 4)
    threads = 32 * lw.num_warps
    lw.barrier()  # an earlier user of the scratch area may still be reading it
    for start in range(0, nbins, threads):
        slot = b.add(lw.tid, ir.Constant(I32, start))
        if start + threads <= nbins:
            smem_store(lw, base, slot, ir.Constant(I32, 0))
        else:
            lw.when(b.icmp_unsigned("<", slot, ir.Constant(I32, nbins)),
                functools.partial(smem_store, lw, base, slot, ir.Constant(I32, 0)))
    lw.barrier()
    owner = owner_predicate(lw, x.layout)
    bins = b.bitcast(base, ir.PointerType(I32, addrspace=3))
    for r in owned_registers(x.layout):
        v = x.regs[r]
        wide = v if v.type == I64 else (b.sext(v, I64) if xe.is_signed else b.zext(v, I64))
        ok = b.icmp_unsigned("<", wide, ir.Constant(I64, nbins))
        if mask is not None:
            ok = b.and_(ok, mask.regs[r])
        if owner is not None:
            ok = b.and_(ok, owner)

        lw.when(ok, functools.partial(_count, lw, bins, wide))
    lw.barrier()
    dst = lw.layout(op.result)
    regs = [smem_load(lw, base, linear_index(lw, dst, r, (nbins,)), I32) for r in range(num_regs(dst))]
    lw.vals[op.result] = GPUTile(dst, regs)


def _count(lw: NvLowering, bins: ir.Value, value: ir.Value) -> None:
    lw.b.atomic_rmw("add", lw.b.gep(bins, [value]), ir.Constant(I32, 1), "monotonic")
