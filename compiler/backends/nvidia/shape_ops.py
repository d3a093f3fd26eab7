"""Shape ops on NVIDIA GPUs: join, split and cat by renaming registers, gather through shared memory.

join adds a last dimension of size 2 held by the lowest register bit (a thread holds both halves
of each pair), so split of a joined tile, and cat of two equal tiles, move no data. When a layout
does not allow that, the operand is first converted (convert.py; through shared memory if needed).
The lowerings are the GPU backends' shared ones (compiler/backends/tile_shape.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from .. import tile_shape
from .convert import smem_load, spill
from .tiles import GPUTile, nv_type

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["RENAMING", "lower_gather"]

# join, split, cat: 32 lanes per warp
RENAMING = tile_shape.renaming_ops(32, GPUTile, "NVIDIA")


def lower_gather(lw: NvLowering, op: Op) -> None:
    """out[.., i, ..] = src[.., index[.., i, ..], ..] along `axis`; an index outside [0, n) gives 0.

    The source goes to shared memory (row-major); each thread then reads its elements."""
    tile_shape.check_gather(op, "NVIDIA")
    src_v, idx_v = op.operands
    elem = T.elem_of(src_v.type)
    ty = nv_type(elem)
    src = lw.tile(src_v)
    idx = lw.tile(idx_v)
    base = spill(lw, src, T.shape_of(src_v.type), elem)
    regs = tile_shape.gather_regs(lw, op, idx, ir.Constant(ty, None), lambda i: smem_load(lw, base, i, ty))
    lw.vals[op.result] = GPUTile(idx.layout, regs)
