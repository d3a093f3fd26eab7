"""Pointer provenance: the kernel argument each pointer value was derived from.

Debug-mode bounds checks (both backends) check an access against the tensor its pointer came
from. A pointer has a provenance when it derives from one pointer argument through address
arithmetic and shape ops, a select of two pointers of the same provenance, or a loop-carried
value whose initial and yielded pointers agree.
"""

from __future__ import annotations

from ..ir import types as T
from ..ir.core import Function, Op, Value

__all__ = ["pointer_roots"]


# ops whose (pointer) result addresses the same tensor as their first operand
_DERIVED = ("addptr", "splat", "broadcast", "expand_dims", "reshape", "trans", "bitcast", "cast")


def pointer_roots(fn: Function, strict: bool = True) -> dict[Value, int]:
    """For each pointer-typed value with a unique provenance, the position of the kernel argument
    it was derived from. `strict`: a loop-carried pointer counts only when the body yields a pointer
    of the same provenance (else a pointer swapped for another tensor's inside a loop would be
    checked against the wrong tensor); such loops are excluded and the analysis rerun until
    stable. Without `strict`, a loop-carried pointer takes its initial value's provenance."""
    if not strict:
        return _roots(fn, set())
    excluded: set[int] = set()
    while True:
        roots = _roots(fn, excluded)
        bad = {id(op) for op in fn.walk() if op.opcode == "for" and id(op) not in excluded
               and not _loop_consistent(op, roots)}
        if not bad:
            return roots
        excluded |= bad


def _is_ptr(v: Value) -> bool:
    return isinstance(T.elem_of(v.type), T.PointerType)


def _roots(fn: Function, excluded: set[int]) -> dict[Value, int]:
    roots: dict[Value, int] = {a: i for i, a in enumerate(fn.args) if isinstance(a.type, T.PointerType)}
    for op in fn.walk():  # pre-order: a loop's carried arguments get roots before its body is visited
        if op.opcode in _DERIVED:
            if op.operands and op.operands[0] in roots and _is_ptr(op.result):
                roots[op.result] = roots[op.operands[0]]
        elif op.opcode == "select" and _is_ptr(op.result):
            a, b = op.operands[1], op.operands[2]
            if a in roots and b in roots and roots[a] == roots[b]:
                roots[op.result] = roots[a]
        elif op.opcode == "for" and id(op) not in excluded:
            body = op.regions[0]
            for init, arg, res in zip(op.operands[3:], body.args[1:], op.results, strict=True):
                if init in roots:
                    roots[arg] = roots[init]
                    roots[res] = roots[init]
    return roots


def _loop_consistent(op: Op, roots: dict[Value, int]) -> bool:
    body = op.regions[0]
    term = body.terminator
    if term is None:
        return True
    for arg, y in zip(body.args[1:], term.operands, strict=True):
        if arg in roots and roots.get(y) != roots[arg]:
            return False
    return True
