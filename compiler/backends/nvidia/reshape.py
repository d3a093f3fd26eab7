"""tl.reshape on NVIDIA GPUs: a relabelling of the operand's linear layout, no data movement.

A reshape keeps the row-major order of the elements (numpy semantics). A register tile's layout
maps (register, lane, warp) bits to the bits of the row-major flattened index of the tile, one
output dimension after another (docs/layouts.md#the-map: with power-of-two sizes the tuple form and the
flat form are the same bits). Reading those flat bits back as the new shape's dimensions is
again a linear layout, in which every thread holds exactly the elements it held before, in the
same registers. So the result reuses the operand's registers as they are.

Only when the new shape is not made of powers of two (no linear layout describes it) does the
tile go through shared memory: store in the operand's layout, barrier, load in the canonical
layout of the new shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import types as T
from ...ir.core import Op
from ...layouts.shape import reshaped_layout
from .convert import through_shared
from .tiles import GPUTile, num_regs

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_reshape"]


def lower_reshape(lw: NvLowering, op: Op) -> None:
    src = op.operands[0]
    shape = T.shape_of(op.result.type)
    x = lw.vals[src]
    if not isinstance(x, GPUTile):  # a scalar operand: every element is that value
        dst = lw.layout(op.result)
        lw.vals[op.result] = GPUTile(dst, [x] * num_regs(dst))
        return
    layout = reshaped_layout(x.layout, shape)  # compiler/layouts/shape.py
    if layout is not None:
        lw.vals[op.result] = GPUTile(layout, list(x.regs))
        return

    lw.vals[op.result] = through_shared(lw, x, T.shape_of(src.type), lw.layout(op.result), T.elem_of(op.result.type))
