"""The NVIDIA lowering table: one function per Tile IR op (register by register)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ...ir.core import Op
from ...ir.ops import ELEMENTWISE_COMPUTE
from ..llvm import scalar as S
from ..llvm.scalar import I1, I32
from . import async_copy, control, debug, histogram, inline_asm, memory, shape_ops, sort
from .dot import lower_dot
from .elementwise import lower_elementwise
from .reduce import lower_reduce
from .remat import lower_broadcast
from .reshape import lower_reshape
from .scan import lower_scan
from .tiles import GPUTile, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["lower_op", "LOWER"]


def lower_op(lw: NvLowering, op: Op) -> None:
    fn = LOWER.get(op.opcode)
    if fn is None:
        if op.opcode in ELEMENTWISE_COMPUTE:
            return lower_elementwise(lw, op)
        raise UnsupportedError(f"{op.opcode} is not supported by the NVIDIA backend yet", op.loc,
                               hint="run on CPU tensors (the CPU backend supports it)")
    fn(lw, op)


def _constant(lw: NvLowering, op: Op) -> None:
    t = op.result.type
    assert isinstance(t, T.ScalarType)
    lw.vals[op.result] = S.const(t, op.attrs["value"])


def _pid(lw: NvLowering, op: Op) -> None:
    lw.vals[op.result] = lw.pid[op.attrs["axis"]]


def _nprog(lw: NvLowering, op: Op) -> None:
    lw.vals[op.result] = lw.nprog[op.attrs["axis"]]


def _make_range(lw: NvLowering, op: Op) -> None:
    layout = lw.layout(op.result)
    hw = lw.hw_coords(layout)[0]
    start = op.attrs["start"]
    b = lw.b
    base = b.add(hw, ir.Constant(I32, start)) if start else hw
    regs = [b.add(base, ir.Constant(I32, reg_coords(layout, r)[0])) for r in range(num_regs(layout))]
    lw.vals[op.result] = GPUTile(layout, regs)


def _splat(lw: NvLowering, op: Op) -> None:
    layout = lw.layout(op.result)
    lw.vals[op.result] = GPUTile(layout, [lw.scalar(op.operands[0])] * num_regs(layout))


def _expand_dims(lw: NvLowering, op: Op) -> None:
    x = lw.vals[op.operands[0]]
    layout = lw.layout(op.result)  # x's bases with 0 along the new axis (layout_plan.expanded_layout)
    lw.vals[op.result] = GPUTile(layout, list(x.regs) if isinstance(x, GPUTile) else [x] * num_regs(layout))


def _trans(lw: NvLowering, op: Op) -> None:

    x = lw.tile(op.operands[0])
    # the same registers, the output dims permuted (layout_plan.permuted_layout)
    lw.vals[op.result] = GPUTile(lw.layout(op.result), list(x.regs))


def _noop(lw: NvLowering, op: Op) -> None:
    return None


def _barrier(lw: NvLowering, op: Op) -> None:
    lw.barrier()


def _shared_alloc(lw: NvLowering, op: Op) -> None:
    """tl.extra.cuda.shared_memory: the address of the region NvLowering placed for this op."""
    offset = lw.held[op]
    base = lw.scratch_base()
    lw.vals[op.result] = lw.entry.add(base, ir.Constant(I32, offset)) if offset else base


LOWER: dict[str, Callable[[NvLowering, Op], None]] = {
    "constant": _constant,
    "program_id": _pid,
    "num_programs": _nprog,
    "shared_alloc": _shared_alloc,
    "make_range": _make_range,
    "splat": _splat,
    "expand_dims": _expand_dims,
    "broadcast": lower_broadcast,
    "reshape": lower_reshape,
    "trans": _trans,
    "load": memory.lower_load,
    "store": memory.lower_store,
    "atomic_rmw": memory.lower_atomic_rmw,
    "atomic_cas": memory.lower_atomic_cas,
    "for": control.lower_for,
    "if": control.lower_if,
    "while": control.lower_while,
    "reduce": lower_reduce,
    "scan": lower_scan,
    "dot": lower_dot,
    "assume": _noop,
    "barrier": _barrier,
    **shape_ops.RENAMING,
    "gather": shape_ops.lower_gather,
    "histogram": histogram.lower_histogram,
    "sort": sort.lower_sort,
    "print": debug.lower_print,
    "assert": debug.lower_assert,
    "inline_asm": inline_asm.lower_inline_asm,
    "async_copy": async_copy.lower_async_copy,
    "async_wait": async_copy.lower_async_wait,
    "async_drain": async_copy.lower_async_drain,
}

_ = (I1,)
