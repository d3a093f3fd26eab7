"""Debug-mode bounds checks of global-memory accesses on NVIDIA GPUs.

Every load, store and atomic whose pointer derives from a pointer argument of the kernel (its
provenance, `pointer_roots`) checks, per element that is not masked off, that the bytes it
touches lie inside that argument's tensor: [lo, hi) as written by the host before the launch
into the module global `__anvil_debug_bounds` (four i64 per kernel argument, by argument
position: the tensor's range and a host descriptor's tensor's; debug_host.write_debug_bounds). A
pointer of no single provenance must lie inside one of those ranges. An element outside is not accessed (a load gives
`other`, or zero) and the first violation of the launch goes to the error record (debug.py,
kind 1: the address as detail, the argument's position + 1 in the spare word).

The bounds are loaded once, in the entry block; the checks exist only when `lw.debug` is set.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ...passes.provenance import pointer_roots
from ..llvm.scalar import I1, I64
from .debug import record_error

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["BOUNDS_GLOBAL", "OOB_KIND", "checked_predicates"]

BOUNDS_GLOBAL = "__anvil_debug_bounds"
OOB_KIND = 1  # the CPU backend's kind for out-of-bounds accesses (2: device_assert)

@dataclass
class _State:
    roots: dict[Value, int]
    table: ir.Value | None = None
    bounds: dict[int, tuple[ir.Value, ir.Value]] = field(default_factory=dict)


_STATE: weakref.WeakKeyDictionary[NvLowering, _State] = weakref.WeakKeyDictionary()


def _state(lw: NvLowering) -> _State:
    st = _STATE.get(lw)
    if st is None:
        st = _STATE[lw] = _State(pointer_roots(lw.fn))
    return st


def _bounds(lw: NvLowering, st: _State, slot: int) -> tuple[ir.Value, ir.Value]:
    """(lo, hi) at word `slot` of the table, loaded in the entry block (dominates every use). The table
    holds 4 words per argument: its tensor's [lo, hi), and for a host tensor descriptor's packed words
    the [lo, hi) of the tensor the descriptor describes (else empty)."""
    hit = st.bounds.get(slot)
    if hit is not None:
        return hit
    e = lw.entry
    if st.table is None:
        ty = ir.ArrayType(I64, 4 * len(lw.fn.args))
        g = ir.GlobalVariable(lw.m, ty, BOUNDS_GLOBAL, addrspace=1)
        # external linkage and not constant: LLVM must not fold the loads to the zero initializer
        g.initializer = ir.Constant(ty, None)
        g.align = 8
        st.table = e.bitcast(g, ir.PointerType(I64, addrspace=1))
    lo = e.load(e.gep(st.table, [ir.Constant(I64, slot)]), typ=I64)
    hi = e.load(e.gep(st.table, [ir.Constant(I64, slot + 1)]), typ=I64)
    st.bounds[slot] = (lo, hi)
    return lo, hi


def checked_predicates(lw: NvLowering, op: Op, ptr_v: Value, addrs: list[ir.Value], preds: list[ir.Value | None],
                       active: ir.Value | None = None) -> list[ir.Value | None]:
    """Debug mode: the access predicates of `addrs` (one per element, None: unconditional) with the
    bounds check folded in, after recording the first element that is not masked off and lies
    outside its tensor. `active` (None: every thread) limits which threads may record, e.g. to the
    owner of each element. A pointer of no single provenance must lie inside one of the kernel's
    tensors: in a kernel without tensor arguments (its pointers made from integers) none does."""
    if not lw.debug:
        return preds
    st = _state(lw)
    idx = st.roots.get(ptr_v)
    # a pointer of no single provenance (swapped between tensors in a loop, read from a descriptor's
    # words, cast from an integer) must lie inside one of the kernel's tensors (or a host
    # descriptor's tensor)
    slots = [4 * idx] if idx is not None else [
        w for i, a in enumerate(lw.fn.args) if isinstance(a.type, T.PointerType) for w in (4 * i, 4 * i + 2)]
    ranges = [_bounds(lw, st, w) for w in slots]
    pe = T.elem_of(ptr_v.type)
    assert isinstance(pe, T.PointerType)
    size = ir.Constant(I64, 8 if isinstance(pe.elem, T.PointerType) else max(1, pe.elem.bits // 8))
    b = lw.b
    out: list[ir.Value | None] = []
    bads: list[tuple[ir.Value, ir.Value]] = []
    for p, m in zip(addrs, preds, strict=True):
        a = b.ptrtoint(p, I64)
        end = b.add(a, size)
        ok: ir.Value | None = None
        for lo, hi in ranges:
            inside = b.and_(b.icmp_unsigned(">=", a, lo), b.icmp_unsigned("<=", end, hi))
            if idx is None:  # an address at the top of the space wraps
                inside = b.and_(inside, b.icmp_unsigned(">=", end, a))
            ok = inside if ok is None else b.or_(ok, inside)
        if ok is None:  # no tensor to be inside
            ok = ir.Constant(I1, 0)
        bad = b.not_(ok) if m is None else b.and_(m, b.not_(ok))
        bads.append((bad, a))
        out.append(ok if m is None else b.and_(m, ok))
    any_bad: ir.Value = ir.Constant(I1, 0)
    first: ir.Value = ir.Constant(I64, 0)
    for bad, a in reversed(bads):  # the lowest register's address wins
        any_bad = b.or_(any_bad, bad)
        first = b.select(bad, a, first)
    if active is not None:
        any_bad = b.and_(any_bad, active)
    # no device printf (unlike device_assert): the host raises with the whole story, and a call
    # would make ptxas save registers around it in every kernel with a check
    record_error(lw, any_bad, OOB_KIND, op, first, None, extra=ir.Constant(I64, idx + 1 if idx is not None else 0))
    return out
