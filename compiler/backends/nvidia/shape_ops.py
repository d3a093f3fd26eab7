"""Shape ops on NVIDIA GPUs: join, split and cat by renaming registers, gather through shared memory.

join adds a last dimension of size 2 held by the lowest register bit (a thread holds both halves
of each pair), so split of a joined tile, and cat of two equal tiles, move no data. When a layout
does not allow that, the operand is first converted (convert.py; through shared memory if needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...layouts import LANE, REGISTER, WARP, LinearLayout, dim_names
from ..llvm.scalar import I32, I64
from .convert import smem_load, spill
from .tiles import GPUTile, num_regs, nv_type, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_join", "lower_split", "lower_cat", "lower_gather", "pair_layout"]


def _make(bases: dict[str, list[tuple[int, ...]]], shape: tuple[int, ...]) -> LinearLayout:
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))


def pair_layout(lw: NvLowering, base: LinearLayout | None, shape: tuple[int, ...]) -> LinearLayout:
    """`base` (the layout of shape[:-1]; None for a pair of scalars) with a new last dimension of
    size 2 held by register bit 0. Without a base, every thread holds both elements."""
    unit = (*([0] * (len(shape) - 1)), 1)
    if base is None:
        warps = max(0, lw.num_warps.bit_length() - 1)
        return _make({REGISTER: [unit], LANE: [(0,)] * 5, WARP: [(0,)] * warps}, shape)
    bases: dict[str, list[tuple[int, ...]]] = {}
    for name, rows in base.in_dims:
        ext = [(*b, 0) for b in rows]
        bases[name] = [unit, *ext] if name == REGISTER else ext
    return _make(bases, shape)


def _pair_bit(layout: LinearLayout) -> int | None:
    """The register bit holding the size-2 last dimension when it is the only basis touching that
    dimension (so the two halves are separate registers of the same thread); else None."""
    found = None
    rank = len(layout.out_dims)
    for name, rows in layout.in_dims:
        for k, b in enumerate(rows):
            if not b[rank - 1]:
                continue
            if name != REGISTER or any(b[:-1]) or found is not None:
                return None
            found = k
    return found


def lower_join(lw: NvLowering, op: Op) -> None:
    a_v, b_v = op.operands
    shape = T.shape_of(op.result.type)
    if len(shape) == 1:
        layout = pair_layout(lw, None, shape)
        lw.vals[op.result] = GPUTile(layout, [lw.scalar(a_v), lw.scalar(b_v)])
        return
    a = lw.tile(a_v)
    b = lw.tile(b_v, a.layout)
    regs: list[ir.Value] = []
    for x, y in zip(a.regs, b.regs, strict=True):
        regs += [x, y]
    lw.vals[op.result] = GPUTile(pair_layout(lw, a.layout, shape), regs)


def lower_split(lw: NvLowering, op: Op) -> None:
    x_v = op.operands[0]
    shape = T.shape_of(x_v.type)
    x = lw.tile(x_v)
    k = _pair_bit(x.layout)
    if k is None:
        base = lw.canonical(shape[:-1]) if len(shape) > 1 else None
        x = lw.tile(x_v, pair_layout(lw, base, shape))
        k = 0
    halves = [[x.regs[r] for r in range(num_regs(x.layout)) if (r >> k) & 1 == h] for h in (0, 1)]
    if len(shape) == 1:
        # the only basis along the last dimension is a register bit: every thread holds both
        lw.vals[op.results[0]], lw.vals[op.results[1]] = halves[0][0], halves[1][0]
        return
    bases = {name: [b[:-1] for i, b in enumerate(rows) if not (name == REGISTER and i == k)]
             for name, rows in x.layout.in_dims}
    layout = _make(bases, shape[:-1])
    for res, regs in zip(op.results, halves, strict=True):
        lw.vals[res] = GPUTile(layout, regs)


def lower_cat(lw: NvLowering, op: Op) -> None:
    """Concatenation along dim 0 (in order, as the CPU backend does): with equal operand shapes
    the second tile's registers follow the first's under a new register bit for dim 0."""
    a_v, b_v = op.operands
    sa, sb = T.shape_of(a_v.type), T.shape_of(b_v.type)
    shape = T.shape_of(op.result.type)
    if sa != sb:
        raise UnsupportedError(f"cat of tiles of different shapes {list(sa)} and {list(sb)} is not supported by "
                               "the NVIDIA backend", op.loc, hint="concatenate tiles of equal shape")
    a = lw.tile(a_v)
    b = lw.tile(b_v, a.layout)
    hi = (sa[0], *([0] * (len(sa) - 1)))
    bases = {name: [*rows, hi] if name == REGISTER else list(rows) for name, rows in a.layout.in_dims}
    lw.vals[op.result] = GPUTile(_make(bases, shape), list(a.regs) + list(b.regs))


def lower_gather(lw: NvLowering, op: Op) -> None:
    """out[.., i, ..] = src[.., index[.., i, ..], ..] along `axis`; an index outside [0, n) gives 0.

    The source goes to shared memory (row-major); each thread then reads its elements."""
    src_v, idx_v = op.operands
    ax = op.attrs["axis"]
    src_shape, out_shape = T.shape_of(src_v.type), T.shape_of(idx_v.type)
    for d, (s, i) in enumerate(zip(src_shape, out_shape, strict=True)):
        if d != ax and i > s:
            raise UnsupportedError(f"gather: the index has size {i} in dimension {d}, larger than the source's {s}",
                                   op.loc, hint="the index may only differ from the source along the gather axis")
    elem = T.elem_of(src_v.type)
    ie = T.elem_of(idx_v.type)
    assert isinstance(ie, T.ScalarType)
    ty = nv_type(elem)
    src = lw.tile(src_v)
    idx = lw.tile(idx_v)
    b = lw.b
    base = spill(lw, src, src_shape, elem)
    hw = lw.hw_coords(idx.layout)
    zero = ir.Constant(ty, None)
    regs = []
    for r, iv in enumerate(idx.regs):
        rc = reg_coords(idx.layout, r)
        wide = iv if iv.type == I64 else (b.sext(iv, I64) if ie.is_signed else b.zext(iv, I64))
        bad = b.icmp_unsigned(">=", wide, ir.Constant(I64, src_shape[ax]))
        safe = b.select(bad, ir.Constant(I32, 0), b.trunc(wide, I32))
        lin: ir.Value = ir.Constant(I32, 0)
        stride = 1
        for d in reversed(range(len(src_shape))):
            c = safe if d == ax else (b.or_(hw[d], ir.Constant(I32, rc[d])) if rc[d] else hw[d])
            lin = b.add(lin, b.mul(c, ir.Constant(I32, stride)) if stride != 1 else c)
            stride *= src_shape[d]
        v = smem_load(lw, base, lin, ty)
        regs.append(b.select(bad, zero, v))
    lw.vals[op.result] = GPUTile(idx.layout, regs)
