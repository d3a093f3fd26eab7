"""Global memory (addrspace 1) on AMDGPU: vectorized loads and stores, masks as branches.

A thread's registers that hold consecutive elements along the fastest dim are moved by one
access of up to 16 bytes (global_load_dwordx4) when axis info proves the addresses contiguous
and aligned and the mask constant across the group. A masked access is a branch around it: the
lanes whose mask is off leave the EXEC mask for the access, so they read or write nothing (an
address past the end of a tensor is never touched); a masked-off load yields `other`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ...layouts import REGISTER, LinearLayout
from ..llvm.scalar import I32
from .convert import elem_bytes
from .tiles import GPUTile, amd_type, num_regs, reg_coords, unsupported

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_load", "lower_store"]


def _check_hints(lw: AmdLowering, op: Op) -> None:
    if op.attrs.get("volatile"):
        raise unsupported("a volatile load (cache_modifier='.cv' or volatile=True)", op, lw.arch)


def _vec(lw: AmdLowering, layout: LinearLayout, ptr: Value, mask: Value | None, elem: T.ElemType) -> int:
    """Elements per access: consecutive along the last dim in the thread's registers, at most 16
    bytes, and what the pointers' contiguity and alignment and the mask's constancy allow."""
    if isinstance(elem, T.PointerType) or (isinstance(elem, T.ScalarType) and elem.bits < 8):
        return 1
    rank = len(layout.out_dims)
    k = 0
    regb = layout.bases(REGISTER)
    while k < len(regb) and regb[k] == tuple((1 << k) if d == rank - 1 else 0 for d in range(rank)):
        k += 1
    size = elem_bytes(elem)
    vec = min(1 << k, max(1, 16 // size))
    info = lw.axis.get(ptr)
    if info is None or len(info.contiguity) != rank:
        return 1
    vec = min(vec, info.contiguity[-1], max(1, info.divisibility[-1] // size))
    if mask is not None:
        minfo = lw.axis.get(mask)
        vec = min(vec, minfo.constancy[-1] if minfo is not None and len(minfo.constancy) == rank else 1)
    return max(1, vec & -vec)


def _load(lw: AmdLowering, p: ir.Value, ety: ir.Type, vec: int) -> ir.Value:
    b = lw.b
    ty = ir.VectorType(ety, vec) if vec > 1 else ety
    v = b.load(p, typ=ty)
    v.align = vec * _bytes_of(ety)
    return v


def _bytes_of(ety: ir.Type) -> int:
    if isinstance(ety, ir.IntType):
        return max(1, ety.width // 8)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}.get(str(ety), 8)


def _masked_load(lw: AmdLowering, p: ir.Value, m: ir.Value | None, defaults: list[ir.Value], ety: ir.Type,
                 vec: int) -> list[ir.Value]:
    b = lw.b
    if m is None:
        v = _load(lw, p, ety, vec)
        return [b.extract_element(v, ir.Constant(I32, i)) for i in range(vec)] if vec > 1 else [v]
    pre = b.block
    then_bb, end_bb = b.append_basic_block("ld"), b.append_basic_block("ld.end")
    b.cbranch(m, then_bb, end_bb)
    b.position_at_end(then_bb)
    v = _load(lw, p, ety, vec)
    loaded = b.block
    b.branch(end_bb)
    b.position_at_end(end_bb)
    if vec == 1:
        phi = b.phi(ety)
        phi.add_incoming(v, loaded)
        phi.add_incoming(defaults[0], pre)
        return [phi]
    vty = ir.VectorType(ety, vec)
    b.position_at_end(pre)  # the default vector is built before the branch
    term = pre.terminator
    assert term is not None
    b.position_before(term)
    dv: ir.Value = ir.Constant(vty, None)
    for i, d in enumerate(defaults):
        dv = b.insert_element(dv, d, ir.Constant(I32, i))
    b.position_at_end(end_bb)
    phi = b.phi(vty)
    phi.add_incoming(v, loaded)
    phi.add_incoming(dv, pre)
    return [b.extract_element(phi, ir.Constant(I32, i)) for i in range(vec)]


def lower_load(lw: AmdLowering, op: Op) -> None:
    _check_hints(lw, op)
    ptr_v = op.operands[0]
    mask_v = op.operands[1] if op.attrs["has_mask"] else None
    other_v = op.operands[-1] if op.attrs["has_other"] else None
    elem = T.elem_of(op.result.type)
    ety = amd_type(elem)
    if not isinstance(op.result.type, T.TileType):
        p = lw.scalar(ptr_v)
        m = lw.scalar(mask_v) if mask_v is not None else None
        o = lw.scalar(other_v) if other_v is not None else ir.Constant(ety, None)
        lw.vals[op.result] = _masked_load(lw, p, m, [o], ety, 1)[0]
        return
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    other = lw.tile(other_v, layout) if other_v is not None else None
    vec = _vec(lw, layout, ptr_v, mask_v, elem)
    regs: list[ir.Value] = []
    for r0 in range(0, num_regs(layout), vec):
        defaults = [other.regs[r0 + i] if other is not None else ir.Constant(ety, None) for i in range(vec)]
        regs += _masked_load(lw, ptr.regs[r0], mask.regs[r0] if mask is not None else None, defaults, ety, vec)
    lw.vals[op.result] = GPUTile(layout, regs)


def lower_store(lw: AmdLowering, op: Op) -> None:
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if len(op.operands) > 2 else None
    elem = T.elem_of(val_v.type)
    ety = amd_type(elem)
    b = lw.b
    if not isinstance(ptr_v.type, T.TileType):
        # every thread holds the scalar: the first thread of the program stores it
        first = lw.entry.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0))
        m = lw.scalar(mask_v) if mask_v is not None else None
        p, v = lw.scalar(ptr_v), lw.scalar(val_v)
        lw.when(first if m is None else b.and_(first, m), lambda: _store(lw, p, [v], ety))
        return
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    val = lw.tile(val_v, layout)
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    vec = _vec(lw, layout, ptr_v, mask_v, elem)
    owner = lw.owner(layout)
    # registers whose bits map to nothing repeat another register's element: stored once
    dup = sum(1 << k for k, basis in enumerate(layout.bases(REGISTER)) if not any(basis))
    seen: set[tuple[int, ...]] = set()
    for r0 in range(0, num_regs(layout), vec):
        c = reg_coords(layout, r0)
        if r0 & dup or c in seen:
            continue
        seen.add(c)
        m = mask.regs[r0] if mask is not None else None
        pred = owner if m is None else (m if owner is None else b.and_(owner, m))
        lw.when(pred, functools.partial(_store, lw, ptr.regs[r0], val.regs[r0:r0 + vec], ety))


def _store(lw: AmdLowering, p: ir.Value, vals: list[ir.Value], ety: ir.Type) -> None:
    b = lw.b
    if len(vals) == 1:
        s = b.store(vals[0], p)
        s.align = _bytes_of(ety)
        return
    v: ir.Value = ir.Constant(ir.VectorType(ety, len(vals)), None)
    for i, x in enumerate(vals):
        v = b.insert_element(v, x, ir.Constant(I32, i))
    s = b.store(v, p)
    s.align = len(vals) * _bytes_of(ety)
