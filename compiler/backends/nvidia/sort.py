"""tl.sort on NVIDIA GPUs: the CPU backend's bitonic network, run on register tiles
(compiler/backends/tile_shape.py). A partner element comes from another register of the thread,
a warp shuffle, or shared memory, depending on which hardware bit holds its coordinate bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LinearLayout
from .. import tile_shape
from ..llvm.scalar import I32
from .convert import linear_index, smem_load, spill
from .reduce import _shfl_xor
from .tiles import GPUTile, nv_type

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_sort"]


def lower_sort(lw: NvLowering, op: Op) -> None:
    tile_shape.lower_sort(lw, op, "NVIDIA", GPUTile, lambda v, mask: _shfl_xor(lw, v, mask),
                          lambda layout, et, regs, j: _through_shared(lw, layout, layout.out_shape, et, regs, j))


def _through_shared(lw: NvLowering, layout: LinearLayout, shape: tuple[int, ...], et: T.ElemType,
                    regs: list[ir.Value], j: int) -> list[ir.Value]:
    """Each register's partner (coordinate ^ j along the last axis), read back from shared memory."""
    base = spill(lw, GPUTile(layout, regs), shape, et)
    idx = [linear_index(lw, layout, r, shape) for r in range(len(regs))]
    # the last axis has stride 1 in the row-major index, so the partner is index ^ j
    return [smem_load(lw, base, lw.b.xor(i, ir.Constant(I32, j)), nv_type(et)) for i in idx]
