"""Constant folding and canonicalization of scalar arithmetic on constants."""

from __future__ import annotations

import math
import struct
from typing import Any

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value
from .uses import replace_all_uses

__all__ = ["fold"]


def _wrap(v: int, t: T.ScalarType) -> int:
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def _round_float(v: float, t: T.ScalarType) -> float:
    if t == T.fp32:
        try:
            return struct.unpack("f", struct.pack("f", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    return v


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _binary(opcode: str, t: T.ScalarType, a: Any, b: Any) -> Any | None:
    if t.is_float:
        if t not in (T.fp32, T.fp64):
            return None
        try:
            r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b}[opcode]()
        except KeyError:
            return None
        return _round_float(r, t)
    ops = {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
        "max": lambda: max(a, b), "min": lambda: min(a, b),
    }
    if opcode in ("div", "rem"):
        if b == 0 or (t.is_signed and a == t.int_min and b == -1):
            return None
        q = _c_div(a, b)
        return _wrap(q if opcode == "div" else a - q * b, t)
    f = ops.get(opcode)
    return None if f is None else _wrap(f(), t)


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
        if op.opcode in ("add", "sub", "mul", "div", "rem", "and", "or", "xor", "max", "min") and None not in vals:
            r = _binary(op.opcode, t, vals[0], vals[1])
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
                op.opcode, op.operands, op.attrs = "constant", [], {"value": _wrap(int(vals[0]), t)}
            elif isinstance(src, T.ScalarType) and src.is_int and t in (T.fp32, T.fp64):
                op.opcode, op.operands, op.attrs = "constant", [], {"value": _round_float(float(vals[0]), t)}


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
