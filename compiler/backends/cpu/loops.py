"""Counted loops that carry values (phis) through their iterations, for the CPU lowering."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ..llvm.scalar import I64

if TYPE_CHECKING:
    from .lower import Lowering

__all__ = ["SHORT_TRIPS", "loop_carry", "loop_metadata"]

# loop_carry emits loops of this many steps or fewer as straight-line code; reductions over an
# axis this short (plus the first element) chain their combines per result element
SHORT_TRIPS = 8


def loop_carry(lw: Lowering, start: int, end: int, init: list[ir.Value],
               body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]], reverse: bool = False,
               vector_width: int = 0) -> list[ir.Value]:
    """for j in [start, end) (or reversed): vals = body(j, vals); returns the final values.
    vector_width > 0 forces that vectorization factor on the loop (see _forced_width); < 0 keeps
    the loop vectorizer off it."""
    if end <= start:
        return init
    if end - start <= SHORT_TRIPS:  # straight-line: no loop for LLVM's loop passes to analyze
        vals = init
        for k in range(start, end):
            vals = body(ir.Constant(I64, end - 1 + start - k if reverse else k), list(vals))
        return vals
    b = lw.b
    memo = dict(lw.memo)
    pre = b.block
    loop_bb = b.append_basic_block("red")
    exit_bb = b.append_basic_block("red.end")
    b.branch(loop_bb)
    b.position_at_end(loop_bb)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, start), pre)
    phis = []
    for v in init:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    j = b.sub(ir.Constant(I64, end - 1 + start), i) if reverse else i
    new = body(j, list(phis))
    nxt = b.add(i, ir.Constant(I64, 1))
    latch = b.block
    i.add_incoming(nxt, latch)
    for p, v in zip(phis, new, strict=True):
        p.add_incoming(v, latch)
    br = b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I64, end)), loop_bb, exit_bb)
    if vector_width:
        br.set_metadata("llvm.loop", loop_metadata(lw.m, vector_width))
    b.position_at_end(exit_bb)
    lw.memo = memo
    out = []
    for v in new:
        q = b.phi(v.type)
        q.add_incoming(v, latch)
        out.append(q)
    return out


def loop_metadata(m: ir.Module, width: int) -> ir.MDValue:
    """A loop ID (self-referential, as LLVM requires) asking for vectorization factor `width`
    (width 0: no vectorization; width < 0: neither vectorization nor unrolling)."""
    enable = m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"),
                             ir.Constant(ir.IntType(1), 1 if width > 0 else 0)])
    vf = m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.width"), ir.Constant(ir.IntType(32), width)])
    md = m.add_metadata([ir.MetaDataString(m, f"anvil.loop.{len(m.metadata)}")])  # a fresh node...
    if width < 0:
        md.operands = (md, enable, m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.disable")]))
    else:
        md.operands = (md, enable, vf) if width else (md, enable)  # ...made to point at itself
    return md
