"""Dead code elimination: drop pure ops whose results are never used."""

from __future__ import annotations

from ..ir.core import Block, Function, Op
from ..ir.ops import is_pure
from .uses import use_counts

__all__ = ["dce"]


def _removable(op: Op) -> bool:
    if not is_pure(op) or op.regions and op.opcode not in ("reduce", "scan"):
        return False
    return not (op.opcode == "load" and op.attrs.get("volatile"))


def _sweep(block: Block, counts: dict) -> bool:
    changed = False
    keep = []
    for op in reversed(block.ops):
        for r in op.regions:
            changed |= _sweep(r, counts)
        if _removable(op) and op.results and all(counts.get(r, 0) == 0 for r in op.results):
            for v in op.operands:
                counts[v] -= 1
            changed = True
            continue
        keep.append(op)
    block.ops = list(reversed(keep))
    return changed


def dce(fn: Function) -> None:
    counts = use_counts(fn.body)
    while _sweep(fn.body, counts):
        pass
