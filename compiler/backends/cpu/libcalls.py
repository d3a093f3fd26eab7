"""Scalar library calls in vector loops: the math the CPU backend lowers to a C function call.

The CPU backend computes most math on tiles with vector code of its own (mathlib/); what it
cannot, it calls from the C library one element at a time, inside the loop over the tile, at
several times the cost. The optimized module declares each such function (a C name, or an LLVM
intrinsic that x86 has no instruction for); the Tile IR ops on tiles that compute them are where
it happens. Each becomes a note with the op's source location, which compile_kernel returns.
"""

from __future__ import annotations

import re

from ...ir import types as T
from ...ir.core import Function, Location, Op

__all__ = ["scalar_library_calls"]

# LLVM intrinsics x86 code generation turns into C library calls (vector forms: one call per lane)
_LIBCALL_INTRINSICS = frozenset({"sin", "cos", "tan", "exp", "exp2", "exp10", "log", "log2", "log10", "pow", "powi",
                                 "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh"})
_DECLARE = re.compile(r'^declare [^@\n]*@"?([\w.$]+)"?\(', re.M)
_INTRINSIC = re.compile(r"llvm\.(\w+?)\.(?:v\d+)?(f32|f64)")
_BINARY_MATH = ("pow", "atan2", "hypot")


def _math_name(op: Op) -> str | None:
    if op.opcode == "math":
        return str(op.attrs.get("fn"))
    return op.opcode if op.opcode in _BINARY_MATH else None


def scalar_library_calls(fn: Function, llir: str) -> list[tuple[str, str, str, Location]]:
    """(Tile IR function, element type, C function, location) of each math op on a tile that the
    optimized module ``llir`` computes with a scalar library call, once per source location."""
    declared = set(_DECLARE.findall(llir))
    c_functions = {d for d in declared if not d.startswith("llvm.")}
    intrinsics = {(m.group(1), m.group(2)) for d in declared if (m := _INTRINSIC.fullmatch(d))
                  and m.group(1) in _LIBCALL_INTRINSICS}
    found: list[tuple[str, str, str, Location]] = []
    seen: set[tuple[str, int, int]] = set()
    for op in fn.walk():
        name = _math_name(op)
        if name is None or len(op.results) != 1 or not T.shape_of(op.result.type):
            continue
        elem = T.elem_of(op.result.type)
        if not isinstance(elem, T.ScalarType) or not elem.is_float:
            continue
        width = "f64" if elem.bits == 64 else "f32"  # 16-bit floats compute in float32
        c_name = name if width == "f64" else f"{name}f"
        if c_name not in c_functions and (name, width) not in intrinsics:
            continue
        key = (name, op.loc.line, op.loc.col)
        if key not in seen:
            seen.add(key)
            found.append((name, str(elem), c_name, op.loc))
    return found
