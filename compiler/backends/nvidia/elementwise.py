"""Elementwise ops on NVIDIA GPUs: applied register by register, with the GPU's own math (libdevice,
approximate instructions) and conversions, else the scalar semantics shared with the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ..llvm import scalar as S
from ..llvm.elementwise import emit_scalar_op
from ..llvm.scalar import I64
from .math import emit_gpu_cast, emit_gpu_math, libdevice_call
from .tiles import GPUTile, constant_runs, num_regs, nv_type

if TYPE_CHECKING:
    from ...layouts import LinearLayout
    from .lower import NvLowering

__all__ = ["lower_elementwise", "elementwise_regs", "scalar_op"]


def scalar_op(lw: NvLowering, op: Op, args: list[ir.Value]) -> ir.Value:
    b = lw.b
    oc = op.opcode
    if oc == "math":
        return emit_gpu_math(lw, op.attrs["fn"], T.elem_of(op.operands[0].type), args)  # type: ignore[arg-type]
    if oc == "addptr":
        pe = T.elem_of(op.operands[0].type)
        assert isinstance(pe, T.PointerType)
        off = args[1]
        oe = T.elem_of(op.operands[1].type)
        if off.type != I64:
            off = b.sext(off, I64) if isinstance(oe, T.ScalarType) and oe.is_signed else b.zext(off, I64)
        return b.gep(args[0], [off], source_etype=nv_type(pe.elem) if isinstance(pe.elem, T.ScalarType) else I64)
    if oc in ("pow", "atan2", "hypot"):
        et = T.elem_of(op.result.type)
        if isinstance(et, T.ScalarType) and et.is_float:
            return libdevice_call(lw, oc, et, args)
    if oc == "div" and T.elem_of(op.result.type) == T.fp32:
        return lw.intrinsic("llvm.nvvm.div.full", S.F32, args)
    if oc == "cast":
        r = emit_gpu_cast(lw, T.elem_of(op.operands[0].type), T.elem_of(op.result.type), args[0],
                          op.attrs.get("rounding"))
        if r is not None:
            return r

    out = emit_scalar_op(b, op, args, lw.fmf)
    if out is None:
        raise NotImplementedError(oc)
    return out


def lower_elementwise(lw: NvLowering, op: Op) -> None:
    r = op.results[0]
    if not isinstance(r.type, T.TileType):
        lw.vals[r] = scalar_op(lw, op, [lw.scalar(o) for o in op.operands])
        return
    layout = lw.layout(r)  # layout_plan.py: the operands' when they agree, else the costliest to move
    ins = [lw.tile(o, layout) for o in op.operands]
    lw.vals[r] = GPUTile(layout, elementwise_regs(lw, op, layout, lambda i: [t.regs[i] for t in ins]))


def elementwise_regs(lw: NvLowering, op: Op, layout: LinearLayout,
                     args: Callable[[int], list[ir.Value]]) -> list[ir.Value]:
    """The registers of elementwise `op`'s result in `layout`, `args(i)` the operands of register
    i; computed once per run of equal values (comparisons against multiples of the run)."""
    rep = constant_runs(lw.axis.get(op.results[0]), layout) if op.opcode in ("cmp", "and", "or") else None
    regs: list[ir.Value] = []
    for i in range(num_regs(layout)):
        regs.append(regs[rep[i]] if rep is not None and rep[i] != i else scalar_op(lw, op, args(i)))
    return regs
