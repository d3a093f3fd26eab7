"""Structured control flow on NVIDIA GPUs: every register of a carried tile is one phi.

Branch conditions are uniform scalars, so all threads of a program take the same path and
barriers inside regions stay legal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ... import knobs
from ...ir import types as T
from ...ir.core import Op, Value
from ..llvm.scalar import loop_continues
from ..nvidia_targets import nv_target
from .dot import wgmma_plan_2d
from .mma import plan_mma
from .tcgen05 import Tcgen05Plan, read_acc, resident_accumulators
from .tiles import GPUTile, nv_type
from .wgmma import stage_invariant_a, wait_tiles

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_for", "lower_if", "lower_while"]


def _flat(lw: NvLowering, v: Value, like: Any) -> list[ir.Value]:
    """The registers of `v` in the layout of `like` (a GPUTile) or as one scalar."""
    if isinstance(like, GPUTile):
        return list(lw.tile(v, like.layout).regs)
    return [lw.scalar(v)]


def _phis(lw: NvLowering, like: list[Any], incoming: list[list[ir.Value]], blocks: list[ir.Block]) -> list[Any]:
    out = []
    for k, x in enumerate(like):
        regs = []
        n = len(incoming[0][k]) if isinstance(incoming[0][k], list) else 1
        for i in range(n):
            first = incoming[0][k][i]
            p = lw.b.phi(first.type)
            for vals, blk in zip(incoming, blocks, strict=True):
                p.add_incoming(vals[k][i], blk)
            regs.append(p)
        out.append(GPUTile(x.layout, regs) if isinstance(x, GPUTile) else regs[0])
    return out


def _stage_invariant_operands(lw: NvLowering, body: Any) -> list[Value]:
    """Loop-invariant A operands of wgmma dots in the body (attention's q), staged once before the
    loop into shared memory held while it runs, instead of in every iteration (measured on the
    H200: faster than holding A in registers, which also spills at 128x128 attention tiles).
    Returns the values staged (lw.staged_a), which the caller drops after the loop."""
    inside = {id(o) for o in body.walk()}
    staged: list[Value] = []
    for op in body.ops:
        if op.opcode != "dot":
            continue
        a_v = op.operands[0]
        plan = wgmma_plan_2d(lw, op)
        if a_v.op is None or id(a_v.op) in inside or not isinstance(lw.vals.get(a_v), GPUTile) \
                or a_v in lw.staged_a or plan is None:
            continue
        m, k = T.shape_of(a_v.type)
        n = T.shape_of(op.result.type)[1]
        lw.staged_a[a_v] = stage_invariant_a(lw, plan, lw.tile(a_v), m, n, k)
        staged.append(a_v)
    return staged


def lower_for(lw: NvLowering, op: Op) -> None:
    b = lw.b
    lb, ub, step = (lw.scalar(v) for v in op.operands[:3])
    inits = op.operands[3:]
    body = op.regions[0]
    floor = lw.scratch_floor
    staged = _stage_invariant_operands(lw, body)
    ity = body.args[0].type
    assert isinstance(ity, T.ScalarType)
    like: list[Any] = [lw.tile(v, lw.layout(a)) if isinstance(v.type, T.TileType) else lw.scalar(v)
                       for a, v in zip(body.args[1:], inits, strict=True)]
    init_regs = [list(x.regs) if isinstance(x, GPUTile) else [x] for x in like]
    sign = op.attrs.get("step_sign", 0)
    pre = b.block
    body_bb, exit_bb = b.append_basic_block("for"), b.append_basic_block("for.end")
    b.cbranch(loop_continues(b, ity, sign, lb, ub, step), body_bb, exit_bb)
    b.position_at_end(body_bb)
    iv = b.phi(nv_type(ity))
    iv.add_incoming(lb, pre)
    phis: list[list[ir.PhiInstr]] = []
    for arg, x, regs in zip(body.args[1:], like, init_regs, strict=True):
        ps = []
        for r in regs:
            p = b.phi(r.type)
            p.add_incoming(r, pre)
            ps.append(p)
        phis.append(ps)
        lw.vals[arg] = GPUTile(x.layout, list(ps)) if isinstance(x, GPUTile) else ps[0]
    lw.vals[body.args[0]] = iv
    resident = resident_accumulators(lw, op, plan_mma)  # accumulators kept in tensor memory: read back on exit
    if resident:
        first = b.icmp_unsigned("==", iv, lb)
        for d in resident.values():
            lw.resident[d] = first
    carry = _carriable(lw, body, like)
    outer = lw.carry
    lw.carry = {body.ops[-1].operands[k]: like[k].layout for k in carry}
    for k in carry:  # arrives from the previous iteration possibly in flight
        lw.inflight[body.args[1 + k]] = None
    lw.loop_depth += 1
    lw.lower_block(body)
    lw.loop_depth -= 1
    lw.carry = outer
    for d in resident.values():
        del lw.resident[d]
    ys = body.ops[-1].operands
    carried = [k for k in carry if ys[k] in lw.inflight]
    for k in carry:
        lw.inflight.pop(ys[k], None)
        lw.inflight.pop(body.args[1 + k], None)
    new = [_flat(lw, y, x) for y, x in zip(ys, like, strict=True)]
    nxt = b.add(iv, step)
    latch = b.block
    iv.add_incoming(nxt, latch)
    for ps, regs in zip(phis, new, strict=True):
        for p, r in zip(ps, regs, strict=True):
            p.add_incoming(r, latch)
    last = new
    # the pipeline's in-flight dots leave their last group running too (async_drain completes it)
    pipelined = [k for k, y in enumerate(ys) if k not in carried and lw.in_flight and y.op is not None
                 and y.op.opcode == "dot" and y.op.attrs.get("in_flight") and isinstance(like[k], GPUTile)]
    if carried or pipelined:
        # the last iteration's groups complete on the way out, before the exit merges them with
        # the initial values: the assembler then sees no other definition of their registers
        # while they are in flight (on the path of a loop that never ran, the initial values'
        # moves would otherwise sit inside the group's span, and it serializes every wgmma)
        drain_bb = b.append_basic_block("for.drain")
        b.cbranch(loop_continues(b, ity, sign, nxt, ub, step), body_bb, drain_bb)
        b.position_at_end(drain_bb)
        waited = carried + pipelined
        done = dict(zip(waited, wait_tiles(lw, [new[k] for k in waited], 0), strict=True))
        lw.complete.update(op.results[k] for k in pipelined)
        last = [done.get(k, regs) for k, regs in enumerate(new)]
        latch = drain_bb
        b.branch(exit_bb)
    elif resident:
        # after the last iteration (whose MMAs every thread waited for), D comes out of tensor
        # memory once; a loop that never ran leaves the initial zeros
        read_bb = b.append_basic_block("for.tmem")
        b.cbranch(loop_continues(b, ity, sign, nxt, ub, step), body_bb, read_bb)
        b.position_at_end(read_bb)
        last = list(new)
        for kk, d in resident.items():
            plan = plan_mma(lw, d)
            assert isinstance(plan, Tcgen05Plan) and like[kk].layout == plan.layout
            last[kk] = read_acc(lw, plan, T.shape_of(d.result.type)[1])
        latch = b.block
        b.branch(exit_bb)
    else:
        b.cbranch(loop_continues(b, ity, sign, nxt, ub, step), body_bb, exit_bb)
    b.position_at_end(exit_bb)
    res = _phis(lw, like, [init_regs, last], [pre, latch])
    for r, v in zip(op.results, res, strict=True):
        lw.vals[r] = v
    for a_v in staged:  # the loop was their only reader
        del lw.staged_a[a_v]
    if staged:
        lw.scratch_floor = min(lw.scratch_floor, floor)


def _carriable(lw: NvLowering, body: Any, like: list[Any]) -> list[int]:
    """Indices of the carried values a wgmma group may produce unwaited at the end of an iteration
    (lower_block decides when it comes to the yield): fp32 results of a dot in the body that
    nothing but the yield reads and that the pipeline pass does not already keep in flight. The
    next iteration completes the group with its first wgmma wait (attention's p @ v runs during
    the next q k^T), or before it reads the value or refills a pipeline slot."""
    if not (lw.in_flight and knobs.pipeline_in_flight() and knobs.wgmma() and nv_target(lw.arch).wgmma):
        return []
    ys = body.ops[-1].operands
    used: dict[Value, int] = {}
    for o in body.walk():
        for v in o.operands:
            used[v] = used.get(v, 0) + 1
    out = []
    for k, y in enumerate(ys):
        d = y.op
        if d is None or d.opcode != "dot" or d.attrs.get("in_flight") or used.get(y) != 1 \
                or not isinstance(like[k], GPUTile) or T.elem_of(y.type) != T.fp32 or len(T.shape_of(y.type)) != 2 \
                or not any(o is d for o in body.ops):
            continue
        out.append(k)
    return out


def lower_if(lw: NvLowering, op: Op) -> None:
    b = lw.b
    cond = lw.scalar(op.operands[0])
    then_bb, else_bb, merge_bb = (b.append_basic_block(n) for n in ("then", "else", "endif"))
    b.cbranch(cond, then_bb, else_bb)
    outs: list[list[list[ir.Value]]] = []
    blocks = []
    likes: list[Any] = []
    for region, bb in zip(op.regions, (then_bb, else_bb), strict=True):
        b.position_at_end(bb)
        lw.lower_block(region)
        ys = list(region.ops[-1].operands)
        if not likes:
            likes = [lw.tile(y) if isinstance(y.type, T.TileType) else lw.scalar(y) for y in ys]
        outs.append([_flat(lw, y, x) for y, x in zip(ys, likes, strict=True)])
        blocks.append(b.block)
        b.branch(merge_bb)
    b.position_at_end(merge_bb)
    for r, v in zip(op.results, _phis(lw, likes, outs, blocks), strict=True):
        lw.vals[r] = v


def lower_while(lw: NvLowering, op: Op) -> None:
    b = lw.b
    before, after = op.regions
    like = [lw.tile(v) if isinstance(v.type, T.TileType) else lw.scalar(v) for v in op.operands]
    init_regs = [list(x.regs) if isinstance(x, GPUTile) else [x] for x in like]
    pre = b.block
    head_bb, body_bb, exit_bb = (b.append_basic_block(n) for n in ("while", "while.body", "while.end"))
    b.branch(head_bb)
    b.position_at_end(head_bb)
    phis: list[list[ir.PhiInstr]] = []
    for arg, x, regs in zip(before.args, like, init_regs, strict=True):
        ps = []
        for r in regs:
            p = b.phi(r.type)
            p.add_incoming(r, pre)
            ps.append(p)
        phis.append(ps)
        lw.vals[arg] = GPUTile(x.layout, list(ps)) if isinstance(x, GPUTile) else ps[0]
    lw.loop_depth += 1
    lw.lower_block(before)
    cond_op = before.ops[-1]
    cond = lw.scalar(cond_op.operands[0])
    fwd = [lw.tile(v) if isinstance(v.type, T.TileType) else lw.scalar(v) for v in cond_op.operands[1:]]
    b.cbranch(cond, body_bb, exit_bb)
    b.position_at_end(body_bb)
    for arg, x in zip(after.args, fwd, strict=True):
        lw.vals[arg] = x
    lw.lower_block(after)
    lw.loop_depth -= 1
    new = [_flat(lw, y, x) for y, x in zip(after.ops[-1].operands, like, strict=True)]
    latch = b.block
    for ps, regs in zip(phis, new, strict=True):
        for p, r in zip(ps, regs, strict=True):
            p.add_incoming(r, latch)
    b.branch(head_bb)
    b.position_at_end(exit_bb)
    for r, x in zip(op.results, fwd, strict=True):
        lw.vals[r] = x
