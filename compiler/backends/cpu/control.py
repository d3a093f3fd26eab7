"""Structured control flow (for / if / while) on the CPU: scalars in phis, tiles in buffers."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Op, Value
from ...ir.ops import MOVEMENT
from ..llvm import scalar as S
from ..llvm.scalar import llvm_type
from . import waits

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .lower import Buf, Lowering

__all__ = ["lower_for", "lower_if", "lower_while"]

_TRANSFORMS = MOVEMENT


@contextmanager
def _region(lw: Lowering) -> Iterator[None]:
    """Lazy values created inside a region must not escape it."""
    before = set(map(id, lw.pending))
    try:
        yield
    finally:
        lw.pending = [v for v in lw.pending if id(v) in before]
        lw.memo = {}


def _is_tile(v: Value) -> bool:
    return isinstance(v.type, T.TileType)


def _reads(lw: Lowering, v: Value) -> list[tuple[int, bool]]:
    """(allocation, read at the identity index?) for every buffer the lazy value `v` reads."""
    out: list[tuple[int, bool]] = []
    stack: list[tuple[Value, bool]] = [(v, True)]
    seen: set[tuple[int, bool]] = set()
    while stack:
        u, ident = stack.pop()
        if (id(u), ident) in seen:
            continue
        seen.add((id(u), ident))
        x = lw.vals.get(u)
        if x is None or isinstance(x, ir.Value):
            continue
        if isinstance(x, tuple):
            op = x[0]
            keep = ident and op.opcode not in _TRANSFORMS
            stack.extend((o, keep) for o in op.operands)
        else:
            out.append((x.alloc, ident))
    return out


def _write_carried(lw: Lowering, yields: list[Value], bufs: list[Buf | None]) -> list[ir.Value | None]:
    """Write yielded tiles into the carried buffers (in place where safe); return scalars."""
    tile_ks = [k for k, buf in enumerate(bufs) if buf is not None]
    carried_allocs = {bufs[k].alloc: k for k in tile_ks}  # type: ignore[union-attr]
    reads = {k: _reads(lw, yields[k]) for k in tile_ks}
    temps: dict[int, Buf] = {}
    in_place: list[int] = []
    for k in tile_ks:
        buf = bufs[k]
        assert buf is not None
        cur = lw.vals[yields[k]]
        if cur is buf:
            continue
        others_read = any(a == buf.alloc for j in tile_ks if j != k for a, _ in reads[j])
        own = [(a, i) for a, i in reads[k] if a in carried_allocs]
        if not others_read and all(a == buf.alloc and i for a, i in own):
            in_place.append(k)
        else:
            tmp = lw.alloc(buf.shape, buf.elem)
            lw.store_tile(yields[k], tmp)
            temps[k] = tmp
    for k in in_place:
        lw.store_tile(yields[k], bufs[k])  # type: ignore[arg-type]
    for k, tmp in temps.items():
        dst = bufs[k]
        assert dst is not None
        _copy(lw, tmp, dst)
    return [None if bufs[k] is not None else lw.scalar(y) for k, y in enumerate(yields)]


def _copy(lw: Lowering, src: Buf, dst: Buf) -> None:
    lw.loop_nest(dst.shape, lambda idx: lw.b.store(lw.b.load(src.addr(lw.b, idx), typ=llvm_type(src.elem)),
                                                   dst.addr(lw.b, idx)))


def _carried_buffers(lw: Lowering, inits: list[Value]) -> list[Buf | None]:
    bufs: list[Buf | None] = []
    for v in inits:
        if _is_tile(v):
            t = v.type
            assert isinstance(t, T.TileType)
            buf = lw.alloc(t.shape, t.elem)
            lw.store_tile(v, buf)
            bufs.append(buf)
        else:
            bufs.append(None)
    return bufs


def lower_for(lw: Lowering, op: Op) -> None:
    b = lw.b
    lb, ub, step = (lw.scalar(v) for v in op.operands[:3])
    inits = op.operands[3:]
    body: Block = op.regions[0]
    ity = body.args[0].type
    assert isinstance(ity, T.ScalarType)
    bufs = _carried_buffers(lw, inits)
    init_vals = [None if buf is not None else lw.scalar(v) for v, buf in zip(inits, bufs, strict=True)]
    sign = op.attrs.get("step_sign", 0)
    pre = b.block
    body_bb = b.append_basic_block("for")
    exit_bb = b.append_basic_block("for.end")
    b.cbranch(S.loop_continues(lw.b, ity, sign, lb, ub, step), body_bb, exit_bb)
    b.position_at_end(body_bb)
    iv = b.phi(llvm_type(ity))
    iv.add_incoming(lb, pre)
    phis: list[ir.PhiInstr | None] = []
    for arg, buf, init in zip(body.args[1:], bufs, init_vals, strict=True):
        if buf is not None:
            lw.vals[arg] = buf
            phis.append(None)
        else:
            p = b.phi(llvm_type(arg.type))
            p.add_incoming(init, pre)
            lw.vals[arg] = p
            phis.append(p)
    lw.vals[body.args[0]] = iv
    with _region(lw):
        lw.lower_block(body)
        new = _write_carried(lw, list(body.ops[-1].operands), bufs)
    nxt = b.add(iv, step)
    latch = b.block
    iv.add_incoming(nxt, latch)
    for p, v in zip(phis, new, strict=True):
        if p is not None:
            p.add_incoming(v, latch)
    b.cbranch(S.loop_continues(lw.b, ity, sign, nxt, ub, step), body_bb, exit_bb)
    b.position_at_end(exit_bb)
    for r, buf, init, v in zip(op.results, bufs, init_vals, new, strict=True):
        if buf is not None:
            lw.vals[r] = buf
        else:
            p = b.phi(llvm_type(r.type))
            p.add_incoming(init, pre)
            p.add_incoming(v, latch)
            lw.vals[r] = p


def lower_if(lw: Lowering, op: Op) -> None:
    b = lw.b
    cond = lw.scalar(op.operands[0])
    outs: list[Buf | None] = []
    for r in op.results:
        t = r.type
        outs.append(lw.alloc(t.shape, t.elem) if isinstance(t, T.TileType) else None)
    then_bb = b.append_basic_block("then")
    else_bb = b.append_basic_block("else")
    merge_bb = b.append_basic_block("endif")
    b.cbranch(cond, then_bb, else_bb)
    incoming: list[tuple[list[ir.Value | None], ir.Block]] = []
    for region, bb in zip(op.regions, (then_bb, else_bb), strict=True):
        b.position_at_end(bb)
        with _region(lw):
            lw.lower_block(region)
            ys = list(region.ops[-1].operands)
            vals: list[ir.Value | None] = []
            for y, out in zip(ys, outs, strict=True):
                if out is not None:
                    lw.store_tile(y, out)
                    vals.append(None)
                else:
                    vals.append(lw.scalar(y))
        incoming.append((vals, b.block))
        b.branch(merge_bb)
    b.position_at_end(merge_bb)
    for k, (r, out) in enumerate(zip(op.results, outs, strict=True)):
        if out is not None:
            lw.vals[r] = out
        else:
            p = b.phi(llvm_type(r.type))
            for vals, blk in incoming:
                p.add_incoming(vals[k], blk)
            lw.vals[r] = p


def lower_while(lw: Lowering, op: Op) -> None:
    b = lw.b
    before, after = op.regions
    inits = list(op.operands)
    bufs = _carried_buffers(lw, inits)
    init_vals = [None if buf is not None else lw.scalar(v) for v, buf in zip(inits, bufs, strict=True)]
    wait = waits.begin(lw, op) if id(op) in lw.waiting else None  # a loop that may wait for another program
    pre = b.block
    head_bb = b.append_basic_block("while")
    body_bb = b.append_basic_block("while.body")
    exit_bb = b.append_basic_block("while.end")
    b.branch(head_bb)
    b.position_at_end(head_bb)
    phis: list[ir.PhiInstr | None] = []
    for arg, buf, init in zip(before.args, bufs, init_vals, strict=True):
        if buf is not None:
            lw.vals[arg] = buf
            phis.append(None)
        else:
            p = b.phi(llvm_type(arg.type))
            p.add_incoming(init, pre)
            lw.vals[arg] = p
            phis.append(p)
    if wait is not None:
        waits.iteration_start(lw, wait)
    fwd_bufs: list[Buf | None] = []
    with _region(lw):
        lw.lower_block(before)
        cond_op = before.ops[-1]
        cond = lw.scalar(cond_op.operands[0])
        fwd_vals: list[ir.Value | None] = []
        for v in cond_op.operands[1:]:
            if _is_tile(v):
                t = v.type
                assert isinstance(t, T.TileType)
                fb = lw.alloc(t.shape, t.elem)
                lw.store_tile(v, fb)
                fwd_bufs.append(fb)
                fwd_vals.append(None)
            else:
                fwd_bufs.append(None)
                fwd_vals.append(lw.scalar(v))
    b.cbranch(cond, body_bb, exit_bb)
    b.position_at_end(body_bb)
    for arg, fbuf, fval in zip(after.args, fwd_bufs, fwd_vals, strict=True):
        lw.vals[arg] = fbuf if fbuf is not None else fval
    with _region(lw):
        lw.lower_block(after)
        new = _write_carried(lw, list(after.ops[-1].operands), bufs)
    if wait is not None:
        waits.iteration_end(lw, wait)
    latch = b.block
    for phi, nv in zip(phis, new, strict=True):
        if phi is not None:
            phi.add_incoming(nv, latch)
    b.branch(head_bb)
    b.position_at_end(exit_bb)
    if wait is not None:
        waits.finish(lw, wait)
    for r, fbuf, fval in zip(op.results, fwd_bufs, fwd_vals, strict=True):
        lw.vals[r] = fbuf if fbuf is not None else fval
