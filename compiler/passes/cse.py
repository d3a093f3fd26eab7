"""Common subexpression elimination of pure ops, scoped by block nesting."""

from __future__ import annotations

from typing import Any

from ..ir.core import Block, Function, Value
from ..ir.ops import is_pure
from .uses import replace_all_uses

__all__ = ["cse"]

_NEVER = {"load", "make_range"}


def _key(op: Any) -> Any:
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    return (op.opcode, tuple(id(v) for v in op.operands), attrs, tuple(str(r.type) for r in op.results))


def _walk(block: Block, table: dict[Any, list[Value]], mapping: dict[Value, Value]) -> None:
    local = dict(table)
    keep = []
    for op in block.ops:
        op.operands = [mapping.get(v, v) for v in op.operands]
        for r in op.regions:
            _walk(r, local, mapping)
        if is_pure(op) and not op.regions and op.opcode not in _NEVER and op.results:
            k = _key(op)
            prev = local.get(k)
            if prev is not None:
                for a, b in zip(op.results, prev, strict=True):
                    mapping[a] = b
                continue
            local[k] = op.results
        keep.append(op)
    block.ops = keep


def cse(fn: Function) -> None:
    mapping: dict[Value, Value] = {}
    _walk(fn.body, {}, mapping)
    replace_all_uses(fn, mapping)
