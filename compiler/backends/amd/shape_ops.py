"""Shape ops on AMDGPU: join, split, cat and reshape by renaming registers; gather and sort.

The layouts are the shared ones of compiler/layouts/shape.py and the lowerings those of
compiler/backends/tile_shape.py, with this backend's wavefront of 64 lanes, its lane exchange
(ds_bpermute, reduce.py) and its LDS scratch area (convert.py):

- join adds a last dimension of size 2 held by the lowest register bit, so split of a joined
  tile, cat of two equal tiles and a power-of-two reshape move no data; a split of a tile whose
  pair is not held by one register bit converts it first (through LDS when threads must trade);
- gather spills the source to LDS (row-major) and each thread reads its elements;
- sort runs the bitonic network; a partner element comes from another register, another lane
  of the wavefront (ds_bpermute) or, across waves, LDS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LinearLayout
from ...layouts.shape import reshaped_layout
from .. import tile_shape
from ..llvm.scalar import I32
from .convert import lds_load, linear_index, move, register_map, row_major, spill
from .reduce import lane_xor
from .tiles import WAVE, GPUTile, amd_type, num_regs

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["RENAMING", "lower_gather", "lower_sort", "lower_reshape"]

# join, split, cat
RENAMING = tile_shape.renaming_ops(WAVE, GPUTile, "AMD")


# ops whose lowering takes any layout of its operand and renames registers
_RENAMING_USERS = frozenset({"split", "trans", "reshape", "expand_dims", "join"})


def lower_reshape(lw: AmdLowering, op: Op) -> None:
    """Row-major order kept. When the canonical layout of the new shape would need data moved and
    the only user only renames registers too (a split, a permute, another reshape), the
    operand's layout read as the new shape (docs/layouts.md#the-map), the registers unchanged;
    else the canonical layout, which reductions and several users want. A scalar operand splats."""
    src = op.operands[0]
    shape = T.shape_of(op.result.type)
    x = lw.vals[src]
    canonical = lw.canonical(shape)
    if not isinstance(x, GPUTile):
        lw.vals[op.result] = GPUTile(canonical, [x] * num_regs(canonical))
        return
    relabelled = reshaped_layout(x.layout, shape)
    users = lw.users.get(op.result, [])
    renamed = len(users) == 1 and users[0].opcode in _RENAMING_USERS
    if relabelled is not None and renamed and register_map(x.layout, canonical, row_major(shape)) is None:
        lw.vals[op.result] = GPUTile(relabelled, list(x.regs))
        return
    lw.vals[op.result] = move(lw, x, canonical, row_major(shape), T.elem_of(op.result.type), op)


def lower_gather(lw: AmdLowering, op: Op) -> None:
    """out[.., i, ..] = src[.., index[.., i, ..], ..] along `axis`; an index outside [0, n) gives 0."""
    tile_shape.check_gather(op, "AMD")
    src_v, idx_v = op.operands
    elem = T.elem_of(src_v.type)
    idx = lw.tile(idx_v)
    base = spill(lw, lw.tile(src_v), elem, op)
    zero = ir.Constant(amd_type(elem), None)
    lw.vals[op.result] = GPUTile(idx.layout, tile_shape.gather_regs(lw, op, idx, zero,
                                                                    lambda i: lds_load(lw, base, i, elem)))


def lower_sort(lw: AmdLowering, op: Op) -> None:
    tile_shape.lower_sort(lw, op, "AMD", GPUTile, lambda v, mask: lane_xor(lw, v, mask),
                          lambda layout, et, regs, j: _across_waves(lw, op, layout, et, regs, j))


def _across_waves(lw: AmdLowering, op: Op, layout: LinearLayout, et: T.ElemType, regs: list[ir.Value],
                  j: int) -> list[ir.Value]:
    """Each register's partner (coordinate ^ j along the last axis), read back from LDS: the last
    axis has stride 1 in the row-major index, so the partner is at index ^ j."""
    base = spill(lw, GPUTile(layout, regs), et, op)
    return [lds_load(lw, base, lw.b.xor(linear_index(lw, layout, r), ir.Constant(I32, j)), et)
            for r in range(len(regs))]
