"""Per-element evaluation of lazy (fusable) tile ops at an index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ..llvm.elementwise import emit_scalar_op as shared_scalar_op
from ..llvm.scalar import I1, I32, I64, llvm_type

if TYPE_CHECKING:
    from .lower import Lowering

__all__ = ["eval_elementwise", "emit_load", "emit_scalar_op", "gather_element"]

Idx = tuple[ir.Value, ...]


def _shape(t: T.Type) -> tuple[int, ...]:
    return T.shape_of(t)


def emit_scalar_op(lw: Lowering, op: Op, args: list[ir.Value]) -> ir.Value:
    """Apply a pure elementwise op to already-evaluated operand elements (llvm/elementwise.py)."""
    out = shared_scalar_op(lw.b, op, args, lw.fmf)
    if out is None:
        raise NotImplementedError(op.opcode)
    return out


def emit_load(lw: Lowering, op: Op, ptr: ir.Value, mask: ir.Value | None, other: ir.Value | None) -> ir.Value:
    """A (masked) load of one element; masked-off elements read nothing."""
    b = lw.b
    rt = llvm_type(T.elem_of(op.result.type))
    pe = T.elem_of(op.operands[0].type)
    assert isinstance(pe, T.PointerType)
    if lw.debug:
        ok = bounds_ok(lw, op, op.operands[0], ptr)
        bad = b.not_(ok) if mask is None else b.and_(mask, b.not_(ok))
        lw.record_error(bad, 1, op, b.ptrtoint(ptr, I64), lw.root_arg(op.operands[0]))
        mask = ok if mask is None else b.and_(mask, ok)
        if other is None:
            other = ir.Constant(rt, None)
    # volatile (or cache_modifier=".cv": polling a flag another program sets): a relaxed atomic
    # load, which LLVM must perform each time (a plain one may be hoisted out of a polling loop)
    volatile = bool(op.attrs.get("volatile"))
    bits = getattr(rt, "width", 0) if isinstance(rt, ir.IntType) else {"float": 32, "double": 64, "half": 16}.get(
        str(rt), 0)
    atomic = volatile and bits in (8, 16, 32, 64)

    def plain_or_atomic() -> ir.Value:
        return b.load_atomic(ptr, "monotonic", bits // 8, typ=rt) if atomic else b.load(ptr, typ=rt)

    if mask is None:
        return plain_or_atomic()
    if other is None:
        other = ir.Constant(rt, None)
    pre = b.block
    then_bb = b.append_basic_block("ld")
    merge_bb = b.append_basic_block("ld.end")
    b.cbranch(mask, then_bb, merge_bb)
    b.position_at_end(then_bb)
    v = plain_or_atomic()
    b.branch(merge_bb)
    b.position_at_end(merge_bb)
    phi = b.phi(rt)
    phi.add_incoming(v, then_bb)
    phi.add_incoming(other, pre)
    return phi


def bounds_ok(lw: Lowering, op: Op, ptr_value: Value, ptr: ir.Value) -> ir.Value:
    """Checked mode: is `ptr` inside the tensor its pointer came from? A pointer of no single
    provenance (a select of two tensors' pointers, a pointer swapped inside a loop, one cast from an
    integer) must be inside one of the kernel's tensors: in a kernel without tensor arguments, no
    address is (every access is refused and reported)."""
    root = lw.checked_roots.get(ptr_value)
    indices = [lw.fn.args.index(root)] if root is not None else [
        i for i, a in enumerate(lw.fn.args) if isinstance(a.type, T.PointerType)]
    if not indices:
        return ir.Constant(ir.IntType(1), 0)
    b = lw.b
    p = b.ptrtoint(ptr, I64)
    pe = T.elem_of(op.operands[0].type)
    assert isinstance(pe, T.PointerType)
    size = 8 if isinstance(pe.elem, T.PointerType) else max(1, pe.elem.bits // 8)
    end = b.add(p, ir.Constant(I64, size))
    ok: ir.Value | None = None
    # the table holds 4 words per argument: its tensor's [lo, hi), and for a host tensor descriptor's
    # packed words the [lo, hi) of the tensor the descriptor describes (its base pointer has no root)
    slots = [4 * indices[0]] if root is not None else [w for i in indices for w in (4 * i, 4 * i + 2)]
    for slot in slots:
        lo = b.load(b.gep(lw.bounds, [ir.Constant(I64, slot)], source_etype=I64), typ=I64)
        hi = b.load(b.gep(lw.bounds, [ir.Constant(I64, slot + 1)], source_etype=I64), typ=I64)
        inside = b.and_(b.and_(b.icmp_unsigned(">=", p, lo), b.icmp_unsigned("<=", end, hi)),
                        b.icmp_unsigned(">=", end, p))  # an address at the top of the space wraps
        ok = inside if ok is None else b.or_(ok, inside)
    return ok


def eval_elementwise(lw: Lowering, op: Op, k: int, idx: Idx) -> ir.Value:
    b = lw.b
    oc = op.opcode
    if oc == "splat":
        return lw.ev(op.operands[0], ())
    if oc == "make_range":
        i = b.trunc(idx[0], I32)
        start = op.attrs["start"]
        return b.add(i, ir.Constant(I32, start)) if start else i
    if oc == "broadcast":
        src_shape = _shape(op.operands[0].type)
        return lw.ev(op.operands[0], tuple(lw.zero if s == 1 else i for s, i in zip(src_shape, idx, strict=True)))
    if oc == "expand_dims":
        ax = op.attrs["axis"]
        return lw.ev(op.operands[0], idx[:ax] + idx[ax + 1:])
    if oc == "trans":
        perm = op.attrs["perm"]
        src = [lw.zero] * len(perm)
        for out_d, in_d in enumerate(perm):
            src[in_d] = idx[out_d]
        return lw.ev(op.operands[0], tuple(src))
    if oc == "reshape":
        return lw.ev(op.operands[0], _reindex(b, idx, _shape(op.result.type), _shape(op.operands[0].type)))
    if oc == "join":
        last = idx[-1]
        a = lw.ev(op.operands[0], idx[:-1])
        c = lw.ev(op.operands[1], idx[:-1])
        return b.select(b.icmp_unsigned("==", last, lw.zero), a, c)
    if oc == "split":
        return lw.ev(op.operands[0], (*idx, ir.Constant(I64, k)))
    if oc == "gather":
        return gather_element(lw, op, idx)
    if oc == "load":
        ptr = lw.ev(op.operands[0], idx)
        masked = op.attrs["has_mask"] and op.operands[1] not in lw.true_masks
        mask = lw.ev(op.operands[1], idx) if masked else None
        other = lw.ev(op.operands[-1], idx) if masked and op.attrs["has_other"] else None
        return emit_load(lw, op, ptr, mask, other)
    args = [lw.ev(o, idx) for o in op.operands]
    return emit_scalar_op(lw, op, args)


def _reindex(b: ir.IRBuilder, idx: Idx, out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> Idx:
    flat: ir.Value = ir.Constant(I64, 0)
    for i, d in zip(idx, out_shape, strict=True):
        flat = b.add(b.mul(flat, ir.Constant(I64, d)), i)
    out: list[ir.Value] = []
    for d in reversed(in_shape):
        out.append(b.urem(flat, ir.Constant(I64, d)))
        flat = b.udiv(flat, ir.Constant(I64, d))
    return tuple(reversed(out))


_ = I1


def gather_element(lw: Lowering, op: Op, idx: Idx) -> ir.Value:
    src = lw.vals[op.operands[0]]
    ax = op.attrs["axis"]
    b = lw.b
    n = T.shape_of(op.operands[0].type)[ax]
    iv = lw.ev(op.operands[1], idx)
    iv = b.sext(iv, I64) if iv.type != I64 else iv
    bad = b.icmp_unsigned(">=", iv, ir.Constant(I64, n))
    safe = b.select(bad, lw.zero, iv)
    v = b.load(src.addr(b, (*idx[:ax], safe, *idx[ax + 1:])), typ=llvm_type(src.elem))
    return b.select(bad, ir.Constant(v.type, None), v)
