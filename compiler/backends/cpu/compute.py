"""Reductions, scans and dot on the CPU: loop nests over the tiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Op, Value
from ...ir.ops import ASSOCIATIVE
from ..llvm import scalar as S
from ..llvm.scalar import I64, llvm_type
from .buffers import Buf, contiguous_strides
from .dot import blocked_shape, dot_blocked
from .engine import vector_bits
from .loops import SHORT_TRIPS, loop_carry, loop_metadata

if TYPE_CHECKING:
    from .lower import Lowering

__all__ = ["lower_reduce", "lower_scan", "lower_dot"]

Idx = tuple[ir.Value, ...]


def _forced_width(region: Block, elems: list[T.ElemType]) -> int:
    """A fixed vectorization factor for reductions combining floats with max/min, else 0.

    LLVM 22 vectorizes maxnum/minnum reductions without fast-math flags, but when it picks the
    factor itself its two cost models can disagree on short trip counts (e.g. 31 or 127), and
    an assertion-enabled LLVM (llvmlite's) then aborts the process ("VPlan cost model and
    legacy cost model disagreed"). A factor given in loop metadata skips that comparison."""
    def is_float(t: T.Type) -> bool:
        e = T.elem_of(t)
        return isinstance(e, T.ScalarType) and e.is_float

    if not any(o.opcode in ("max", "min") and is_float(o.results[0].type) for o in region.ops):
        return 0

    bits = vector_bits()
    return max(1, bits // max(e.bits if isinstance(e, T.ScalarType) else 64 for e in elems))


def _combiner(lw: Lowering, region: Block) -> Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]:
    reassoc = all(o.opcode in ASSOCIATIVE or o.opcode == "yield" for o in region.ops)

    def combine(acc: list[ir.Value], new: list[ir.Value]) -> list[ir.Value]:
        k = len(acc)
        for a, v in zip(region.args, acc + new, strict=True):
            lw.vals[a] = v
        saved = lw.fmf
        lw.fmf = ("reassoc", "nsz") if reassoc else ()
        try:
            lw.lower_block(region)
        finally:
            lw.fmf = saved
        res = [lw.scalar(y) for y in region.ops[-1].operands]
        assert len(res) == k
        return res

    return combine


def _split(shape: tuple[int, ...], axis: int) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    return shape[:axis], shape[axis], shape[axis + 1:]


def lower_reduce(lw: Lowering, op: Op) -> None:
    xs: list[Value] = list(op.operands)
    axis = op.attrs["axis"]
    shape = T.shape_of(xs[0].type)
    outer, n, inner = _split(shape, axis)
    combine = _combiner(lw, op.regions[0])
    for x in xs:
        lw.consume(x)
    out_shape = outer + inner
    elems = [T.elem_of(x.type) for x in xs]
    if not inner or n <= SHORT_TRIPS + 1:
        # one chain of combines per result element (straight-line for a short axis), the results'
        # loop nest around it
        outs = [lw.alloc(out_shape, e) for e in elems] if out_shape else None
        results: list[ir.Value] = []
        width = _forced_width(op.regions[0], elems)
        if not width and len(xs) > 1:
            # Reductions carrying several values (argmin/argmax: value and index through compares
            # and selects): LLVM fully unrolls short ones, then spends minutes on the unrolled
            # select chain (4 minutes for 32 fp32 elements); the rolled loop compiles at once.
            width = -1

        def row(idx: Idx) -> None:
            o, i = idx[:len(outer)], idx[len(outer):]
            first = [lw.ev(x, (*o, lw.zero, *i)) for x in xs]
            acc = loop_carry(lw, 1, n, first, lambda j, acc: combine(acc, [lw.ev(x, (*o, j, *i)) for x in xs]),
                             vector_width=width)
            if outs is None:
                results.extend(acc)
            else:
                for buf, a in zip(outs, acc, strict=True):
                    lw.b.store(a, buf.addr(lw.b, idx))

        if out_shape:
            lw.loop_nest(out_shape, row)
        else:
            lw.memo = {}
            row(())
        for r, k in zip(op.results, range(len(xs)), strict=True):
            lw.vals[r] = outs[k] if outs is not None else results[k]
        return
    outs = [lw.alloc(out_shape, e) for e in elems]

    def init(idx: Idx) -> None:
        o, i = idx[:len(outer)], idx[len(outer):]
        for x, buf in zip(xs, outs, strict=True):
            lw.b.store(lw.ev(x, (*o, lw.zero, *i)), buf.addr(lw.b, idx))

    lw.loop_nest(out_shape, init)

    def step(o: Idx) -> None:
        def at_j(j: ir.Value) -> None:
            def inner_body(i: Idx) -> None:
                idx = (*o, *i)
                b = lw.b
                acc = [b.load(buf.addr(b, idx), typ=llvm_type(buf.elem)) for buf in outs]
                new = combine(acc, [lw.ev(x, (*o, j, *i)) for x in xs])
                for buf, v in zip(outs, new, strict=True):
                    b.store(v, buf.addr(b, idx))

            _nest(lw, inner, inner_body)

        # Float max/min: keep LLVM's loop vectorizer off this loop over the reduced axis. LLVM 22
        # vectorizes it with a NaN check that drops the remainder iterations (max over 8 rows
        # read only 5) or aborts on the cost-model assertion (see _forced_width).
        md = loop_metadata(lw.m, 0) if _forced_width(op.regions[0], elems) else None
        lw.loop(n - 1, lambda j: at_j(lw.b.add(j, ir.Constant(I64, 1))), loop_md=md)

    _nest(lw, outer, step)
    for r, buf in zip(op.results, outs, strict=True):
        lw.vals[r] = buf


def _nest(lw: Lowering, shape: tuple[int, ...], body: Callable[[Idx], None]) -> None:
    def rec(d: int, idx: Idx) -> None:
        if d == len(shape):
            body(idx)
            return
        lw.loop(shape[d], lambda i: rec(d + 1, (*idx, i)))

    rec(0, ())


def lower_scan(lw: Lowering, op: Op) -> None:
    xs: list[Value] = list(op.operands)
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    shape = T.shape_of(xs[0].type)
    outer, n, inner = _split(shape, axis)
    combine = _combiner(lw, op.regions[0])
    for x in xs:
        lw.consume(x)
    outs = [lw.alloc(shape, T.elem_of(x.type)) for x in xs]
    first = ir.Constant(I64, n - 1 if reverse else 0)

    def line(o: Idx, i: Idx) -> None:
        b = lw.b
        acc0 = [lw.ev(x, (*o, first, *i)) for x in xs]
        for buf, a in zip(outs, acc0, strict=True):
            b.store(a, buf.addr(b, (*o, first, *i)))

        def body(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            new = combine(acc, [lw.ev(x, (*o, j, *i)) for x in xs])
            for buf, v in zip(outs, new, strict=True):
                lw.b.store(v, buf.addr(lw.b, (*o, j, *i)))
            return new

        if reverse:
            loop_carry(lw, 0, n - 1, acc0, body, reverse=True)
        else:
            loop_carry(lw, 1, n, acc0, body)

    if not inner:
        lw.loop_nest(outer, lambda o: line(o, ()))
    else:
        def by_j(o: Idx) -> None:
            def jbody(jj: ir.Value) -> None:
                b = lw.b
                j = b.sub(ir.Constant(I64, n - 1), jj) if reverse else jj
                prev = b.add(j, ir.Constant(I64, 1)) if reverse else b.sub(j, ir.Constant(I64, 1))
                is_first = b.icmp_unsigned("==", jj, lw.zero)

                def ib(i: Idx) -> None:
                    lw.memo = {}
                    cur = [lw.ev(x, (*o, j, *i)) for x in xs]
                    safe_prev = b.select(is_first, j, prev)
                    acc = [b.load(buf.addr(b, (*o, safe_prev, *i)), typ=llvm_type(buf.elem)) for buf in outs]
                    new = combine(acc, cur)
                    for buf, c, v in zip(outs, cur, new, strict=True):
                        b.store(b.select(is_first, c, v), buf.addr(b, (*o, j, *i)))

                _nest(lw, inner, ib)

            lw.loop(n, jbody)

        _nest(lw, outer, by_j)
    for r, buf in zip(op.results, outs, strict=True):
        lw.vals[r] = buf


def _cast_copy(lw: Lowering, v: Value, elem: T.ScalarType) -> Buf:
    t = v.type
    assert isinstance(t, T.TileType)
    src = T.elem_of(t)
    buf = lw.alloc(t.shape, elem)
    lw.consume(v)
    lw.loop_nest(t.shape, lambda idx: lw.b.store(S.emit_cast(lw.b, src, elem, lw.ev(v, idx)),
                                                 buf.addr(lw.b, idx)))
    return buf


def _operand(lw: Lowering, v: Value, elem: T.ScalarType) -> Buf:
    """A dot operand as a buffer of `elem` with unit stride along its rows: its own if it has
    one (the dot only reads it), else a converted copy."""
    x = lw.vals.get(v)
    if isinstance(x, Buf) and x.elem == elem and x.strides[-1] == 1:
        lw.consume(v)
        return x
    return _cast_copy(lw, v, elem)


def _accumulator(lw: Lowering, op: Op, acc: Value, elem: T.ScalarType) -> Buf:
    """The buffer the dot sums into: the loop-carried accumulator itself when this dot is its only
    reader in the loop body (`acc = tl.dot(a, b, acc)`: the loop then keeps the result without a
    copy), else a copy."""
    x = lw.vals.get(acc)
    if (isinstance(x, Buf) and x.elem == elem and x.strides == contiguous_strides(x.shape)
            and lw.uses.get(acc, 0) == 1 and op.parent is not None and acc in op.parent.args
            and op.parent.parent is not None and op.parent.parent.opcode == "for"):
        lw.consume(acc)
        return x
    return _cast_copy(lw, acc, elem)


def lower_dot(lw: Lowering, op: Op) -> None:
    a, bv, acc = op.operands
    out_t = op.result.type
    assert isinstance(out_t, T.TileType)
    oe = out_t.elem
    assert isinstance(oe, T.ScalarType)
    ce = T.fp32 if oe in (T.fp16, T.bf16) or oe.is_fp8 else oe
    ash, bsh = T.shape_of(a.type), T.shape_of(bv.type)
    batch, (m, k), n = ash[:-2], ash[-2:], bsh[-1]
    A = _operand(lw, a, ce)
    B = _operand(lw, bv, ce)
    C = _accumulator(lw, op, acc, ce)
    is_float = ce.is_float
    fma = None
    if is_float:
        ty = llvm_type(ce)
        name = f"llvm.fmuladd.{S._suffix(ty)}"
        fma = lw.m.globals.get(name) or ir.Function(lw.m, ir.FunctionType(ty, [ty, ty, ty]), name)
    ty = llvm_type(ce)

    blocked = blocked_shape(m, n) if ce == T.fp32 else None

    def mm(bi: Idx) -> None:
        if blocked is not None:
            dot_blocked(lw, A, B, C, bi, m, k, n, blocked)
            return

        def row(i: ir.Value) -> None:
            def kk(kv: ir.Value) -> None:
                b = lw.b
                aik = b.load(A.addr(b, (*bi, i, kv)), typ=ty)

                def col(j: ir.Value) -> None:
                    b2 = lw.b
                    cp = C.addr(b2, (*bi, i, j))
                    bkj = b2.load(B.addr(b2, (*bi, kv, j)), typ=ty)
                    cur = b2.load(cp, typ=ty)
                    r = b2.call(fma, [aik, bkj, cur]) if fma is not None else b2.add(b2.mul(aik, bkj), cur)
                    b2.store(r, cp)

                lw.loop(n, col)

            lw.loop(k, kk)

        lw.loop(m, row)

    _nest(lw, batch, mm)
    if ce == oe:
        lw.vals[op.result] = C
    else:
        out = lw.alloc(out_t.shape, oe)
        lw.loop_nest(out_t.shape, lambda idx: lw.b.store(
            S.emit_cast(lw.b, ce, oe, lw.b.load(C.addr(lw.b, idx), typ=ty)), out.addr(lw.b, idx)))
        lw.vals[op.result] = out
