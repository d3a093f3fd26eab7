"""One pure elementwise Tile IR op applied to scalar LLVM values: the dispatch every LLVM backend
shares (the CPU per vector lane, the GPUs per register). A backend passes what differs: its math
functions and the LLVM type a pointer's element is addressed as."""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from . import scalar as S
from .scalar import I64, llvm_type

__all__ = ["emit_scalar_op", "MathFn", "Pointee"]

MathFn = Callable[[str, T.ScalarType, list[ir.Value]], ir.Value]  # (name, element type, arguments)
Pointee = Callable[[T.ElemType], ir.Type]  # the LLVM type a pointer to this element steps over


def _pointee(elem: T.ElemType) -> ir.Type:
    return S.PTR if isinstance(elem, T.PointerType) else llvm_type(elem)


def emit_scalar_op(b: ir.IRBuilder, op: Op, args: list[ir.Value], fmf: tuple[str, ...] = (),
                   math: MathFn | None = None, pointee: Pointee = _pointee) -> ir.Value | None:
    """`op` (binary arithmetic, cmp, select, math, cast, bitcast, addptr) on its operands' values
    `args`; `fmf`: fast-math flags for float arithmetic. None for an op it does not cover."""
    oc = op.opcode
    if oc in S.BINARY:
        attrs = dict(op.attrs)
        if fmf:
            attrs["_fmf"] = fmf
        return S.BINARY[oc](b, T.elem_of(op.operands[0].type), args[0], args[1], attrs)  # type: ignore[arg-type]
    if oc == "cmp":
        return S.CMP(b, T.elem_of(op.operands[0].type), op.attrs["pred"], args[0], args[1])
    if oc == "select":
        return b.select(args[0], args[1], args[2])
    if oc == "math":
        et = T.elem_of(op.operands[0].type)
        assert isinstance(et, T.ScalarType)
        if math is not None:
            return math(op.attrs["fn"], et, args)
        return S.emit_math(b, op.attrs["fn"], et, args)
    if oc == "cast":
        return S.emit_cast(b, T.elem_of(op.operands[0].type), T.elem_of(op.result.type), args[0],
                           op.attrs.get("rounding"))
    if oc == "bitcast":
        return S.emit_bitcast(b, T.elem_of(op.operands[0].type), T.elem_of(op.result.type), args[0])
    if oc == "addptr":
        pe = T.elem_of(op.operands[0].type)
        assert isinstance(pe, T.PointerType)
        off = args[1]
        if off.type != I64:
            oe = T.elem_of(op.operands[1].type)
            off = b.sext(off, I64) if isinstance(oe, T.ScalarType) and oe.is_signed else b.zext(off, I64)
        return b.gep(args[0], [off], source_etype=pointee(pe.elem))
    return None
