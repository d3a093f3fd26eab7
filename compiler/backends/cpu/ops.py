"""The CPU lowering table: one function per non-elementwise Tile IR op."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...ir.ops import ELEMENTWISE, MOVEMENT
from ..llvm import bf16
from ..llvm import scalar as S
from ..llvm.scalar import I1, I8, I32, I64, PTR, llvm_type
from . import compute, control
from .elementwise import bounds_ok, emit_scalar_op, eval_elementwise
from .waits import cas_changes, note_write, rmw_changes

if TYPE_CHECKING:
    from .lower import Buf, Lowering

__all__ = ["lower_op", "LOWER"]

Idx = tuple[ir.Value, ...]
_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
# evaluated where consumed, by index (a constant is a value, not a lazy tile)
_LAZY_OPS = (ELEMENTWISE | MOVEMENT) - {"constant"}


def lower_op(lw: Lowering, op: Op) -> None:
    oc = op.opcode
    tile_result = any(isinstance(r.type, T.TileType) for r in op.results)
    if oc in _LAZY_OPS and tile_result:
        if oc == "gather":
            lw.materialize(op.operands[0])
        lw.define_lazy(op)
        return
    if oc in _LAZY_OPS:
        for k, r in enumerate(op.results):  # split of a 2-element tile: two scalars
            lw.vals[r] = eval_elementwise(lw, op, k, ())
        return
    fn = LOWER.get(oc)
    if fn is None:
        raise UnsupportedError(f"{oc} is not supported by the CPU backend yet", op.loc)
    fn(lw, op)


def _constant(lw: Lowering, op: Op) -> None:
    t = op.result.type
    assert isinstance(t, T.ScalarType)
    lw.vals[op.result] = S.const(t, op.attrs["value"])


def _pid(lw: Lowering, op: Op) -> None:
    lw.vals[op.result] = lw.pid[op.attrs["axis"]]


def _nprog(lw: Lowering, op: Op) -> None:
    lw.vals[op.result] = lw.nprog[op.attrs["axis"]]


def _guarded(lw: Lowering, cond: ir.Value | None, body: Callable[[], None]) -> None:
    if cond is None:
        body()
        return
    b = lw.b
    then_bb = b.append_basic_block("m")
    end_bb = b.append_basic_block("m.end")
    b.cbranch(cond, then_bb, end_bb)
    b.position_at_end(then_bb)
    body()
    b.branch(end_bb)
    b.position_at_end(end_bb)


def _each(lw: Lowering, v: object, body: Callable[[Idx], None]) -> None:
    shape = T.shape_of(v.type)  # type: ignore[attr-defined]
    if shape:
        lw.loop_nest(shape, body)
    else:
        lw.memo = {}
        body(())


def _store(lw: Lowering, op: Op) -> None:
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if op.attrs["has_mask"] else None
    for v in op.operands:
        lw.consume(v)

    def body(idx: Idx) -> None:
        b = lw.b
        p = lw.ev(ptr_v, idx)
        x = lw.ev(val_v, idx)
        m = lw.ev(mask_v, idx) if mask_v is not None and mask_v not in lw.true_masks else None
        if lw.debug:
            ok = bounds_ok(lw, op, ptr_v, p)
            bad = b.not_(ok) if m is None else b.and_(m, b.not_(ok))
            lw.record_error(bad, 1, op, b.ptrtoint(p, I64), lw.root_arg(ptr_v))
            m = ok if m is None else b.and_(m, ok)
        def write() -> None:
            lw.b.store(x, p)
            note_write(lw)

        _guarded(lw, m, write)

    shape = T.shape_of(ptr_v.type)
    if shape:
        lw.masked_loop_nest(shape, [ptr_v, val_v], body, mask_v)
    else:
        _each(lw, ptr_v, body)


def _result_buf(lw: Lowering, op: Op) -> Buf | None:
    r = op.result
    if isinstance(r.type, T.TileType) and lw.uses.get(r, 0) > 0:
        return lw.alloc(r.type.shape, r.type.elem)
    return None


def _atomic_rmw(lw: Lowering, op: Op) -> None:
    ptr_v, val_v = op.operands[0], op.operands[1]
    mask_v = op.operands[2] if op.attrs["has_mask"] else None
    kind = op.attrs["kind"]
    llvm_kind = {"fadd": "fadd", "fmax": "fmax", "fmin": "fmin"}.get(kind, kind)
    order = _ORDER.get(op.attrs["sem"], "acq_rel")
    out = _result_buf(lw, op)
    rt = llvm_type(T.elem_of(op.result.type))
    is_bf16 = T.elem_of(op.result.type) == T.bf16 and kind in ("fadd", "fmax", "fmin")
    for v in op.operands:
        lw.consume(v)
    scalar_result: list[ir.Value] = []

    def body(idx: Idx) -> None:
        b = lw.b
        p = lw.ev(ptr_v, idx)
        x = lw.ev(val_v, idx)
        m = lw.ev(mask_v, idx) if mask_v is not None else None
        if lw.debug:
            ok = bounds_ok(lw, op, ptr_v, p)
            lw.record_error(b.not_(ok) if m is None else b.and_(m, b.not_(ok)), 1, op, b.ptrtoint(p, I64),
                            lw.root_arg(ptr_v))
            m = ok if m is None else b.and_(m, ok)
        pre = b.block
        old: ir.Value
        rmw = _bf16_atomic_rmw if is_bf16 else (lambda b, k, p, x, o: b.atomic_rmw(k, p, x, o))
        def performed(r: ir.Value) -> ir.Value:
            if lw.waits:
                note_write(lw, None if is_bf16 else rmw_changes(b, kind, r, x))
            return r

        if m is None:
            old = performed(rmw(b, llvm_kind, p, x, order))
        else:
            then_bb = b.append_basic_block("at")
            end_bb = b.append_basic_block("at.end")
            b.cbranch(m, then_bb, end_bb)
            b.position_at_end(then_bb)
            r = performed(rmw(b, llvm_kind, p, x, order))
            then_bb = b.block
            b.branch(end_bb)
            b.position_at_end(end_bb)
            phi = b.phi(rt)
            phi.add_incoming(r, then_bb)
            phi.add_incoming(ir.Constant(rt, None), pre)
            old = phi
        if out is not None:
            b.store(old, out.addr(b, idx))
        elif not idx:
            scalar_result.append(old)

    _each(lw, ptr_v, body)
    lw.vals[op.result] = out if out is not None else (scalar_result[0] if scalar_result else ir.Constant(rt, None))


def _bf16_atomic_rmw(b: ir.IRBuilder, kind: str, p: ir.Value, x: ir.Value, order: str) -> ir.Value:
    """Atomic fadd/fmax/fmin on bf16 (16-bit integers here, bf16.py): a compare-and-swap loop
    computing in fp32; returns the old bits."""
    i16 = ir.IntType(16)
    pre = b.block
    loop = b.append_basic_block("bf16.rmw")
    done = b.append_basic_block("bf16.rmw.end")
    first = b.load_atomic(p, "monotonic", 2, typ=i16)
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(i16)
    cur.add_incoming(first, pre)
    a, v = bf16.to_f32(b, cur), bf16.to_f32(b, x)
    if kind == "fadd":
        r = b.fadd(a, v)
    else:
        name = "llvm.maxnum.f32" if kind == "fmax" else "llvm.minnum.f32"
        f = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(a.type, [a.type, a.type]), name)
        r = b.call(f, [a, v])
    res = b.cmpxchg(p, cur, bf16.from_f32(b, r), order, "monotonic")
    seen = b.extract_value(res, 0)
    cur.add_incoming(seen, b.block)
    b.cbranch(b.extract_value(res, 1), done, loop)
    b.position_at_end(done)
    return seen


def _atomic_cas(lw: Lowering, op: Op) -> None:
    ptr_v, cmp_v, val_v = op.operands
    order = _ORDER.get(op.attrs["sem"], "acq_rel")
    fail = "acquire" if order in ("acq_rel", "acquire") else "monotonic"
    out = _result_buf(lw, op)
    rt = llvm_type(T.elem_of(op.result.type))
    for v in op.operands:
        lw.consume(v)
    scalar_result: list[ir.Value] = []

    def body(idx: Idx) -> None:
        b = lw.b
        p = lw.ev(ptr_v, idx)
        c, x = lw.ev(cmp_v, idx), lw.ev(val_v, idx)
        is_float = not isinstance(rt, ir.IntType)
        if is_float:
            it = ir.IntType(T.elem_of(op.result.type).bits)  # type: ignore[union-attr]
            c, x = b.bitcast(c, it), b.bitcast(x, it)
        ok = bounds_ok(lw, op, ptr_v, p) if lw.debug else None
        if ok is None:
            old = b.extract_value(b.cmpxchg(p, c, x, order, fail), 0)
            if lw.waits:
                note_write(lw, cas_changes(b, old, c, x))
        else:  # checked: an access outside the tensors is recorded and not performed
            lw.record_error(b.not_(ok), 1, op, b.ptrtoint(p, I64), lw.root_arg(ptr_v))
            pre = b.block
            then_bb = b.append_basic_block("cas")
            end_bb = b.append_basic_block("cas.end")
            b.cbranch(ok, then_bb, end_bb)
            b.position_at_end(then_bb)
            done = b.extract_value(b.cmpxchg(p, c, x, order, fail), 0)
            if lw.waits:
                note_write(lw, cas_changes(b, done, c, x))
            then_bb = b.block
            b.branch(end_bb)
            b.position_at_end(end_bb)
            phi = b.phi(done.type)
            phi.add_incoming(done, then_bb)
            phi.add_incoming(ir.Constant(done.type, None), pre)
            old = phi
        if is_float:
            old = b.bitcast(old, rt)
        if out is not None:
            b.store(old, out.addr(b, idx))
        elif not idx:
            scalar_result.append(old)

    _each(lw, ptr_v, body)
    lw.vals[op.result] = out if out is not None else (scalar_result[0] if scalar_result else ir.Constant(rt, None))


def _cat(lw: Lowering, op: Op) -> None:
    a, c = op.operands
    out = lw.alloc(op.result.type.shape, op.result.type.elem)  # type: ignore[union-attr]
    # Over a's own shape: store_tile(a, out) would read `a` past its end (UB that LLVM turned
    # into an endless loop).
    lw.consume(a)
    lw.loop_nest(T.shape_of(a.type), lambda idx: lw.b.store(lw.ev(a, idx), out.addr(lw.b, idx)))
    n = T.shape_of(a.type)[0]
    lw.consume(c)
    lw.loop_nest(T.shape_of(c.type), lambda idx: lw.b.store(
        lw.ev(c, idx), out.addr(lw.b, (lw.b.add(idx[0], ir.Constant(I64, n)), *idx[1:]))))
    lw.vals[op.result] = out


def _histogram(lw: Lowering, op: Op) -> None:
    x = op.operands[0]
    mask_v = op.operands[1] if len(op.operands) > 1 else None
    nbins = T.shape_of(op.result.type)[0]
    out = lw.alloc((nbins,), T.i32)
    lw.loop(nbins, lambda i: lw.b.store(ir.Constant(I32, 0), out.addr(lw.b, (i,))))
    lw.consume(x)
    xe = T.elem_of(x.type)

    def body(idx: Idx) -> None:
        b = lw.b
        v = lw.ev(x, idx)
        v64 = b.sext(v, I64) if xe.is_signed else b.zext(v, I64)  # type: ignore[union-attr]
        ok = b.icmp_unsigned("<", v64, ir.Constant(I64, nbins))
        if mask_v is not None:
            ok = b.and_(ok, lw.ev(mask_v, idx))

        def inc() -> None:
            p = out.addr(lw.b, (v64,))
            lw.b.store(lw.b.add(lw.b.load(p, typ=I32), ir.Constant(I32, 1)), p)

        _guarded(lw, ok, inc)

    lw.loop_nest(T.shape_of(x.type), body)
    lw.vals[op.result] = out


def _printf(lw: Lowering, fmt: str, args: list[ir.Value]) -> None:
    b, m = lw.b, lw.m
    fn = m.globals.get("printf") or ir.Function(m, ir.FunctionType(I32, [PTR], var_arg=True), "printf")
    data = bytearray(fmt.encode() + b"\0")
    name = f"__anvil_fmt{len([g for g in m.globals if g.startswith('__anvil_fmt')])}"
    g = ir.GlobalVariable(m, ir.ArrayType(I8, len(data)), name)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    b.call(fn, [b.gep(g, [ir.Constant(I64, 0), ir.Constant(I64, 0)], source_etype=g.value_type), *args])


def _print(lw: Lowering, op: Op) -> None:
    # The prefix is kernel text: it goes into a printf format only with every '%' doubled, so that
    # a prefix such as "%n%s" prints as written instead of reading or writing memory.
    prefix = str(op.attrs["prefix"]).replace("%", "%%")
    hexa = op.attrs["hex"]
    for v in op.operands:
        lw.consume(v)
    if not op.operands:
        _printf(lw, f"pid ({'%d, %d, %d'}) {prefix}\n", list(lw.pid))
        return
    for v in op.operands:
        et = T.elem_of(v.type)

        def body(idx: Idx, v: object = v, et: T.ElemType = et) -> None:
            b = lw.b
            x = lw.ev(v, idx)  # type: ignore[arg-type]
            if isinstance(et, T.ScalarType) and et.is_float:
                if et.bits == 8:
                    x = S.emit_cast(b, et, T.fp32, x)
                x = b.fpext(x, ir.DoubleType()) if x.type != ir.DoubleType() else x
                spec = "%a" if hexa else "%f"
            elif isinstance(et, T.PointerType):
                x, spec = b.ptrtoint(x, I64), "0x%llx"
            else:
                x = (b.sext(x, I64) if et.is_signed else b.zext(x, I64)) if x.type != I64 else x
                spec = "0x%llx" if hexa else ("%lld" if et.is_signed else "%llu")
            ids = [b.trunc(i, I32) for i in idx]
            idx_s = ", ".join(["%d"] * len(ids))
            _printf(lw, f"pid (%d, %d, %d) idx ({idx_s}) {prefix}{spec}\n", [*lw.pid, *ids, x])

        _each(lw, v, body)


def _assert(lw: Lowering, op: Op) -> None:
    c = op.operands[0]
    lw.consume(c)

    def body(idx: Idx) -> None:
        ok = lw.ev(c, idx)
        lw.record_error(lw.b.not_(ok), 2, op, ir.Constant(I64, 0))

    _each(lw, c, body)


def _assume(lw: Lowering, op: Op) -> None:
    c = op.operands[0]
    if isinstance(c.type, T.TileType):
        return
    b = lw.b
    fn = lw.m.globals.get("llvm.assume") or ir.Function(lw.m, ir.FunctionType(ir.VoidType(), [I1]), "llvm.assume")
    b.call(fn, [lw.scalar(c)])


def _sort(lw: Lowering, op: Op) -> None:
    """A bitonic sorting network along the last axis (its compare-exchange stages unrolled)."""
    x = op.operands[0]
    shape = T.shape_of(x.type)
    et = T.elem_of(x.type)
    n = shape[-1]
    out = lw.alloc(shape, et)
    lw.store_tile(x, out)
    desc = bool(op.attrs["descending"])
    ty = llvm_type(et)
    stages = []
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            stages.append((k, j))
            j //= 2
        k *= 2

    def row(o: Idx) -> None:
        for k, j in stages:
            def step(i: ir.Value, k: int = k, j: int = j) -> None:
                b = lw.b
                partner = b.xor(i, ir.Constant(I64, j))
                upper = b.icmp_unsigned(">", partner, i)

                def swap() -> None:
                    b2 = lw.b
                    pa, pb = out.addr(b2, (*o, i)), out.addr(b2, (*o, partner))
                    va, vb = b2.load(pa, typ=ty), b2.load(pb, typ=ty)
                    ascending = b2.icmp_unsigned("==", b2.and_(i, ir.Constant(I64, k)), ir.Constant(I64, 0))
                    if desc:
                        ascending = b2.not_(ascending)
                    gt = S.CMP(b2, et, "gt", va, vb)
                    lt = S.CMP(b2, et, "lt", va, vb)
                    do_swap = b2.select(ascending, gt, lt)
                    b2.store(b2.select(do_swap, vb, va), pa)
                    b2.store(b2.select(do_swap, va, vb), pb)

                _guarded(lw, upper, swap)

            lw.loop(n, step)

    lw.loop_nest(shape[:-1], row) if len(shape) > 1 else row(())
    lw.vals[op.result] = out


def _noop(lw: Lowering, op: Op) -> None:
    return None


def _control(name: str) -> Callable[[Lowering, Op], None]:
    def f(lw: Lowering, op: Op) -> None:
        getattr(control, name)(lw, op)

    return f


def _compute(name: str) -> Callable[[Lowering, Op], None]:
    def f(lw: Lowering, op: Op) -> None:
        getattr(compute, name)(lw, op)

    return f


LOWER: dict[str, Callable[[Lowering, Op], None]] = {
    "constant": _constant,
    "program_id": _pid,
    "num_programs": _nprog,
    "store": _store,
    "atomic_rmw": _atomic_rmw,
    "atomic_cas": _atomic_cas,
    "cat": _cat,
    "histogram": _histogram,
    "print": _print,
    "assert": _assert,
    "assume": _assume,
    "barrier": _noop,
    "sort": _sort,
    "for": _control("lower_for"),
    "if": _control("lower_if"),
    "while": _control("lower_while"),
    "reduce": _compute("lower_reduce"),
    "scan": _compute("lower_scan"),
    "dot": _compute("lower_dot"),
}

_ = (emit_scalar_op, I8)
