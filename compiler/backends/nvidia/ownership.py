"""Which thread and register own each element of a tile.

A layout may hold an element in several places (zero bases: broadcast copies). Ops with side
effects per element (atomics, printing) act only on the owning copy: the thread whose lane and
warp bits along zero bases are 0, and the registers whose bits along zero bases are 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...layouts import LANE, REGISTER, WARP, LinearLayout
from ..llvm.scalar import I32
from .tiles import num_regs

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["owner_predicate", "owned_registers"]


def owner_predicate(lw: NvLowering, layout: LinearLayout) -> ir.Value | None:
    """i1: this thread owns its elements of `layout` (None: every thread owns its elements)."""
    b = lw.b
    cond: ir.Value | None = None
    for name, src in ((LANE, lw.lane), (WARP, lw.warp)):
        mask = 0
        for k, basis in enumerate(layout.bases(name)):
            if not any(basis):
                mask |= 1 << k
        if mask:
            c = b.icmp_unsigned("==", b.and_(src, ir.Constant(I32, mask)), ir.Constant(I32, 0))
            cond = c if cond is None else b.and_(cond, c)
    return cond


def owned_registers(layout: LinearLayout) -> list[int]:
    """The registers holding distinct elements (the first of each set of copies)."""
    dup = 0
    for k, basis in enumerate(layout.bases(REGISTER)):
        if not any(basis):
            dup |= 1 << k
    return [r for r in range(num_regs(layout)) if not r & dup]
