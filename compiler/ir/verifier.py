"""Checks Tile IR against the op table (ir/ops.py) and its structural invariants.

For every op: a known opcode; the operand count its spec and attributes give; the number of
regions; every required attribute present, every attribute known and of its declared kind and
allowed values; the operand checks and the result-type rule of its spec. For the function: SSA
dominance (an operand is defined before its use, in the same or an enclosing block), tile shapes
of positive sizes. Errors name the op, its location and what is wrong.
"""

from __future__ import annotations

from typing import Any

from .core import UNKNOWN_LOC, Block, Function, Location, Op
from .ops import COMMON_ATTRS, SPECS, OpSpec, operand_range
from .rules import ATTR_KINDS, Attr
from .types import TileType

__all__ = ["VerificationError", "verify", "verify_op"]


class VerificationError(Exception):
    """Tile IR broke an invariant: a compiler bug, never a user error. `opcode` and `loc` say
    which op, where."""

    def __init__(self, message: str, opcode: str = "", loc: Location = UNKNOWN_LOC) -> None:
        super().__init__(message)
        self.opcode = opcode
        self.loc = loc


def _fail(op: Op, msg: str) -> None:
    raise VerificationError(f"{op.opcode} at {op.loc}: {msg}", op.opcode, op.loc)


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _check_attr(op: Op, a: Attr, v: Any) -> None:
    if v is None:
        if a.required:
            _fail(op, f"attribute {a.name!r} is None; it is required ({ATTR_KINDS[a.kind].name})")
        return
    kind = ATTR_KINDS[a.kind]
    if not kind.accepts(v):
        _fail(op, f"attribute {a.name!r} must be {kind.name}, got {type(v).__name__} {_show(v)}")
    if a.choices and v not in a.choices:
        _fail(op, f"attribute {a.name!r} is {_show(v)}, expected one of {', '.join(map(repr, a.choices))}")


def _check_attrs(op: Op, spec: OpSpec) -> None:
    declared = {a.name: a for a in spec.attrs}
    if len(op.results) == 1:
        declared.update((a.name, a) for a in COMMON_ATTRS)
    for name in spec.required_attrs:
        if name not in op.attrs:
            _fail(op, f"missing attribute {name!r}")
    for name, v in op.attrs.items():
        a = declared.get(name)
        if a is None:
            known = ", ".join(sorted(declared)) or "none"
            _fail(op, f"unknown attribute {name!r} (known: {known})")
            return
        _check_attr(op, a, v)


def _check_operands(op: Op, spec: OpSpec) -> None:
    lo, hi = operand_range(spec, op.attrs)
    n = len(op.operands)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"at least {lo}" if hi is None else f"{lo} to {hi}"
        names = ", ".join(o.name + ("..." if o.variadic else "") + (f" (if {o.when})" if o.when else "")
                          for o in spec.operands) or "none"
        _fail(op, f"expected {want} operand(s) ({names}), got {n}")


def verify_op(op: Op) -> None:
    """Check one op (not its regions' ops) against its spec; raise VerificationError if it breaks it."""
    spec = SPECS.get(op.opcode)
    if spec is None:
        _fail(op, "unknown opcode")
        return
    _check_attrs(op, spec)
    _check_operands(op, spec)
    if len(op.regions) != spec.regions:
        _fail(op, f"expected {spec.regions} region(s), got {len(op.regions)}")
    for t in (v.type for v in op.results):
        if isinstance(t, TileType) and any(d <= 0 for d in t.shape):
            _fail(op, f"bad tile shape {t}")
    for check in spec.checks:
        why = check(op)
        if why:
            _fail(op, why)
    why = spec.result.check(op)
    if why:
        _fail(op, why)


def _verify_block(block: Block, visible: set[int]) -> None:
    scope = set(visible)
    scope.update(id(a) for a in block.args)
    for op in block.ops:
        for v in op.operands:
            if id(v) not in scope:
                _fail(op, f"operand {v} does not dominate its use")
        for r in op.regions:  # inner ops first: a fault there is reported where it is
            _verify_block(r, scope)
        verify_op(op)
        scope.update(id(r) for r in op.results)


def verify(fn: Function) -> None:
    """Raise VerificationError if `fn` breaks an invariant."""
    _verify_block(fn.body, set())
