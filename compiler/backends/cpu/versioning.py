"""Masks known true for a whole block, checked in O(1) before a loop (CPU backend).

A load or store masked by `offsets < n` is true everywhere in all but the last block of a
typical grid. masked_loop_nest (lower.py) emits the loop twice, the copy with those masks taken as
true running when `all_true` says so: plain vector loads and stores instead of masked ones (on
x86 without AVX-512, vmaskmov: a masked add ran at 0.6x the unmasked one's speed).

all_true recognizes masks built from comparisons of an index expression with a value that does
not depend on the index (`rows[:, None] < M`, `offs + 1 <= n`, `cols >= lo`), joined by `&`: an
index expression (ranges, splats, broadcasts, expand_dims, sums and differences of those, products
with constants, widening integer casts) is monotone in each index, so its extreme over the block is
at a corner, and the comparison holds everywhere iff it holds there. The corner pair is also
checked to be in order, so an expression that wraps around within the block is not trusted.
Anything else: None (the loop keeps its masks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Value
from ..llvm import scalar as S
from ..llvm.scalar import I1, I64

if TYPE_CHECKING:
    from .lower import Lowering

__all__ = ["all_true"]

Dirs = tuple[int, ...]  # per dim of a tile: +1 non-decreasing, -1 non-increasing, 0 constant along it
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def all_true(lw: Lowering, mask: Value) -> ir.Value | None:
    """An i1 that is true only if `mask` is true at every index of its tile; None: not recognized."""
    saved, lw.memo = lw.memo, {}
    try:
        return _all_true(lw, mask)
    finally:
        lw.memo = saved


def _lazy_op(lw: Lowering, v: Value) -> object | None:
    x = lw.vals.get(v)
    return x[0] if isinstance(x, tuple) else None


def _all_true(lw: Lowering, mask: Value) -> ir.Value | None:
    x = lw.vals.get(mask)
    if isinstance(x, ir.Value):  # a scalar condition
        return x if x.type == I1 else None
    op = _lazy_op(lw, mask)
    if op is None:
        return None
    oc = op.opcode  # type: ignore[attr-defined]
    if oc == "and":
        a, b = (_all_true(lw, o) for o in op.operands)  # type: ignore[attr-defined]
        return lw.b.and_(a, b) if a is not None and b is not None else None
    if oc in ("splat", "broadcast", "expand_dims"):  # the same values, repeated
        inner = op.operands[0]  # type: ignore[attr-defined]
        return _all_true(lw, inner)
    if oc != "cmp" or op.attrs["pred"] not in _FLIP:  # type: ignore[attr-defined]
        return None
    x_v, y_v = op.operands  # type: ignore[attr-defined]
    et = T.elem_of(x_v.type)
    if not (isinstance(et, T.ScalarType) and et.is_int):
        return None
    pred = op.attrs["pred"]  # type: ignore[attr-defined]
    dx, dy = _dirs(lw, x_v), _dirs(lw, y_v)
    if dx is None or dy is None:
        return None
    if any(dx) and any(dy):
        return None
    if any(dy):  # index on the right: n > offs is offs < n
        x_v, y_v, dx, dy, pred = y_v, x_v, dy, dx, _FLIP[pred]
    shape = T.shape_of(x_v.type)
    lo = tuple(ir.Constant(I64, (n - 1) if d < 0 else 0) for n, d in zip(shape, dx, strict=True))
    hi = tuple(ir.Constant(I64, (n - 1) if d > 0 else 0) for n, d in zip(shape, dx, strict=True))
    b = lw.b
    x_lo, x_hi = lw.ev(x_v, lo), lw.ev(x_v, hi)
    y = lw.ev(y_v, lo)
    extreme = x_hi if pred in ("lt", "le") else x_lo  # the largest value must be under y, the smallest over
    ordered = S.CMP(b, et, "le", x_lo, x_hi)  # no wrap-around within the block
    return b.and_(ordered, S.CMP(b, et, pred, extreme, y))


def _dirs(lw: Lowering, v: Value) -> Dirs | None:
    """How the integer expression `v` moves along each dim of its tile; None: unknown."""
    x = lw.vals.get(v)
    if isinstance(x, ir.Value):
        return ()
    rank = len(T.shape_of(v.type))
    op = _lazy_op(lw, v)
    if op is None:
        return None
    oc = op.opcode  # type: ignore[attr-defined]
    ops = op.operands  # type: ignore[attr-defined]
    if oc in ("splat", "constant"):
        return (0,) * rank
    if oc == "make_range":
        return (1,)
    if oc == "broadcast":
        inner = _dirs(lw, ops[0])
        return None if inner is None else tuple(d if s > 1 else 0 for d, s in
                                                 zip(inner, T.shape_of(ops[0].type), strict=True))
    if oc == "expand_dims":
        inner = _dirs(lw, ops[0])
        ax = op.attrs["axis"]  # type: ignore[attr-defined]
        return None if inner is None else inner[:ax] + (0,) + inner[ax:]
    if oc == "cast":
        src, dst = T.elem_of(ops[0].type), T.elem_of(v.type)
        if (isinstance(src, T.ScalarType) and isinstance(dst, T.ScalarType) and src.is_int and dst.is_int
                and dst.bits >= src.bits and src.is_signed == dst.is_signed):
            return _dirs(lw, ops[0])
        return None
    if oc in ("add", "sub"):
        a, c = _dirs(lw, ops[0]), _dirs(lw, ops[1])
        if a is None or c is None:
            return None
        a, c = _widen(a, rank), _widen(c, rank)
        if oc == "sub":
            c = tuple(-d for d in c)
        out = []
        for p, q in zip(a, c, strict=True):
            if p and q and p != q:
                return None
            out.append(p or q)
        return tuple(out)
    if oc == "mul":
        for k in (0, 1):
            sign = _constant_sign(lw, ops[1 - k])
            d = _dirs(lw, ops[k])
            if sign is not None and d is not None:
                return tuple(sign * e for e in _widen(d, rank))
        return None
    return None


def _widen(d: Dirs, rank: int) -> Dirs:
    return d if len(d) == rank else (0,) * rank  # a scalar operand: constant along every dim


def _constant_sign(lw: Lowering, v: Value) -> int | None:
    x = lw.vals.get(v)
    if isinstance(x, ir.Constant) and isinstance(x.constant, int):
        return (x.constant > 0) - (x.constant < 0)
    op = _lazy_op(lw, v)
    if op is not None and op.opcode == "splat":  # type: ignore[attr-defined]
        return _constant_sign(lw, op.operands[0])  # type: ignore[attr-defined]
    if op is not None and op.opcode == "constant":  # type: ignore[attr-defined]
        c = op.attrs.get("value")  # type: ignore[attr-defined]
        return (c > 0) - (c < 0) if isinstance(c, int) else None
    return None
