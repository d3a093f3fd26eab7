"""`tl.dot` on NVIDIA GPUs: the dispatcher (wgmma on Hopper, tcgen05 on datacenter Blackwell,
mma.sync on sm_80+, CUDA cores otherwise), batched (3-D) dots as one 2-D dot per batch, and the
CUDA-core path itself: operands staged in shared memory, each thread accumulating its own output
elements with FMAs. The CUDA-core path is correct for every dtype pair the language allows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ...layouts import REGISTER, LinearLayout, dim_names
from ..llvm import scalar as S
from ..llvm.scalar import I32
from .convert import linear_index, smem_load, smem_store
from .mma import MmaPlan, mma_tiles, plan_mma
from .tcgen05 import Tcgen05Plan, tcgen05_resident, tcgen05_tiles
from .tiles import GPUTile, SharedOperand, num_regs, nv_type, reg_coords
from .wgmma import WgmmaPlan, register_a_layout, wgmma_in_flight, wgmma_tiles, wgmma_wait

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_dot", "dot_layout"]


def dot_layout(lw: NvLowering, op: Op) -> LinearLayout:
    """The layout `op`'s result (and accumulator) lives in."""
    shape = T.shape_of(op.result.type)
    plan = plan_mma(lw, op)
    per_batch = plan.layout if plan is not None else lw.canonical(shape[-2:])
    return per_batch if len(shape) == 2 else with_batch(per_batch, shape[0])


def with_batch(layout: LinearLayout, nb: int) -> LinearLayout:
    """A 2-D layout extended by a leading batch dim held in registers: register r + n * b of the
    result is register r of `layout` for batch b (n = registers of `layout`)."""
    bases = {name: [(0, *b) for b in rows] for name, rows in layout.in_dims}
    bases[REGISTER] = bases.get(REGISTER, []) + [(1 << i, 0, 0) for i in range(nb.bit_length() - 1)]
    sizes = dict(zip(dim_names(3), (nb, *layout.out_shape), strict=True))
    return LinearLayout.from_bases(bases, sizes)


def lower_dot(lw: NvLowering, op: Op) -> None:
    a_v, b_v, acc_v = op.operands
    ashape, bshape = T.shape_of(a_v.type), T.shape_of(b_v.type)
    m, k = ashape[-2:]
    n = bshape[-1]
    oe = T.elem_of(op.result.type)
    ae, be = T.elem_of(a_v.type), T.elem_of(b_v.type)
    assert isinstance(oe, T.ScalarType) and isinstance(ae, T.ScalarType) and isinstance(be, T.ScalarType)
    plan = plan_mma(lw, op)
    layout = plan.layout if plan is not None else lw.canonical((m, n))
    if len(ashape) == 2:
        # A from registers when it is already in wgmma's fragment layout (a dot result, attention's
        # probabilities; or a loop-invariant tile converted before the loop): else it is staged
        a_layout = register_a_layout(plan, m, k) if isinstance(plan, WgmmaPlan) else None
        cur = lw.vals[a_v]
        if not (isinstance(cur, GPUTile) and cur.layout == a_layout):
            a_layout = None
        a = lw.staged_a.get(a_v)  # staged once before the loop (control.lower_for)
        if a is None:
            a = _operand(lw, a_v, a_layout)
        else:
            a_layout = None
        b = _operand(lw, b_v)
        first = lw.resident.get(op)
        if first is not None:  # the accumulator stays in tensor memory (control.lower_for reads it back)
            assert isinstance(plan, Tcgen05Plan) and isinstance(a, GPUTile) and isinstance(b, GPUTile)
            lw.vals[op.result] = tcgen05_resident(lw, plan, a, b, m, n, k, first)
            return

        if isinstance(plan, WgmmaPlan) and (a_layout is not None or not isinstance(a, GPUTile)) \
                and not isinstance(b, GPUTile):
            # no operand staged (B in a pipeline slot, A too or in registers): the wait is deferred
            # (NvLowering.defer) past the ops that follow and do not need the result, the next
            # iteration's copies among them
            issued = wgmma_tiles(lw, plan, a, b, lw.tile(acc_v, layout), m, n, k, oe, wait=False)
            if op.attrs.get("in_flight") and lw.in_flight:  # passes/pipeline.py: the result only feeds the next dot
                # with several 64-row slabs per warpgroup the assembler serializes a group in flight
                # ("non wgmma instructions defining accumulator registers"): those wait at once
                slabs = m // (64 * plan.warps[0])
                lw.vals[op.result] = wgmma_in_flight(lw, issued, 1 if slabs == 1 else 0)
                return
            lw.defer(op.result, lambda: wgmma_wait(lw, plan, issued, oe), issued if oe == plan.acc == T.fp32 else None)
            return
        lw.vals[op.result] = _dot_2d(lw, plan, a, b, lw.tile(acc_v, layout), m, n, k, ae, be, oe)
        return
    # Batched: every operand with the batch dim in registers, then one 2-D dot per batch.
    nb = ashape[0]
    la, lb = lw.canonical((m, k)), lw.canonical((k, n))
    a3, b3 = lw.tile(a_v, with_batch(la, nb)), lw.tile(b_v, with_batch(lb, nb))
    acc3 = lw.tile(acc_v, with_batch(layout, nb))
    na, nbr, nc = num_regs(la), num_regs(lb), num_regs(layout)
    out: list[ir.Value] = []
    for i in range(nb):
        r = _dot_2d(lw, plan, GPUTile(la, a3.regs[i * na:(i + 1) * na]), GPUTile(lb, b3.regs[i * nbr:(i + 1) * nbr]),
                    GPUTile(layout, acc3.regs[i * nc:(i + 1) * nc]), m, n, k, ae, be, oe)
        assert r.layout == layout
        out += r.regs
    lw.vals[op.result] = GPUTile(with_batch(layout, nb), out)


def wgmma_plan_2d(lw: NvLowering, op: Op) -> Any:
    """The wgmma plan of a 2-D dot, or None (another instruction, or batched)."""
    if len(T.shape_of(op.result.type)) != 2:
        return None
    plan = plan_mma(lw, op)
    return plan if isinstance(plan, WgmmaPlan) else None


def _operand(lw: NvLowering, v: Value, layout: LinearLayout | None = None) -> GPUTile | ir.Value:
    """A dot operand: its register tile (in `layout` if given: wgmma's register A), or the
    shared-memory address of a pipelined copy."""
    x = lw.vals[v]
    return x.addr if isinstance(x, SharedOperand) else lw.tile(v, layout)


def _dot_2d(lw: NvLowering, plan: Any, a: GPUTile | ir.Value, b_: GPUTile | ir.Value, acc: GPUTile, m: int, n: int,
            k: int, ae: T.ScalarType, be: T.ScalarType, oe: T.ScalarType) -> GPUTile:
    if isinstance(plan, WgmmaPlan):
        return wgmma_tiles(lw, plan, a, b_, acc, m, n, k, oe)
    assert isinstance(a, GPUTile) and isinstance(b_, GPUTile), "shared-memory operands are for wgmma"
    if isinstance(plan, Tcgen05Plan):
        return tcgen05_tiles(lw, plan, a, b_, acc, m, n, k, oe)
    if isinstance(plan, MmaPlan):
        return mma_tiles(lw, plan, a, b_, acc, m, n, k, oe)
    return fma_tiles(lw, a, b_, acc, m, n, k, ae, be, oe)


def fma_tiles(lw: NvLowering, a: GPUTile, b_: GPUTile, acc: GPUTile, m: int, n: int, k: int, a_elem: T.ScalarType,
              b_elem: T.ScalarType, oe: T.ScalarType) -> GPUTile:
    """acc + a @ b on CUDA cores; acc and the result in the canonical [m, n] layout."""
    ce = T.fp32 if (oe.is_float and oe.bits < 32) else oe  # accumulate fp16/bf16 outputs in fp32
    cty = nv_type(ce)
    layout = acc.layout
    b = lw.b
    size = max(1, ce.bits // 8)
    base = lw.scratch((m * k + k * n) * size)
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
    return GPUTile(layout, [S.emit_cast(b, ce, oe, v) for v in new])


