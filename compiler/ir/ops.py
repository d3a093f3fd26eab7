"""The Tile IR op set: what each opcode takes, declared once.

`SPECS[opcode]` gives the operand count (None: variadic), the attributes it requires, the
number of regions, and whether it has side effects. The verifier checks ops against it;
passes consult `pure` and `ELEMENTWISE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OpSpec", "SPECS", "is_pure", "ELEMENTWISE", "BINARY", "MATH_FNS", "CMP_PREDICATES", "ATOMIC_KINDS"]


@dataclass(frozen=True)
class OpSpec:
    operands: int | None
    attrs: tuple[str, ...] = ()
    regions: int = 0
    pure: bool = True


def _s(operands: int | None, *attrs: str, regions: int = 0, pure: bool = True) -> OpSpec:
    return OpSpec(operands, attrs, regions, pure)


BINARY = (
    "add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr",
    "max", "min", "umulhi", "pow", "atan2", "copysign", "hypot",
)

# Unary and ternary math functions by name (the `fn` attribute of `math`).
MATH_FNS = {
    "neg": 1, "not": 1, "abs": 1, "exp": 1, "exp2": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1,
    "expm1": 1, "sqrt": 1, "rsqrt": 1, "cbrt": 1, "sin": 1, "cos": 1, "tan": 1, "asin": 1,
    "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "tanh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "erf": 1, "erfc": 1, "floor": 1, "ceil": 1, "trunc": 1, "round": 1, "rint": 1,
    "nearbyint": 1, "isnan": 1, "isinf": 1, "isfinite": 1, "signbit": 1, "popc": 1,
    "clz": 1, "ffs": 1, "brev": 1, "sigmoid": 1, "fma": 3, "lgamma": 1, "tgamma": 1,
    "exp10": 1, "j0": 1, "j1": 1, "y0": 1, "y1": 1, "erfinv": 1, "fast_expf": 1, "fast_logf": 1,
    "fast_dividef": 2, "div_rn": 2, "fmod": 2, "remainder": 2, "nextafter": 2, "ldexp": 2,
    "fdim": 2, "sqrt_rn": 1, "saturate": 1, "ilogb": 1,
}

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
ATOMIC_KINDS = ("add", "fadd", "max", "min", "umax", "umin", "and", "or", "xor", "xchg")

SPECS: dict[str, OpSpec] = {
    "constant": _s(0, "value"),
    "program_id": _s(0, "axis"),
    "num_programs": _s(0, "axis"),
    "make_range": _s(0, "start", "end"),
    "splat": _s(1),
    "broadcast": _s(1),
    "expand_dims": _s(1, "axis"),
    "reshape": _s(1),
    "trans": _s(1, "perm"),
    "join": _s(2),
    "split": _s(1),
    "cat": _s(2),
    "gather": _s(2, "axis"),
    "histogram": _s(None),
    "cmp": _s(2, "pred"),
    "math": _s(None, "fn"),
    "cast": _s(1),
    "bitcast": _s(1),
    "select": _s(3),
    "addptr": _s(2),
    "load": _s(None, "has_mask", "has_other", pure=True),
    "store": _s(None, "has_mask", pure=False),
    "atomic_rmw": _s(None, "kind", "sem", "scope", "has_mask", pure=False),
    "atomic_cas": _s(3, "sem", "scope", pure=False),
    "shared_alloc": _s(0, "nbytes", pure=False),
    "dot": _s(3, "input_precision"),
    "reduce": _s(None, "axis", regions=1),
    "scan": _s(None, "axis", "reverse", regions=1),
    "sort": _s(1, "axis", "descending"),
    "for": _s(None, regions=1, pure=False),
    "if": _s(1, regions=2, pure=False),
    "while": _s(None, regions=2, pure=False),
    "yield": _s(None, pure=False),
    "condition": _s(None, pure=False),
    "print": _s(None, "prefix", "hex", pure=False),
    "assert": _s(1, "msg", pure=False),
    "barrier": _s(0, pure=False),
    "assume": _s(1, pure=False),
    "inline_asm": _s(None, "asm", "constraints", "pure", "pack"),
    # GPU only, made by passes/pipeline.py: asynchronous copies of tiles into shared-memory slots
    "async_copy": _s(None, "buffer", "stages", "has_mask", "commit", "transposed", "private", pure=False),
    "async_wait": _s(1, "buffer", "stages", "sync", "pending", "private", pure=False),
    "async_drain": _s(None, pure=False),
}
for _b in BINARY:
    SPECS[_b] = _s(2)

# Ops computed element by element over their result's shape: fusable into one loop.
ELEMENTWISE = frozenset(
    (*BINARY, "cmp", "math", "cast", "bitcast", "select", "addptr", "splat", "broadcast",
     "expand_dims", "make_range", "load", "constant")
)


def is_pure(op: Any) -> bool:
    """No side effects: the opcode's spec says so, and an inline_asm op was not declared with
    is_pure=False (a barrier, a store: kept, in order, even when its result is unused)."""
    return SPECS[op.opcode].pure and not (op.opcode == "inline_asm" and not op.attrs.get("pure", True))
