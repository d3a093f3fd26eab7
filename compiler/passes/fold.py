"""Constant folding and canonicalization of scalar arithmetic on constants (each opcode's folding
function is its `fold` in the op table, ir/ops.py; the identities x + 0, x * 1 are here)."""

from __future__ import annotations

from typing import Any

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value
from ..ir.folding import round_float, wrap
from ..ir.ops import SPECS
from .uses import replace_all_uses

__all__ = ["fold"]


def _const(op: Op | None) -> Any:
    if op is not None and op.opcode == "constant":
        return op.attrs["value"]
    return None


def _fold_block(block: Block, mapping: dict[Value, Value]) -> None:
    for op in block.ops:
        op.operands = [mapping.get(v, v) for v in op.operands]
        for region in op.regions:
            _fold_block(region, mapping)
        if len(op.results) != 1:
            continue
        if isinstance(op.result.type, T.TileType):
            _fold_tile_identity(op, mapping)
            continue
        t = op.result.type
        if not isinstance(t, T.ScalarType):
            continue
        vals = [_const(v.op) for v in op.operands]
        folder = SPECS[op.opcode].fold if op.opcode in SPECS else None
        if folder is not None and None not in vals:
            r = folder(t, vals[0], vals[1])
            if r is not None:
                op.opcode, op.operands, op.attrs = "constant", [], {"value": r}
            continue
        identity_rhs = (op.opcode in ("add", "sub") and vals[1] == 0) or (op.opcode == "mul" and vals[1] == 1)
        if identity_rhs and not t.is_float:
            mapping[op.result] = op.operands[0]
        elif op.opcode == "mul" and vals[0] == 1 and not t.is_float:
            mapping[op.result] = op.operands[1]
        elif op.opcode == "cast" and vals[0] is not None:
            src = op.operands[0].type
            if isinstance(src, T.ScalarType) and src.is_int and t.is_int and not t.is_bool:
                op.opcode, op.operands, op.attrs = "constant", [], {"value": wrap(int(vals[0]), t)}
            elif isinstance(src, T.ScalarType) and src.is_int and t in (T.fp32, T.fp64):
                op.opcode, op.operands, op.attrs = "constant", [], {"value": round_float(float(vals[0]), t)}


def splat_constant(v: Value) -> Any:
    """The constant a splat of a scalar constant holds; None if `v` is not one."""
    op = v.op
    return _const(op.operands[0].op) if op is not None and op.opcode == "splat" else None


def _fold_tile_identity(op: Op, mapping: dict[Value, Value]) -> None:
    """x + 0, x - 0, x * 1 and 1 * x on integer tiles (splatted constants) are x: this keeps
    axis info exact for Triton's `offs * stride` with a stride specialized to 1."""
    t = op.result.type
    e = T.elem_of(t)
    if op.opcode not in ("add", "sub", "mul") or len(op.operands) != 2 or not isinstance(e, T.ScalarType) \
            or e.is_float:
        return
    x, y = op.operands
    cy, cx = splat_constant(y), splat_constant(x)
    if x.type == t and ((op.opcode in ("add", "sub") and cy == 0) or (op.opcode == "mul" and cy == 1)):
        mapping[op.result] = x
    elif y.type == t and ((op.opcode == "add" and cx == 0) or (op.opcode == "mul" and cx == 1)):
        mapping[op.result] = y


def fold(fn: Function) -> None:
    mapping: dict[Value, Value] = {}
    _fold_block(fn.body, mapping)
    replace_all_uses(fn, mapping)
