"""Shape ops on register tiles, shared by the GPU backends (NVIDIA, AMD).

Both backends hold a tile as a linear layout and one LLVM value per register (their `GPUTile`),
and their lowering objects answer the same questions (`RegisterTiles`). join, split and cat
rename registers under the layouts of compiler/layouts/shape.py; gather reads a copy of the
source spilled to on-chip memory; sort runs the CPU backend's bitonic network with partners
fetched from another register, another lane or on-chip memory. What differs between the
backends (the lanes of a warp, how a lane reads another lane's value, how a tile reaches shared
memory or LDS) comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from llvmlite import ir

from ..errors import UnsupportedError
from ..ir import types as T
from ..ir.core import Op, Value
from ..layouts import LANE, REGISTER, WARP, LinearLayout
from ..layouts import shape as L
from .llvm import scalar as S
from .llvm.scalar import I32, I64

__all__ = ["RegisterTiles", "renaming_ops", "lower_join", "lower_split", "lower_cat", "check_gather", "gather_regs",
           "lower_sort"]


class RegisterTiles(Protocol):
    """What the shared lowerings use of a GPU backend's lowering object."""

    vals: dict[Value, Any]
    num_warps: int

    @property
    def b(self) -> ir.IRBuilder: ...

    def tile(self, v: Value, layout: LinearLayout | None = None) -> Any: ...

    def scalar(self, v: Value) -> ir.Value: ...

    def canonical(self, shape: tuple[int, ...]) -> LinearLayout: ...

    def hw_coords(self, layout: LinearLayout) -> list[ir.Value]: ...


Tile = Callable[[LinearLayout, list[ir.Value]], Any]  # the backend's GPUTile constructor


def lower_join(lw: RegisterTiles, op: Op, lanes: int, tile: Tile) -> None:
    """join(a, b): b in a's layout, the pairs interleaved under a new register bit 0."""
    a_v, b_v = op.operands
    shape = T.shape_of(op.result.type)
    if len(shape) == 1:
        layout = L.pair_layout(None, shape, lanes, lw.num_warps)
        lw.vals[op.result] = tile(layout, [lw.scalar(a_v), lw.scalar(b_v)])
        return
    a = lw.tile(a_v)
    b = lw.tile(b_v, a.layout)
    lw.vals[op.result] = tile(L.pair_layout(a.layout, shape, lanes, lw.num_warps), L.interleave(a.regs, b.regs))


def lower_split(lw: RegisterTiles, op: Op, lanes: int, tile: Tile) -> None:
    """split(x): the registers of each half, after converting x so that one register bit alone
    holds its size-2 last dimension (a joined tile already is)."""
    x_v = op.operands[0]
    shape = T.shape_of(x_v.type)
    x = lw.tile(x_v)
    k = L.pair_bit(x.layout)
    if k is None:
        base = lw.canonical(shape[:-1]) if len(shape) > 1 else None
        x = lw.tile(x_v, L.pair_layout(base, shape, lanes, lw.num_warps))
        k = 0
    halves = L.halves(x.regs, k)
    if len(shape) == 1:
        # the only basis along the last dimension is a register bit: every thread holds both
        lw.vals[op.results[0]], lw.vals[op.results[1]] = halves[0][0], halves[1][0]
        return
    layout = L.split_layout(x.layout, k)
    for res, regs in zip(op.results, halves, strict=True):
        lw.vals[res] = tile(layout, regs)


def lower_cat(lw: RegisterTiles, op: Op, tile: Tile, backend: str) -> None:
    """Concatenation along dim 0 (in order, as the CPU backend does): with equal operand shapes
    the second tile's registers follow the first's under a new register bit for dim 0."""
    a_v, b_v = op.operands
    sa, sb = T.shape_of(a_v.type), T.shape_of(b_v.type)
    if sa != sb:
        raise UnsupportedError(f"cat of tiles of different shapes {list(sa)} and {list(sb)} is not supported by "
                               f"the {backend} backend", op.loc, hint="concatenate tiles of equal shape")
    a = lw.tile(a_v)
    b = lw.tile(b_v, a.layout)
    lw.vals[op.result] = tile(L.cat_layout(a.layout), list(a.regs) + list(b.regs))


def renaming_ops(lanes: int, tile: Tile, backend: str) -> dict[str, Callable[[Any, Op], None]]:
    """join, split and cat for a backend's lowering table, bound to its lanes per warp, its tile
    constructor and its name (for errors)."""
    return {"join": lambda lw, op: lower_join(lw, op, lanes, tile),
            "split": lambda lw, op: lower_split(lw, op, lanes, tile),
            "cat": lambda lw, op: lower_cat(lw, op, tile, backend)}


def check_gather(op: Op, backend: str) -> None:
    """The index may exceed the source only along the gather axis."""
    src_shape, out_shape = T.shape_of(op.operands[0].type), T.shape_of(op.operands[1].type)
    for d, (s, i) in enumerate(zip(src_shape, out_shape, strict=True)):
        if d != op.attrs["axis"] and i > s:
            raise UnsupportedError(f"gather: the index has size {i} in dimension {d}, larger than the source's {s} "
                                   f"(the {backend} backend)", op.loc,
                                   hint="the index may only differ from the source along the gather axis")


def gather_regs(lw: RegisterTiles, op: Op, idx: Any, zero: ir.Value,
                load: Callable[[ir.Value], ir.Value]) -> list[ir.Value]:
    """out[.., i, ..] = src[.., index[.., i, ..], ..] along the op's axis, in the index tile's
    layout; an index outside [0, n) gives `zero`. `load(i)` reads element i (i32, row-major) of
    the source's copy in on-chip memory."""
    src_shape = T.shape_of(op.operands[0].type)
    ax = op.attrs["axis"]
    ie = T.elem_of(op.operands[1].type)
    assert isinstance(ie, T.ScalarType)
    b = lw.b
    hw = lw.hw_coords(idx.layout)
    regs = []
    for r, iv in enumerate(idx.regs):
        rc = idx.layout.apply({REGISTER: r})
        wide = iv if iv.type == I64 else (b.sext(iv, I64) if ie.is_signed else b.zext(iv, I64))
        bad = b.icmp_unsigned(">=", wide, ir.Constant(I64, src_shape[ax]))
        safe = b.select(bad, ir.Constant(I32, 0), b.trunc(wide, I32))
        lin: ir.Value = ir.Constant(I32, 0)
        stride = 1
        for d in reversed(range(len(src_shape))):
            c = safe if d == ax else (b.xor(hw[d], ir.Constant(I32, rc[d])) if rc[d] else hw[d])
            lin = b.add(lin, b.mul(c, ir.Constant(I32, stride)) if stride != 1 else c)
            stride *= src_shape[d]
        regs.append(b.select(bad, zero, load(lin)))
    return regs


def _sort_operand(lw: RegisterTiles, op: Op, backend: str) -> Any:
    """The operand of a sort in a layout where every coordinate bit of the last axis is one
    register, lane or warp bit (its own when it is, else the canonical one)."""
    x_v = op.operands[0]
    shape = T.shape_of(x_v.type)
    axis = op.attrs["axis"]
    if axis != len(shape) - 1:
        raise UnsupportedError(f"sort along a dimension other than the last (the {backend} backend)", op.loc,
                               hint="permute the tile so the sorted dimension is last")
    x = lw.tile(x_v)
    if not L.sortable(x.layout, axis, shape[axis]):
        x = lw.tile(x_v, lw.canonical(shape))
    if not L.sortable(x.layout, axis, shape[axis]):
        raise UnsupportedError(f"internal: no layout of {list(shape)} suits a sort", op.loc)
    return x


def lower_sort(lw: RegisterTiles, op: Op, backend: str, tile: Tile, lane_xor: Callable[[ir.Value, int], ir.Value],
               across_warps: Callable[[LinearLayout, T.ElemType, list[ir.Value], int], list[ir.Value]]) -> None:
    """tl.sort along the last axis (`sort_regs`). `lane_xor(v, mask)` is the value v of lane
    (this lane ^ mask); `across_warps(layout, elem, regs, j)` each register's partner at
    coordinate ^ j along the last axis, held by another warp (through on-chip memory)."""
    x = _sort_operand(lw, op, backend)
    layout = x.layout
    et = T.elem_of(op.operands[0].type)

    def partner(dim: str, bit: int, regs: list[ir.Value], j: int) -> list[ir.Value]:
        if dim == LANE:
            return [lane_xor(v, 1 << bit) for v in regs]
        return across_warps(layout, et, regs, j)

    lw.vals[op.result] = tile(layout, sort_regs(lw, layout, et, list(x.regs), bool(op.attrs["descending"]), partner))


# partner(in_dim, bit, regs, j): each register's partner element (coordinate ^ j along the last
# axis), held by another lane (in_dim LANE, lane bit `bit`) or another warp (WARP)
Partner = Callable[[str, int, list[ir.Value], int], list[ir.Value]]


def sort_regs(lw: RegisterTiles, layout: LinearLayout, et: T.ElemType, regs: list[ir.Value], desc: bool,
              partner: Partner) -> list[ir.Value]:
    """The bitonic network along the last axis. Stage (k, j) compares elements i and i ^ j of each
    row (i & j == 0 the lower one), ascending when i & k == 0 (flipped for descending), and swaps
    when the lower is greater (less when descending) under the CPU backend's comparison, so the
    results match it exactly (NaN and signed zeros included). Both elements of a pair compute the
    same decision from the same two values."""
    b = lw.b
    axis = len(layout.out_dims) - 1
    n = layout.out_shape[axis]
    hw = lw.hw_coords(layout)
    # this thread's coordinate along the axis for each register
    coord = [b.or_(hw[axis], ir.Constant(I32, layout.apply({REGISTER: r})[axis])) for r in range(len(regs))]
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            owner = L.bit_owner(layout, axis, j)
            assert owner is not None
            dim, bit = owner
            if dim == REGISTER:
                other = [regs[r ^ (1 << bit)] for r in range(len(regs))]
            else:
                assert dim in (LANE, WARP)
                other = partner(dim, bit, regs, j)
            regs = [_compare_exchange(b, et, mine, o, i, k, j, desc) for mine, o, i in zip(regs, other, coord,
                                                                                            strict=True)]
            j //= 2
        k *= 2
    return regs


def _compare_exchange(b: ir.IRBuilder, et: T.ElemType, mine: ir.Value, other: ir.Value, i: ir.Value, k: int, j: int,
                      desc: bool) -> ir.Value:
    upper = b.icmp_unsigned("!=", b.and_(i, ir.Constant(I32, j)), ir.Constant(I32, 0))
    lo, hi = b.select(upper, other, mine), b.select(upper, mine, other)
    ascending = b.icmp_unsigned("==", b.and_(i, ir.Constant(I32, k)), ir.Constant(I32, 0))
    if desc:
        ascending = b.not_(ascending)
    swap = b.select(ascending, S.CMP(b, et, "gt", lo, hi), S.CMP(b, et, "lt", lo, hi))
    new_lo, new_hi = b.select(swap, hi, lo), b.select(swap, lo, hi)
    return b.select(upper, new_hi, new_lo)
