"""Rematerialization: recompute a cheap tile directly in the layout a consumer needs instead of
moving it through shared memory.

Index arithmetic and masks (`arange`, splats, `expand_dims`, broadcasts, integer arithmetic,
comparisons) are cheaper to recompute per thread than to convert: a conversion through shared
memory costs two barriers. A value qualifies when every op it depends on (up to a size limit)
is such a cheap elementwise or shape op; loads, reductions, dots and control flow never do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op, Value
from ...ir.ops import ELEMENTWISE, SPECS
from ...layouts import LinearLayout, dim_names
from ..llvm.scalar import I32
from .elementwise import elementwise_regs
from .tiles import GPUTile, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["rematerialize", "collapse", "lower_broadcast", "is_cheap", "consumer_layout"]

# elementwise ops the op table does not mark expensive (div, pow, math, ...), but for loads and constants
_CHEAP = frozenset(n for n in ELEMENTWISE if not SPECS[n].expensive) - {"load", "constant"}
_LIMIT = 48  # ops recomputed at most per conversion


def _constant(v: Value) -> bool:
    """A compile-time constant, as a scalar or splat into a tile."""
    op = v.op
    while op is not None and op.opcode == "splat":
        op = op.operands[0].op
    return op is not None and op.opcode == "constant"


def _cheap_op(op: Op) -> bool:
    """Cheap to recompute: the ops of _CHEAP, and integer division by a constant (shifts and
    multiplies, e.g. a warp index // warps per row)."""
    if op.opcode == "div":
        elem = T.elem_of(op.result.type)
        return isinstance(elem, T.ScalarType) and elem.is_int and _constant(op.operands[1])
    return op.opcode in _CHEAP


def collapse(layout: LinearLayout, dims: set[int]) -> LinearLayout:
    """`layout` with the output dims in `dims` shrunk to size 1 (their components zeroed)."""
    shape = layout.out_shape
    bases = {name: [tuple(0 if d in dims else c for d, c in enumerate(b)) for b in rows]
             for name, rows in layout.in_dims}
    sizes = {n: (1 if d in dims else s) for d, (n, s) in enumerate(zip(dim_names(len(shape)), shape, strict=True))}
    return LinearLayout.from_bases(bases, sizes)


def _drop(layout: LinearLayout, axis: int) -> LinearLayout:
    """The layout of `expand_dims`' source: `layout` (size 1 along `axis`) without that dim."""
    shape = layout.out_shape
    bases = {name: [b[:axis] + b[axis + 1:] for b in rows] for name, rows in layout.in_dims}
    rest = shape[:axis] + shape[axis + 1:]
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(rest)), rest, strict=True)))


def _cost(v: Value, seen: set[Value]) -> int:
    """Ops to recompute for `v`, or a number above the limit when it cannot be recomputed."""
    if v in seen or not isinstance(v.type, T.TileType):
        return 0
    seen.add(v)
    op = v.op
    if op is None or not _cheap_op(op) or len(op.results) != 1:
        return _LIMIT + 1
    total = 1
    for o in op.operands:
        total += _cost(o, seen)
        if total > _LIMIT:
            break
    return total


def _emit(lw: NvLowering, v: Value, layout: LinearLayout, memo: dict[tuple[Value, LinearLayout], GPUTile]) -> GPUTile:
    hit = memo.get((v, layout))
    if hit is not None:
        return hit
    have = lw.vals.get(v)
    if isinstance(have, GPUTile) and have.layout == layout:
        return have
    op = v.op
    assert op is not None
    b = lw.b
    n = num_regs(layout)
    oc = op.opcode
    if oc == "splat":
        out = GPUTile(layout, [lw.scalar(op.operands[0])] * n)
    elif oc == "make_range":
        hw = lw.hw_coords(layout)[0]
        start = op.attrs["start"]
        base = b.add(hw, ir.Constant(I32, start)) if start else hw
        out = GPUTile(layout, [b.add(base, ir.Constant(I32, reg_coords(layout, r)[0])) for r in range(n)])
    elif oc == "expand_dims":
        src = _emit(lw, op.operands[0], _drop(layout, op.attrs["axis"]), memo)
        out = GPUTile(layout, list(src.regs))
    elif oc == "broadcast":
        sshape, shape = T.shape_of(op.operands[0].type), T.shape_of(op.result.type)
        dims = {d for d, (s, t) in enumerate(zip(sshape, shape, strict=True)) if s == 1 and t != 1}
        src = _emit(lw, op.operands[0], collapse(layout, dims) if dims else layout, memo)
        out = GPUTile(layout, list(src.regs))
    else:
        ins = [_emit(lw, o, layout, memo) if isinstance(o.type, T.TileType) else None for o in op.operands]
        out = GPUTile(layout, elementwise_regs(lw, op, layout, lambda i: [
            t.regs[i] if t is not None else lw.scalar(o) for t, o in zip(ins, op.operands, strict=True)]))
    memo[(v, layout)] = out
    return out


def is_cheap(v: Value) -> bool:
    """True when `v` can be recomputed in another layout instead of converted."""
    return _cost(v, set()) <= _LIMIT


def rematerialize(lw: NvLowering, v: Value, layout: LinearLayout) -> GPUTile | None:
    """`v` recomputed in `layout`, or None when that is not cheap."""
    if _cost(v, set()) > _LIMIT:
        return None
    return _emit(lw, v, layout, {})


def lower_broadcast(lw: NvLowering, op: Op) -> None:
    """Broadcast size-1 dims: the source in the destination layout with those dims collapsed,
    so each thread already holds what it repeats (recomputed or converted as needed)."""
    src = op.operands[0]
    x = lw.vals[src]
    shape = T.shape_of(op.result.type)
    dst = lw.layout(op.result)  # layout_plan.py: that of the expensive tile it is combined with
    if not isinstance(x, GPUTile):
        lw.vals[op.result] = GPUTile(dst, [x] * num_regs(dst))
        return
    sshape = T.shape_of(src.type)
    dims = {d for d, (s, t) in enumerate(zip(sshape, shape, strict=True)) if s == 1 and t != 1}
    if not dims:
        lw.vals[op.result] = GPUTile(dst, list(lw.tile(src, dst).regs))
        return
    src_tile = lw.tile(src, collapse(dst, dims))
    lw.vals[op.result] = GPUTile(dst, list(src_tile.regs))


def consumer_layout(op: Op, layout_of: Callable[[Value], LinearLayout | None]) -> LinearLayout | None:
    """The layout of an already lowered, expensive operand that the broadcast result is combined
    with elementwise further down the block (e.g. `acc * alpha[:, None]` with `acc` a dot's
    accumulator): broadcasting straight into it spares converting the big operand."""
    block = op.parent
    if block is None:
        return None
    shape = T.shape_of(op.result.type)
    start = block.ops.index(op)
    for user in block.ops[start + 1:]:
        if op.result not in user.operands or not _cheap_op(user):
            continue
        for o in user.operands:
            t = layout_of(o)  # None: not planned yet (defined after op) or not in registers
            if o is not op.result and t is not None and t.out_shape == shape and not is_cheap(o):
                return t
    return None
