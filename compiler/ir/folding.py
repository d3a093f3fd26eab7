"""Constant folding of the scalar binary ops, one function per opcode (the op table's `fold`).

Each takes the result type and the two constant operands and returns the folded value, or None
where it does not fold (an undefined result, or a float type other than fp32 and fp64). Integers
wrap to the type's width; fp32 results are rounded to fp32. passes/fold.py applies them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from . import types as T

__all__ = ["Fold", "FOLDS", "wrap", "round_float"]

Fold = Callable[[T.ScalarType, Any, Any], Any | None]


def wrap(v: int, t: T.ScalarType) -> int:
    """`v` wrapped to the width (and signedness) of integer type `t`."""
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def round_float(v: float, t: T.ScalarType) -> float:
    """`v` rounded to fp32 when `t` is fp32 (infinite past its range)."""
    if t == T.fp32:
        try:
            return struct.unpack("f", struct.pack("f", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    return v


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _arith(f: Callable[[Any, Any], Any], floats: bool) -> Fold:
    def fold(t: T.ScalarType, a: Any, b: Any) -> Any | None:
        if t.is_float:
            return round_float(f(a, b), t) if floats and t in (T.fp32, T.fp64) else None
        return wrap(f(a, b), t)

    return fold


def _divide(remainder: bool) -> Fold:
    """C division (toward zero) and its remainder; not folded: floats, x / 0, INT_MIN / -1."""

    def fold(t: T.ScalarType, a: Any, b: Any) -> Any | None:
        if t.is_float or b == 0 or (t.is_signed and a == t.int_min and b == -1):
            return None
        q = _c_div(a, b)
        return wrap(a - q * b if remainder else q, t)

    return fold


FOLDS: dict[str, Fold] = {
    "add": _arith(lambda a, b: a + b, True),
    "sub": _arith(lambda a, b: a - b, True),
    "mul": _arith(lambda a, b: a * b, True),
    "div": _divide(False),
    "rem": _divide(True),
    "and": _arith(lambda a, b: a & b, False),
    "or": _arith(lambda a, b: a | b, False),
    "xor": _arith(lambda a, b: a ^ b, False),
    "max": _arith(max, False),
    "min": _arith(min, False),
}
