"""Checks Tile IR invariants: op specs, SSA dominance, and the type rules of each op."""

from __future__ import annotations

from collections.abc import Callable

from .core import Block, Function, Op
from .ops import BINARY, SPECS
from .types import PointerType, ScalarType, TileType, Type, elem_of, i1, shape_of, with_elem

__all__ = ["VerificationError", "verify"]


class VerificationError(Exception):
    """Tile IR broke an invariant: a compiler bug, never a user error."""


def _fail(op: Op, msg: str) -> None:
    raise VerificationError(f"{op.opcode} at {op.loc}: {msg}")


def _same(op: Op, a: Type, b: Type, what: str) -> None:
    if a != b:
        _fail(op, f"{what}: {a} != {b}")


def _check_binary(op: Op) -> None:
    a, b = op.operands
    _same(op, a.type, b.type, "operand types differ")
    _same(op, op.result.type, a.type, "result type")


def _check_cmp(op: Op) -> None:
    a, b = op.operands
    _same(op, a.type, b.type, "operand types differ")
    _same(op, op.result.type, with_elem(a.type, i1), "result type")


def _check_select(op: Op) -> None:
    c, a, b = op.operands
    _same(op, a.type, b.type, "branch types differ")
    _same(op, op.result.type, a.type, "result type")
    if elem_of(c.type) != i1 or shape_of(c.type) != shape_of(a.type):
        _fail(op, f"condition {c.type} does not match {a.type}")


def _check_addptr(op: Op) -> None:
    p, o = op.operands
    if not isinstance(elem_of(p.type), PointerType):
        _fail(op, f"base is not a pointer: {p.type}")
    oe = elem_of(o.type)
    if not (isinstance(oe, ScalarType) and oe.is_int) or shape_of(o.type) != shape_of(p.type):
        _fail(op, f"offset {o.type} does not match {p.type}")
    _same(op, op.result.type, p.type, "result type")


def _check_load(op: Op) -> None:
    p = op.operands[0]
    pe = elem_of(p.type)
    if not isinstance(pe, PointerType):
        _fail(op, f"not a pointer: {p.type}")
        return
    _same(op, op.result.type, with_elem(p.type, pe.elem), "result type")
    n = 1 + int(op.attrs["has_mask"]) + int(op.attrs["has_other"])
    if len(op.operands) != n:
        _fail(op, f"expected {n} operands")
    if op.attrs["has_mask"]:
        _same(op, op.operands[1].type, with_elem(p.type, i1), "mask type")
    if op.attrs["has_other"]:
        _same(op, op.operands[-1].type, op.result.type, "other type")


def _check_store(op: Op) -> None:
    p, v = op.operands[:2]
    pe = elem_of(p.type)
    if not isinstance(pe, PointerType):
        _fail(op, f"not a pointer: {p.type}")
        return
    _same(op, v.type, with_elem(p.type, pe.elem), "value type")
    if op.attrs["has_mask"]:
        _same(op, op.operands[2].type, with_elem(p.type, i1), "mask type")


def _check_async_copy(op: Op) -> None:
    p = op.operands[0]
    if not isinstance(elem_of(p.type), PointerType) or not isinstance(p.type, TileType):
        _fail(op, f"source is not a pointer tile: {p.type}")
    rest = op.operands[1:]
    if op.attrs["has_mask"]:
        _same(op, rest[0].type, with_elem(p.type, i1), "mask type")
        rest = rest[1:]
    if len(rest) != 2 or rest[0].type != i1 or not isinstance(rest[1].type, ScalarType):
        _fail(op, "expects a predicate (i1) and a slot index after the pointers and mask")


def _check_async_wait(op: Op) -> None:
    if not isinstance(op.operands[0].type, ScalarType) or not isinstance(op.result.type, TileType):
        _fail(op, f"slot {op.operands[0].type} -> {op.result.type}: expects a scalar slot and a tile result")


def _check_yields(op: Op, block: Block, types: list[Type]) -> None:
    term = block.ops[-1] if block.ops else None
    if term is None or term.opcode not in ("yield", "condition"):
        _fail(op, "region does not end with yield")
        return
    got = [v.type for v in term.operands[1:]] if term.opcode == "condition" else [v.type for v in term.operands]
    if got != types:
        _fail(op, f"region yields {got}, expected {types}")


def _check_for(op: Op) -> None:
    body = op.regions[0]
    inits = op.operands[3:]
    if [a.type for a in body.args[1:]] != [v.type for v in inits]:
        _fail(op, "loop-carried argument types differ from the initial values")
    _check_yields(op, body, [v.type for v in inits])
    if [r.type for r in op.results] != [v.type for v in inits]:
        _fail(op, "result types differ from the loop-carried types")


def _check_if(op: Op) -> None:
    if op.operands[0].type != i1:
        _fail(op, f"condition must be i1, got {op.operands[0].type}")
    for r in op.regions:
        _check_yields(op, r, [v.type for v in op.results])


def _check_reduce(op: Op) -> None:
    k = len(op.operands)
    region = op.regions[0]
    if len(region.args) != 2 * k:
        _fail(op, f"combine region takes {len(region.args)} arguments, expected {2 * k}")
    _check_yields(op, region, [elem_of(v.type) for v in op.operands])


_RULES: dict[str, Callable[[Op], None]] = {
    **{b: _check_binary for b in BINARY},
    "cmp": _check_cmp,
    "select": _check_select,
    "addptr": _check_addptr,
    "load": _check_load,
    "store": _check_store,
    "for": _check_for,
    "if": _check_if,
    "reduce": _check_reduce,
    "scan": _check_reduce,
    "async_copy": _check_async_copy,
    "async_wait": _check_async_wait,
}


def _verify_block(block: Block, visible: set[int]) -> None:
    scope = set(visible)
    scope.update(id(a) for a in block.args)
    for op in block.ops:
        spec = SPECS.get(op.opcode)
        if spec is None:
            _fail(op, "unknown opcode")
            return
        if spec.operands is not None and len(op.operands) != spec.operands:
            _fail(op, f"expected {spec.operands} operands, got {len(op.operands)}")
        if len(op.regions) != spec.regions:
            _fail(op, f"expected {spec.regions} regions, got {len(op.regions)}")
        for a in spec.attrs:
            if a not in op.attrs:
                _fail(op, f"missing attribute {a!r}")
        for v in op.operands:
            if id(v) not in scope:
                _fail(op, f"operand {v} does not dominate its use")
        for t in (v.type for v in op.results):
            if isinstance(t, TileType) and any(d <= 0 for d in t.shape):
                _fail(op, f"bad tile shape {t}")
        rule = _RULES.get(op.opcode)
        if rule:
            rule(op)
        for r in op.regions:
            _verify_block(r, scope)
        scope.update(id(r) for r in op.results)


def verify(fn: Function) -> None:
    """Raise VerificationError if `fn` breaks an invariant."""
    _verify_block(fn.body, set())
