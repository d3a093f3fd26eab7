"""tl.sort on NVIDIA GPUs: the CPU backend's bitonic network, run on register tiles.

Stage (k, j) compares elements i and i ^ j of each row (i & j == 0 the lower one), ascending
when i & k == 0 (flipped for descending), and swaps when the lower is greater (less when
descending) under the same comparison as the CPU backend, so results match it exactly (NaN
and signed zeros included). Both elements of a pair compute the same swap decision from the
same two values; the partner's value comes from another register of the thread, a warp shuffle,
or shared memory, depending on which hardware bit holds coordinate bit j.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE, REGISTER, WARP, LinearLayout
from ..llvm import scalar as S
from ..llvm.scalar import I32
from .convert import linear_index, smem_load, spill
from .reduce import _shfl_xor
from .tiles import GPUTile, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_sort"]


def _bit_owner(layout: LinearLayout, axis: int, j: int) -> tuple[str, int] | None:
    """The (in_dim, bit) whose basis is coordinate bit j of `axis` alone, if unique."""
    hits = [(name, k) for name, rows in layout.in_dims for k, b in enumerate(rows)
            if b[axis] == j and not any(v for d, v in enumerate(b) if d != axis)]
    return hits[0] if len(hits) == 1 else None


def _sortable(layout: LinearLayout, axis: int, n: int) -> bool:
    """Every coordinate bit of `axis` is one unit basis and no other basis moves along it."""
    units = 0
    for _name, rows in layout.in_dims:
        for b in rows:
            if b[axis]:
                if any(v for d, v in enumerate(b) if d != axis) or b[axis] & (b[axis] - 1):
                    return False
                units += 1
    return units == max(0, n.bit_length() - 1) and all(
        _bit_owner(layout, axis, 1 << s) is not None for s in range(n.bit_length() - 1))


def lower_sort(lw: NvLowering, op: Op) -> None:
    x_v = op.operands[0]
    shape = T.shape_of(x_v.type)
    axis = op.attrs["axis"]
    if axis != len(shape) - 1:
        raise UnsupportedError("sort along a dimension other than the last", op.loc,
                               hint="permute the tile so the sorted dimension is last")
    et = T.elem_of(x_v.type)
    n = shape[axis]
    x = lw.tile(x_v)
    if not _sortable(x.layout, axis, n):
        x = lw.tile(x_v, lw.canonical(shape))
    layout = x.layout
    if not _sortable(layout, axis, n):
        raise UnsupportedError(f"internal: no layout of {list(shape)} suits a sort", op.loc)
    desc = bool(op.attrs["descending"])
    b = lw.b
    hw = lw.hw_coords(layout)
    nregs = num_regs(layout)
    # this thread's coordinate along the axis for each register
    coord = [b.or_(hw[axis], ir.Constant(I32, reg_coords(layout, r)[axis])) for r in range(nregs)]
    regs = list(x.regs)
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            owner = _bit_owner(layout, axis, j)
            assert owner is not None
            regs = _stage(lw, layout, shape, et, regs, coord, owner, k, j, desc)
            j //= 2
        k *= 2
    lw.vals[op.result] = GPUTile(layout, regs)


def _stage(lw: NvLowering, layout: LinearLayout, shape: tuple[int, ...], et: T.ElemType, regs: list[ir.Value],
           coord: list[ir.Value], owner: tuple[str, int], k: int, j: int, desc: bool) -> list[ir.Value]:
    b = lw.b
    dim, bit = owner
    if dim == REGISTER:
        partner = [regs[r ^ (1 << bit)] for r in range(len(regs))]
    elif dim == LANE:
        partner = [_shfl_xor(lw, v, 1 << bit) for v in regs]
    else:
        assert dim == WARP
        partner = _through_shared(lw, layout, shape, et, regs, j)
    out = []
    for r, (mine, other) in enumerate(zip(regs, partner, strict=True)):
        i = coord[r]
        upper = b.icmp_unsigned("!=", b.and_(i, ir.Constant(I32, j)), ir.Constant(I32, 0))
        lo, hi = b.select(upper, other, mine), b.select(upper, mine, other)
        ascending = b.icmp_unsigned("==", b.and_(i, ir.Constant(I32, k)), ir.Constant(I32, 0))
        if desc:
            ascending = b.not_(ascending)
        swap = b.select(ascending, S.CMP(b, et, "gt", lo, hi), S.CMP(b, et, "lt", lo, hi))
        new_lo, new_hi = b.select(swap, hi, lo), b.select(swap, lo, hi)
        out.append(b.select(upper, new_hi, new_lo))
    return out


def _through_shared(lw: NvLowering, layout: LinearLayout, shape: tuple[int, ...], et: T.ElemType,
                    regs: list[ir.Value], j: int) -> list[ir.Value]:
    """Each register's partner (coordinate ^ j along the last axis), read back from shared memory."""
    base = spill(lw, GPUTile(layout, regs), shape, et)
    idx = [linear_index(lw, layout, r, shape) for r in range(len(regs))]
    # the last axis has stride 1 in the row-major index, so the partner is index ^ j
    return [smem_load(lw, base, lw.b.xor(i, ir.Constant(I32, j)), nv_type(et)) for i in idx]
