"""Unmasked program accesses: loads, stores and atomics whose address depends on the program id
and that have no mask.

These are the usual suspects when a kernel faults: the last program of a grid over a size that
is not a multiple of the block reaches past the end of its tensor. The analysis is a forward
dependence over the Tile IR (after folding and DCE): a value depends on the program id when it
is one, or is computed from one (through loads, loop-carried values and the results of loops
and branches that compute with one). The tools report these accesses, with their lines, when a
launch crashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Block, Function, Location, Op, Value
from .provenance import pointer_roots

__all__ = ["UnmaskedAccess", "unmasked_program_accesses"]

_TERMINATORS = ("yield", "condition")


@dataclass(frozen=True)
class UnmaskedAccess:
    """One access without a mask whose address depends on the program id."""

    kind: str  # "load", "store", "atomic_add", ..., "atomic_cas"
    loc: Location
    pointer: str | None  # the kernel argument the pointer derives from, when it has one

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "line": self.loc.line, "column": self.loc.col, "pointer": self.pointer}


def program_dependent(fn: Function) -> set[Value]:
    """The values computed, directly or not, from ``tl.program_id``."""
    dependent: set[Value] = set()
    changed = True
    while changed:  # loop-carried values need the yields of their bodies: iterate to the fixed point
        changed = False
        for op in fn.walk():
            for target, sources in _flows(op):
                if target not in dependent and (op.opcode == "program_id" or any(v in dependent for v in sources)):
                    dependent.add(target)
                    changed = True
    return dependent


def _terminator(block: Block) -> list[Value]:
    return list(block.ops[-1].operands) if block.ops and block.ops[-1].opcode in _TERMINATORS else []


def _flows(op: Op) -> list[tuple[Value, list[Value]]]:
    """(value, the values it is computed from) for the values ``op`` defines: its results and the arguments
    of its regions. Loop bounds and branch conditions flow into everything the loop or branch carries."""
    if op.opcode == "for":
        body = op.regions[0]
        bounds, inits, yields = op.operands[:3], op.operands[3:], _terminator(body)
        flows = [(body.args[0], list(bounds))]
        for i, (init, arg, res) in enumerate(zip(inits, body.args[1:], op.results, strict=True)):
            carried = [init, *bounds, *yields[i:i + 1]]
            flows += [(arg, carried), (res, carried)]
        return flows
    if op.opcode == "if":
        branches = [_terminator(r) for r in op.regions]
        return [(res, [op.operands[0], *(b[i] for b in branches if i < len(b))]) for i, res in enumerate(op.results)]
    if op.opcode == "while":
        before, after = op.regions
        cond, after_yield = _terminator(before), _terminator(after)
        flows = []
        for i, arg in enumerate(before.args):
            flows.append((arg, [op.operands[i], *after_yield[i:i + 1], *cond[:1]]))
        for i, (arg, res) in enumerate(zip(after.args, op.results, strict=True)):
            flows += [(arg, cond[i + 1:i + 2] + cond[:1]), (res, cond[i + 1:i + 2] + cond[:1])]
        return flows
    inner = [v for r in op.regions for v in _terminator(r)]
    return [(v, [*op.operands, *inner]) for v in [*op.results, *(a for r in op.regions for a in r.args)]]


def _unmasked(op: Op) -> bool:
    if op.opcode == "atomic_cas":
        return True
    return op.opcode in ("load", "store", "atomic_rmw") and not op.attrs.get("has_mask")


def unmasked_program_accesses(fn: Function) -> list[UnmaskedAccess]:
    """Every access without a mask whose pointer depends on the program id, in program order."""
    dependent = program_dependent(fn)
    roots = pointer_roots(fn, strict=False)
    found: list[UnmaskedAccess] = []
    for op in fn.walk():
        if not _unmasked(op) or not op.operands or op.operands[0] not in dependent:
            continue
        kind = f"atomic_{str(op.attrs['kind']).removeprefix('f')}" if op.opcode == "atomic_rmw" else op.opcode
        root = roots.get(op.operands[0])
        found.append(UnmaskedAccess(kind, op.loc, fn.arg_names[root] if root is not None else None))
    return found
