"""Use lists and value replacement over a function's nested blocks."""

from __future__ import annotations

from ..ir.core import Block, Function, Value

__all__ = ["replace_all_uses", "use_counts"]


def replace_all_uses(fn: Function, mapping: dict[Value, Value]) -> None:
    if not mapping:
        return

    def resolve(v: Value) -> Value:
        while v in mapping:
            v = mapping[v]
        return v

    for op in fn.walk():
        op.operands = [resolve(v) for v in op.operands]


def use_counts(block: Block) -> dict[Value, int]:
    counts: dict[Value, int] = {}
    for op in block.walk():
        for v in op.operands:
            counts[v] = counts.get(v, 0) + 1
    return counts
