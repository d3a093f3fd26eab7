"""tl.histogram on AMDGPU: per-program bins in LDS, counted with LDS atomics.

The bins are zeroed by the workgroup, each thread adds one to the bin of every element it owns
(in range, under the mask; a copy of an element held by several threads counts once) with
`atomicrmw add` on LDS (`ds_add_u32`, workgroup scope), and the counts are read back into the
result's canonical layout between barriers, as the NVIDIA backend does in shared memory.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ..llvm.scalar import I32, I64
from .convert import _index, lds_addr, lds_load, lds_store
from .tiles import WAVE, GPUTile, num_regs

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_histogram"]


def lower_histogram(lw: AmdLowering, op: Op) -> None:
    x_v = op.operands[0]
    mask_v = op.operands[1] if len(op.operands) > 1 else None
    nbins = T.shape_of(op.result.type)[0]
    xe = T.elem_of(x_v.type)
    assert isinstance(xe, T.ScalarType)
    x = lw.tile(x_v)
    mask = lw.tile(mask_v, x.layout) if mask_v is not None else None
    b = lw.b
    base = lw.lds(nbins * 4, op)
    threads = WAVE * lw.num_warps
    lw.barrier()  # an earlier user of the LDS area may still be reading it
    for start in range(0, nbins, threads):
        slot = b.add(lw.tid, ir.Constant(I32, start))
        zero = functools.partial(lds_store, lw, base, slot, ir.Constant(I32, 0), T.i32)
        lw.when(None if start + threads <= nbins else b.icmp_unsigned("<", slot, ir.Constant(I32, nbins)), zero)
    lw.barrier()
    owner = lw.owner(x.layout)
    for r in range(num_regs(x.layout)):
        v = x.regs[r]
        wide = v if v.type == I64 else (b.sext(v, I64) if xe.is_signed else b.zext(v, I64))
        ok = b.icmp_unsigned("<", wide, ir.Constant(I64, nbins))
        if mask is not None:
            ok = b.and_(ok, mask.regs[r])
        if owner is not None:
            ok = b.and_(ok, owner)
        lw.when(ok, functools.partial(_count, lw, base, b.trunc(wide, I32)))
    lw.barrier()
    dst = lw.canonical((nbins,))
    regs = [lds_load(lw, base, _index(lw, dst, r, (1,)), T.i32) for r in range(num_regs(dst))]
    lw.vals[op.result] = GPUTile(dst, regs)


def _count(lw: AmdLowering, base: ir.Value, slot: ir.Value) -> None:
    lw.b.atomic_rmw("add", lds_addr(lw, base, slot, I32), ir.Constant(I32, 1), "monotonic")
