"""`tl.dot` on CUDA cores: operands staged in shared memory, each thread accumulating its own
output elements with FMAs. Correct for every dtype pair the language allows; tensor cores
(mma.sync / wgmma) replace it per architecture."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ..cpu import scalar as S
from ..cpu.scalar import I32, I64
from .convert import linear_index, smem_load, smem_store
from .lower import GPUTile, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_dot"]


def lower_dot(lw: NvLowering, op: Op) -> None:
    from .mma import lower_dot_mma, plan_mma
    from .wgmma import WgmmaPlan, lower_dot_wgmma

    plan = plan_mma(lw, op)
    if isinstance(plan, WgmmaPlan):
        return lower_dot_wgmma(lw, op, plan)
    if plan is not None:
        return lower_dot_mma(lw, op, plan)
    a_v, b_v, acc_v = op.operands
    ashape, bshape = T.shape_of(a_v.type), T.shape_of(b_v.type)
    if len(ashape) != 2:
        raise UnsupportedError("3-D (batched) tl.dot is not supported by the NVIDIA backend yet", op.loc,
                               hint="loop over the batch dimension, or run on CPU tensors")
    (m, k), n = ashape, bshape[1]
    out_t = op.result.type
    assert isinstance(out_t, T.TileType)
    oe = out_t.elem
    assert isinstance(oe, T.ScalarType)
    ce = T.fp32 if (oe.is_float and oe.bits < 32) else oe  # accumulate fp16/bf16 outputs in fp32
    cty = nv_type(ce)
    layout = lw.canonical((m, n))
    acc = lw.tile(acc_v, layout)
    a, b_ = lw.tile(a_v), lw.tile(b_v)
    b = lw.b
    size = max(1, ce.bits // 8)
    base = lw.scratch((m * k + k * n) * size)
    a_elem, b_elem = T.elem_of(a_v.type), T.elem_of(b_v.type)
    lw.barrier()
    for r, v in enumerate(a.regs):
        smem_store(lw, base, linear_index(lw, a.layout, r, (m, k)), S.emit_cast(b, a_elem, ce, v))
    off = ir.Constant(I32, m * k)
    for r, v in enumerate(b_.regs):
        smem_store(lw, base, b.add(off, linear_index(lw, b_.layout, r, (k, n))), S.emit_cast(b, b_elem, ce, v))
    lw.barrier()
    hw = lw.hw_coords(layout)
    rows, cols = [], []
    for r in range(num_regs(layout)):
        rc = reg_coords(layout, r)
        rows.append(b.mul(b.or_(hw[0], ir.Constant(I32, rc[0])), ir.Constant(I32, k)))
        cols.append(b.add(off, b.or_(hw[1], ir.Constant(I32, rc[1]))))
    init = [S.emit_cast(b, oe, ce, v) for v in acc.regs]
    pre = b.block
    loop_bb, end_bb = b.append_basic_block("dot"), b.append_basic_block("dot.end")
    b.branch(loop_bb)
    b.position_at_end(loop_bb)
    kk = b.phi(I32)
    kk.add_incoming(ir.Constant(I32, 0), pre)
    phis = []
    for v in init:
        p = b.phi(cty)
        p.add_incoming(v, pre)
        phis.append(p)
    krow = b.mul(kk, ir.Constant(I32, n))
    new = []
    fma = None
    if ce.is_float:
        name = f"llvm.fma.{'f64' if ce == T.fp64 else 'f32'}"
        fma = lw.m.globals.get(name) or ir.Function(lw.m, ir.FunctionType(cty, [cty] * 3), name)
    for p, row, col in zip(phis, rows, cols, strict=True):
        x = smem_load(lw, base, b.add(row, kk), cty)
        y = smem_load(lw, base, b.add(col, krow), cty)
        new.append(b.call(fma, [x, y, p]) if fma is not None else b.add(b.mul(x, y), p))
    nxt = b.add(kk, ir.Constant(I32, 1))
    latch = b.block
    kk.add_incoming(nxt, latch)
    for p, v in zip(phis, new, strict=True):
        p.add_incoming(v, latch)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, k)), loop_bb, end_bb)
    b.position_at_end(end_bb)
    lw.barrier()
    lw.vals[op.result] = GPUTile(layout, [S.emit_cast(b, ce, oe, v) for v in new])


_ = I64
