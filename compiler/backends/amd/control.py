"""Structured control flow on AMDGPU: every register of a carried tile is one phi.

Branch conditions of `for`, `if` and `while` are uniform scalars (the same in every thread of the
program), so the whole workgroup takes the same path and barriers inside regions stay legal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ..llvm.scalar import loop_continues
from .tiles import GPUTile, amd_type

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_for", "lower_if", "lower_while"]


def _flat(lw: AmdLowering, v: Value, like: Any) -> list[ir.Value]:
    """The registers of `v` in the layout of `like` (a GPUTile) or as one scalar."""
    if isinstance(like, GPUTile):
        return list(lw.tile(v, like.layout).regs)
    return [lw.scalar(v)]


def _like(lw: AmdLowering, v: Value) -> Any:
    return lw.tile(v, lw.prefer.get(v)) if isinstance(v.type, T.TileType) else lw.scalar(v)


def _head_phis(lw: AmdLowering, args: list[Value], like: list[Any], init: list[list[ir.Value]],
               pre: ir.Block) -> list[list[ir.PhiInstr]]:
    phis: list[list[ir.PhiInstr]] = []
    for arg, x, regs in zip(args, like, init, strict=True):
        ps = []
        for r in regs:
            p = lw.b.phi(r.type)
            p.add_incoming(r, pre)
            ps.append(p)
        phis.append(ps)
        lw.vals[arg] = GPUTile(x.layout, list(ps)) if isinstance(x, GPUTile) else ps[0]
    return phis


def _merge(lw: AmdLowering, like: list[Any], incoming: list[list[list[ir.Value]]], blocks: list[ir.Block]) -> list[Any]:
    out = []
    for k, x in enumerate(like):
        regs = []
        for i in range(len(incoming[0][k])):
            p = lw.b.phi(incoming[0][k][i].type)
            for vals, blk in zip(incoming, blocks, strict=True):
                p.add_incoming(vals[k][i], blk)
            regs.append(p)
        out.append(GPUTile(x.layout, regs) if isinstance(x, GPUTile) else regs[0])
    return out


def lower_for(lw: AmdLowering, op: Op) -> None:
    b = lw.b
    lb, ub, step = (lw.scalar(v) for v in op.operands[:3])
    body = op.regions[0]
    ity = body.args[0].type
    assert isinstance(ity, T.ScalarType)
    like = [_like(lw, v) for v in op.operands[3:]]
    init = [list(x.regs) if isinstance(x, GPUTile) else [x] for x in like]
    sign = op.attrs.get("step_sign", 0)
    pre = b.block
    body_bb, exit_bb = b.append_basic_block("for"), b.append_basic_block("for.end")
    b.cbranch(loop_continues(b, ity, sign, lb, ub, step), body_bb, exit_bb)
    b.position_at_end(body_bb)
    iv = b.phi(amd_type(ity))
    iv.add_incoming(lb, pre)
    lw.vals[body.args[0]] = iv
    phis = _head_phis(lw, body.args[1:], like, init, pre)
    lw.lower_block(body)
    new = [_flat(lw, y, x) for y, x in zip(body.ops[-1].operands, like, strict=True)]
    nxt = b.add(iv, step)
    latch = b.block
    iv.add_incoming(nxt, latch)
    for ps, regs in zip(phis, new, strict=True):
        for p, r in zip(ps, regs, strict=True):
            p.add_incoming(r, latch)
    b.cbranch(loop_continues(b, ity, sign, nxt, ub, step), body_bb, exit_bb)
    b.position_at_end(exit_bb)
    for r, v in zip(op.results, _merge(lw, like, [init, new], [pre, latch]), strict=True):
        lw.vals[r] = v


def lower_if(lw: AmdLowering, op: Op) -> None:
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
        ys = list(region.ops[-1].operands) if region.ops else []
        if not likes:
            likes = [_like(lw, y) for y in ys]
        outs.append([_flat(lw, y, x) for y, x in zip(ys, likes, strict=True)])
        blocks.append(b.block)
        b.branch(merge_bb)
    b.position_at_end(merge_bb)
    for r, v in zip(op.results, _merge(lw, likes, outs, blocks), strict=True):
        lw.vals[r] = v


def lower_while(lw: AmdLowering, op: Op) -> None:
    b = lw.b
    before, after = op.regions
    like = [_like(lw, v) for v in op.operands]
    init = [list(x.regs) if isinstance(x, GPUTile) else [x] for x in like]
    pre = b.block
    head_bb, body_bb, exit_bb = (b.append_basic_block(n) for n in ("while", "while.body", "while.end"))
    b.branch(head_bb)
    b.position_at_end(head_bb)
    phis = _head_phis(lw, before.args, like, init, pre)
    lw.lower_block(before)
    cond_op = before.ops[-1]
    cond = lw.scalar(cond_op.operands[0])
    fwd = [_like(lw, v) for v in cond_op.operands[1:]]
    b.cbranch(cond, body_bb, exit_bb)
    b.position_at_end(body_bb)
    for arg, x in zip(after.args, fwd, strict=True):
        lw.vals[arg] = x
    lw.lower_block(after)
    new = [_flat(lw, y, x) for y, x in zip(after.ops[-1].operands, like, strict=True)]
    latch = b.block
    for ps, regs in zip(phis, new, strict=True):
        for p, r in zip(ps, regs, strict=True):
            p.add_incoming(r, latch)
    b.branch(head_bb)
    b.position_at_end(exit_bb)
    for r, x in zip(op.results, fwd, strict=True):
        lw.vals[r] = x
