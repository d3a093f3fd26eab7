"""Global memory on NVIDIA GPUs: vectorized, predicated loads and stores, and atomics.

A thread's registers that hold consecutive elements along the fastest dimension are moved with
one instruction of up to 16 bytes when axis info proves the addresses contiguous and aligned and
the mask constant across the group; masked accesses are predicated PTX (no branches), and so are
accesses with a cache hint or volatile loads (cache_hints.py).
In debug mode (`lw.debug`) every access goes element by element, each predicated on its bounds
check as well (bounds.py); without it the code is exactly the non-debug code.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ...layouts import REGISTER, LinearLayout
from ..llvm.scalar import I1, I8, I16, I32, I64
from .bounds import checked_predicates
from .cache_hints import PLAIN, Hint, load_hint, store_hint
from .convert import smem_load, smem_store
from .ownership import owned_registers, owner_predicate
from .tiles import GPUTile, num_regs, nv_type

if TYPE_CHECKING:
    from ...passes.axis_info import AxisInfo
    from .lower import NvLowering

__all__ = ["lower_load", "lower_store", "lower_atomic_rmw", "lower_atomic_cas", "load_tile"]

_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


def _elem_bytes(e: T.ElemType) -> int:
    return 8 if isinstance(e, T.PointerType) else max(1, e.bits // 8)


def _vec(lw: NvLowering, layout: LinearLayout, ptr: Value, mask: Value | None, elem: T.ElemType) -> int:
    if isinstance(elem, T.PointerType) or (isinstance(elem, T.ScalarType) and elem.bits < 8):
        return 1
    rank = len(layout.out_dims)
    k = 0
    regb = layout.bases(REGISTER)
    while k < len(regb) and regb[k] == tuple((1 << k) if d == rank - 1 else 0 for d in range(rank)):
        k += 1
    return access_width(lw.axis, ptr, mask, _elem_bytes(elem), 1 << k)


def access_width(axis: dict[Value, AxisInfo], ptr: Value, mask: Value | None, size: int, run: int) -> int:
    """Elements of `size` bytes one access can move along the last dim (a power of two): at most
    `run` (consecutive elements in a thread's registers) and 16 bytes, and what the pointers'
    contiguity and alignment and the mask's constancy allow (axis info)."""
    rank = len(T.shape_of(ptr.type))
    vec = min(run, max(1, 16 // size))
    info = axis.get(ptr)
    if info is None or len(info.contiguity) != rank:
        return 1
    vec = min(vec, info.contiguity[-1], max(1, info.divisibility[-1] // size))
    if mask is not None:
        minfo = axis.get(mask)
        vec = min(vec, minfo.constancy[-1] if minfo is not None and len(minfo.constancy) == rank else 1)
    return max(1, vec & -vec)


def _debug_mask(lw: NvLowering, op: Op, ptr_v: Value, ptr: GPUTile, mask: GPUTile | None,
                active: ir.Value | None = None, regs: list[int] | None = None) -> GPUTile | None:
    """Debug mode: `mask` with the bounds check of each of `regs` (default: all) folded in
    (bounds.py); unchanged when the pointer's provenance is unknown."""
    n = num_regs(ptr.layout)
    which = list(range(n)) if regs is None else regs
    preds = [mask.regs[r] if mask is not None else None for r in which]
    out = checked_predicates(lw, op, ptr_v, [ptr.regs[r] for r in which], preds, active)
    if out is preds:
        return mask
    full: list[ir.Value] = list(mask.regs) if mask is not None else [ir.Constant(I1, 1)] * n
    for r, m in zip(which, out, strict=True):
        assert m is not None
        full[r] = m
    return GPUTile(ptr.layout, full)


def _debug_pred(lw: NvLowering, op: Op, ptr_v: Value, p: ir.Value, m: ir.Value | None,
                active: ir.Value | None = None) -> ir.Value | None:
    """Debug mode: the predicate of a scalar access with its bounds check folded in."""
    return checked_predicates(lw, op, ptr_v, [p], [m], active)[0]


def _words(total: int) -> tuple[ir.IntType, int, str]:
    if total >= 4:
        return I32, total // 4, "r"
    return (I16, 1, "h") if total == 2 else (I16, 1, "h")


def _const_words(vals: list[ir.Value], ety: ir.Type, wty: ir.IntType, n: int) -> list[ir.Value] | None:
    """The words of a vector of constants (a masked load's `other`), packed here rather than by
    insertelement/bitcast/extractelement instructions; None when a value is not a constant."""
    if isinstance(ety, ir.IntType):
        fmt = {8: "B", 16: "H", 32: "I", 64: "Q"}.get(ety.width)
    else:
        fmt = {"half": "e", "float": "f", "double": "d"}.get(str(ety))
    if fmt is None or not all(isinstance(v, ir.Constant) for v in vals):
        return None
    try:
        raw = b"".join(struct.pack("<" + fmt, ((v.constant or 0) & ((1 << ety.width) - 1))
                                   if isinstance(ety, ir.IntType) else (v.constant or 0.0)) for v in vals)
    except (struct.error, OverflowError, TypeError):
        return None
    bits = wty.width
    if len(raw) != n * bits // 8:
        return None
    words = struct.unpack(f"<{n}{'I' if bits == 32 else 'H'}", raw)  # NVPTX is little-endian
    return [ir.Constant(wty, w - (1 << bits) if w >> (bits - 1) else w) for w in words]


def _pack(b: ir.IRBuilder, vals: list[ir.Value], ety: ir.Type, total: int) -> list[ir.Value]:
    wty, n, _ = _words(total)
    consts = _const_words(vals, ety, wty, n) if total > 1 else None
    if consts is not None:
        return consts
    if total == 1:
        return [b.zext(b.bitcast(vals[0], I8) if vals[0].type != I8 else vals[0], I16)]
    vec = ir.Constant(ir.VectorType(ety, len(vals)), None)
    for i, v in enumerate(vals):
        vec = b.insert_element(vec, v, ir.Constant(I32, i))
    if n == 1:
        return [b.bitcast(vec, wty)]
    words = b.bitcast(vec, ir.VectorType(wty, n))
    return [b.extract_element(words, ir.Constant(I32, i)) for i in range(n)]


def _unpack(b: ir.IRBuilder, words: list[ir.Value], ety: ir.Type, count: int, total: int) -> list[ir.Value]:
    if total == 1:
        return [b.trunc(words[0], I8) if ety == I8 else b.bitcast(b.trunc(words[0], I8), ety)]
    wty = words[0].type
    if len(words) == 1:
        vec = b.bitcast(words[0], ir.VectorType(ety, count))
    else:
        wv = ir.Constant(ir.VectorType(wty, len(words)), None)
        for i, w in enumerate(words):
            wv = b.insert_element(wv, w, ir.Constant(I32, i))
        vec = b.bitcast(wv, ir.VectorType(ety, count))
    return [b.extract_element(vec, ir.Constant(I32, i)) for i in range(count)]


def _pred_load(lw: NvLowering, ptr: ir.Value, pred: ir.Value, defaults: list[ir.Value], total: int,
               hint: Hint = PLAIN) -> list[ir.Value]:
    b = lw.b
    wty, n, cons = _words(total)
    width = {1: "b8", 2: "b16"}.get(total, "b32")
    if isinstance(pred, ir.Constant) and pred.constant == 1:  # unmasked (volatile or a hint): no defaults
        defaults = []
    outs = ", ".join(f"${i}" for i in range(n))
    movs = "".join(f"mov.b{16 if cons == 'h' else 32} ${i}, ${n + 2 + i};\n\t" for i in range(len(defaults)))
    vec = f".v{n}" if n > 1 else ""
    dst = f"{{ {outs} }}" if n > 1 else outs
    pol = f", ${n + 2 + len(defaults)}" if hint.policy is not None else ""
    asm = f"{movs}@${n + 1} ld{hint.prefix}.global{hint.suffix}{vec}.{width} {dst}, [ ${n} + 0 ]{pol};"
    extra = [hint.policy] if hint.policy is not None else []
    constraint = ",".join([f"={cons}"] * n + ["l", "b"] + [cons] * len(defaults) + ["l"] * len(extra))
    rty = ir.LiteralStructType([wty] * n) if n > 1 else wty
    fty = ir.FunctionType(rty, [ptr.type, I1] + [wty] * len(defaults) + [I64] * len(extra))
    res = b.asm(fty, asm, constraint, [ptr, pred, *defaults, *extra], side_effect=True)
    return [b.extract_value(res, i) for i in range(n)] if n > 1 else [res]


def _pred_store(lw: NvLowering, ptr: ir.Value, pred: ir.Value, words: list[ir.Value], total: int,
                hint: Hint = PLAIN) -> None:
    b = lw.b
    wty, n, cons = _words(total)
    width = {1: "b8", 2: "b16"}.get(total, "b32")
    vals = ", ".join(f"${i + 1}" for i in range(n))
    vec = f".v{n}" if n > 1 else ""
    src = f"{{ {vals} }}" if n > 1 else vals
    pol = f", ${n + 2}" if hint.policy is not None else ""
    asm = f"@${n + 1} st{hint.prefix}.global{hint.suffix}{vec}.{width} [ $0 + 0 ], {src}{pol};"
    extra = [hint.policy] if hint.policy is not None else []
    constraint = ",".join(["l"] + [cons] * n + ["b"] + ["l"] * len(extra) + ["~{memory}"])
    fty = ir.FunctionType(ir.VoidType(), [ptr.type] + [wty] * n + [I1] + [I64] * len(extra))
    b.asm(fty, asm, constraint, [ptr, *words, pred, *extra], side_effect=True)


def lower_load(lw: NvLowering, op: Op) -> None:
    ptr_v = op.operands[0]
    mask_v = op.operands[1] if op.attrs["has_mask"] else None
    other_v = op.operands[-1] if op.attrs["has_other"] else None
    elem = T.elem_of(op.result.type)
    ety = nv_type(elem)
    if not isinstance(op.result.type, T.TileType):
        p = lw.scalar(ptr_v)
        m = lw.scalar(mask_v) if mask_v is not None else None
        o = lw.scalar(other_v) if other_v is not None else ir.Constant(ety, None)
        if lw.debug:
            m = _debug_pred(lw, op, ptr_v, p, m)
        lw.vals[op.result] = _load_one(lw, p, m, o, ety, elem, load_hint(lw, op))
        return
    lw.vals[op.result] = load_tile(lw, ptr_v, mask_v, other_v, elem, op)


def load_tile(lw: NvLowering, ptr_v: Value, mask_v: Value | None, other_v: Value | None, elem: T.ElemType,
              op: Op | None = None) -> GPUTile:
    """The tile at the pointer tile `ptr_v` (in its layout), `other_v` (default 0) where `mask_v` is
    off; debug mode's bounds checks apply when `op` (the load) is given."""
    b = lw.b
    ety = nv_type(elem)
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    other = lw.tile(other_v, layout) if other_v is not None else None
    vec = _vec(lw, layout, ptr_v, mask_v, elem)
    if lw.debug and op is not None:  # element by element: a partly outside access still reads the inside part
        mask, vec = _debug_mask(lw, op, ptr_v, ptr, mask), 1
    hint = load_hint(lw, op)  # the L2 policy register, if any, is made here once for all registers
    if hint.forced and mask is None:  # through the asm path, which LLVM neither hoists nor merges
        mask = GPUTile(layout, [ir.Constant(I1, 1)] * num_regs(layout))
    size = _elem_bytes(elem)
    regs: list[ir.Value | None] = [None] * num_regs(layout)
    for r0 in range(0, num_regs(layout), vec):
        total = vec * size
        p = ptr.regs[r0]
        if vec == 1:
            o = other.regs[r0] if other is not None else ir.Constant(ety, None)
            regs[r0] = _load_one(lw, p, mask.regs[r0] if mask is not None else None, o, ety, elem, hint)
            continue
        if mask is None:
            v = b.load(p, typ=ir.VectorType(ety, vec))
            v.align = total
            for i in range(vec):
                regs[r0 + i] = b.extract_element(v, ir.Constant(I32, i))
            continue
        defaults = [other.regs[r0 + i] if other is not None else ir.Constant(ety, 0) for i in range(vec)]
        words = _pred_load(lw, p, mask.regs[r0], _pack(b, defaults, ety, total), total, hint)
        for i, v in enumerate(_unpack(b, words, ety, vec, total)):
            regs[r0 + i] = v
    return GPUTile(layout, regs)  # type: ignore[arg-type]


def _load_one(lw: NvLowering, p: ir.Value, m: ir.Value | None, other: ir.Value, ety: ir.Type,
              elem: T.ElemType, hint: Hint = PLAIN) -> ir.Value:
    """One element at `p`, `other` where the mask `m` is off."""
    b = lw.b
    if m is None and hint.forced and not isinstance(elem, T.PointerType):
        m = ir.Constant(I1, 1)
    if m is None:
        return b.load(p, typ=ety)
    if isinstance(elem, T.PointerType):
        pre = b.block
        then_bb, end_bb = b.append_basic_block("ld"), b.append_basic_block("ld.end")
        b.cbranch(m, then_bb, end_bb)
        b.position_at_end(then_bb)
        v = b.load(p, typ=ety)
        b.branch(end_bb)
        b.position_at_end(end_bb)
        phi = b.phi(ety)
        phi.add_incoming(v, then_bb)
        phi.add_incoming(other, pre)
        return phi
    size = _elem_bytes(elem)
    words = _pred_load(lw, p, m, _pack(b, [other], ety, size), size, hint)
    return _unpack(b, words, ety, 1, size)[0]


def lower_store(lw: NvLowering, op: Op) -> None:
    b = lw.b
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if op.attrs["has_mask"] else None
    elem = T.elem_of(val_v.type)
    ety = nv_type(elem)
    hint = store_hint(lw, op)  # the L2 policy register, if any, is made here once for all registers
    if not isinstance(ptr_v.type, T.TileType):
        first = b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0))
        m = lw.scalar(mask_v) if mask_v is not None else None
        if lw.debug:
            m = _debug_pred(lw, op, ptr_v, lw.scalar(ptr_v), m, first)
        pred = first if m is None else b.and_(first, m)
        _store_one(lw, lw.scalar(ptr_v), lw.scalar(val_v), pred, ety, elem, hint)
        return
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    val = lw.tile(val_v, layout)
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    owner = owner_predicate(lw, layout)
    vec = _vec(lw, layout, ptr_v, mask_v, elem)
    if lw.debug:
        mask, vec = _debug_mask(lw, op, ptr_v, ptr, mask, owner, owned_registers(layout)), 1
    size = _elem_bytes(elem)
    canon = set(owned_registers(layout))
    for r0 in range(0, num_regs(layout), vec):
        if r0 not in canon:
            continue
        pred = mask.regs[r0] if mask is not None else None
        if owner is not None:
            pred = owner if pred is None else b.and_(pred, owner)
        if pred is None and hint.forced:
            pred = ir.Constant(I1, 1)
        total = vec * size
        if vec == 1:
            _store_one(lw, ptr.regs[r0], val.regs[r0], pred, ety, elem, hint)
            continue
        vals = val.regs[r0:r0 + vec]
        if pred is None:
            v = ir.Constant(ir.VectorType(ety, vec), None)
            for i, x in enumerate(vals):
                v = b.insert_element(v, x, ir.Constant(I32, i))
            st = b.store(v, ptr.regs[r0])
            st.align = total
            continue
        _pred_store(lw, ptr.regs[r0], pred, _pack(b, vals, ety, total), total, hint)


def _store_one(lw: NvLowering, p: ir.Value, v: ir.Value, pred: ir.Value | None, ety: ir.Type,
               elem: T.ElemType, hint: Hint = PLAIN) -> None:
    b = lw.b
    if pred is None:
        b.store(v, p)
        return
    if isinstance(elem, T.PointerType):
        then_bb, end_bb = b.append_basic_block("st"), b.append_basic_block("st.end")
        b.cbranch(pred, then_bb, end_bb)
        b.position_at_end(then_bb)
        b.store(v, p)
        b.branch(end_bb)
        b.position_at_end(end_bb)
        return
    size = _elem_bytes(elem)
    _pred_store(lw, p, pred, _pack(b, [v], ety, size), size, hint)


def _guarded(lw: NvLowering, pred: ir.Value | None, make: Callable[[], ir.Value], ety: ir.Type) -> ir.Value:
    b = lw.b
    if pred is None:
        return make()
    pre = b.block
    then_bb, end_bb = b.append_basic_block("at"), b.append_basic_block("at.end")
    b.cbranch(pred, then_bb, end_bb)
    b.position_at_end(then_bb)
    v = make()
    then_end = b.block
    b.branch(end_bb)
    b.position_at_end(end_bb)
    phi = b.phi(ety)
    phi.add_incoming(v, then_end)
    phi.add_incoming(ir.Constant(ety, None), pre)
    return phi


def _scalar_atomic(lw: NvLowering, op: Op, make: Callable[[], ir.Value], ety: ir.Type,
                   pred: ir.Value | None) -> None:
    """A scalar atomic runs once (thread 0); every thread receives the old value."""
    b = lw.b
    first = b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0))
    p = first if pred is None else b.and_(first, pred)
    old = _guarded(lw, p, make, ety)
    base = lw.scratch(8)
    zero = ir.Constant(I32, 0)
    lw.barrier()
    def publish() -> ir.Value:
        smem_store(lw, base, zero, old)
        return zero

    _guarded(lw, first, publish, I32)
    lw.barrier()
    lw.vals[op.result] = smem_load(lw, base, zero, ety)


_SYNCSCOPE = {"gpu": "device", "cta": "block", "sys": None}


def _rmw_fence(lw: NvLowering, op: Op, after: bool) -> None:
    """The ordering of an atomic read-modify-write as fences: LLVM 22 lowers every `atomicrmw` to
    a relaxed `atom` whatever its ordering and scope, so a release (acq_rel)
    gets a fence before the atomic and an acquire (acq_rel) one after, at the op's scope."""
    sem = op.attrs["sem"]
    if sem in (("acquire", "acq_rel") if after else ("release", "acq_rel")):
        lw.b.fence("acq_rel", _SYNCSCOPE.get(op.attrs.get("scope") or "gpu", "device"))


def lower_atomic_rmw(lw: NvLowering, op: Op) -> None:
    b = lw.b
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if op.attrs["has_mask"] else None
    elem = T.elem_of(op.result.type)
    ety = nv_type(elem)
    kind = op.attrs["kind"]
    order = _ORDER.get(op.attrs["sem"], "monotonic")
    if not isinstance(ptr_v.type, T.TileType):
        p, v = lw.scalar(ptr_v), lw.scalar(val_v)
        m = lw.scalar(mask_v) if mask_v is not None else None
        if lw.debug:
            m = _debug_pred(lw, op, ptr_v, p, m, b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0)))

        def fenced() -> ir.Value:
            _rmw_fence(lw, op, after=False)
            old = b.atomic_rmw(kind, p, v, order)
            _rmw_fence(lw, op, after=True)
            return old

        _scalar_atomic(lw, op, fenced, ety, m)
        return
    _rmw_fence(lw, op, after=False)
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    val = lw.tile(val_v, layout)
    mask = lw.tile(mask_v, layout) if mask_v is not None else None
    owner = owner_predicate(lw, layout)
    if lw.debug:
        mask = _debug_mask(lw, op, ptr_v, ptr, mask, owner, owned_registers(layout))
    canon = set(owned_registers(layout))
    regs = []
    for r in range(num_regs(layout)):
        if r not in canon:
            regs.append(ir.Constant(ety, None))
            continue
        pred = mask.regs[r] if mask is not None else None
        if owner is not None:
            pred = owner if pred is None else b.and_(pred, owner)
        regs.append(_guarded(lw, pred, functools.partial(b.atomic_rmw, kind, ptr.regs[r], val.regs[r], order), ety))
    _rmw_fence(lw, op, after=True)
    lw.vals[op.result] = GPUTile(layout, regs)


def lower_atomic_cas(lw: NvLowering, op: Op) -> None:
    b = lw.b
    ptr_v, cmp_v, val_v = op.operands
    elem = T.elem_of(op.result.type)
    ety = nv_type(elem)
    order = _ORDER.get(op.attrs["sem"], "acq_rel")
    fail = "acquire" if order in ("acq_rel", "acquire") else "monotonic"

    def cas(p: ir.Value, c: ir.Value, v: ir.Value) -> ir.Value:
        if isinstance(ety, ir.IntType):
            return b.extract_value(b.cmpxchg(p, c, v, order, fail), 0)
        it = ir.IntType(elem.bits)  # type: ignore[union-attr]
        old = b.extract_value(b.cmpxchg(p, b.bitcast(c, it), b.bitcast(v, it), order, fail), 0)
        return b.bitcast(old, ety)

    if not isinstance(ptr_v.type, T.TileType):
        p, c, v = lw.scalar(ptr_v), lw.scalar(cmp_v), lw.scalar(val_v)
        ok = None
        if lw.debug:
            ok = _debug_pred(lw, op, ptr_v, p, None, b.icmp_unsigned("==", lw.tid, ir.Constant(I32, 0)))
        _scalar_atomic(lw, op, lambda: cas(p, c, v), ety, ok)
        return
    ptr = lw.tile(ptr_v)
    layout = ptr.layout
    cv, vv = lw.tile(cmp_v, layout), lw.tile(val_v, layout)
    owner = owner_predicate(lw, layout)
    preds: list[ir.Value | None] = [owner] * num_regs(layout)
    if lw.debug:
        ok = _debug_mask(lw, op, ptr_v, ptr, None, owner)
        if ok is not None:
            preds = [m if owner is None else b.and_(owner, m) for m in ok.regs]
    regs = [_guarded(lw, preds[r], functools.partial(cas, ptr.regs[r], cv.regs[r], vv.regs[r]), ety)
            for r in range(num_regs(layout))]
    lw.vals[op.result] = GPUTile(layout, regs)

