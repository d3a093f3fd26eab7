"""Tile IR structure: locations, SSA values, operations, blocks and functions.

One small node type (`Op`) for every operation; what each opcode takes (operands, attributes,
regions) is declared in `compiler.ir.ops.SPECS` and checked by the verifier.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .types import Type

__all__ = ["Location", "Value", "Op", "Block", "Function", "Module", "UNKNOWN_LOC"]


@dataclass(frozen=True)
class Location:
    """Where an op or diagnostic comes from; `inlined_at` is the chain of call sites."""

    file: str
    line: int
    col: int
    func: str = ""
    inlined_at: Location | None = None

    def __str__(self) -> str:
        s = f"{self.file}:{self.line}:{self.col}"
        return s if self.inlined_at is None else f"{s} (inlined at {self.inlined_at})"


UNKNOWN_LOC = Location("<unknown>", 0, 0)


class Value:
    """An SSA value: an op result or a block argument."""

    __slots__ = ("type", "owner", "index", "name")

    def __init__(self, type: Type, owner: Op | Block | None, index: int, name: str = "") -> None:
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name

    @property
    def op(self) -> Op | None:
        """The defining op, or None for a block argument."""
        return self.owner if isinstance(self.owner, Op) else None

    def __repr__(self) -> str:
        return f"Value({self.name or id(self):}, {self.type})"


class Op:
    """An operation: opcode, operands, attributes, results and nested blocks (regions)."""

    __slots__ = ("opcode", "operands", "attrs", "results", "regions", "loc", "parent")

    def __init__(
        self,
        opcode: str,
        operands: Sequence[Value],
        result_types: Sequence[Type],
        attrs: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
        loc: Location = UNKNOWN_LOC,
    ) -> None:
        self.opcode = opcode
        self.operands: list[Value] = list(operands)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions: list[Block] = list(regions)
        self.loc = loc
        self.parent: Block | None = None
        for r in self.regions:
            r.parent = self

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.opcode} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator[Op]:
        """This op and every op nested in its regions, in program order (pre-order)."""
        yield self
        for r in self.regions:
            for op in r.ops:
                yield from op.walk()

    def __repr__(self) -> str:
        return f"Op({self.opcode})"


@dataclass(eq=False)
class Block:
    """A straight-line list of ops with block arguments; the body of a region."""

    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    parent: Op | None = None

    def add_arg(self, type: Type, name: str = "") -> Value:
        v = Value(type, self, len(self.args), name)
        self.args.append(v)
        return v

    def append(self, op: Op) -> Op:
        op.parent = self
        self.ops.append(op)
        return op

    def walk(self) -> Iterator[Op]:
        for op in self.ops:
            yield from op.walk()

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops and self.ops[-1].opcode == "yield" else None


@dataclass(eq=False)
class Function:
    """A kernel: named, typed arguments and a body block.

    `arg_attrs[i]` carries specialization facts of argument i (e.g. {"divisibility": 16}).
    """

    name: str
    body: Block
    arg_names: list[str]
    arg_attrs: list[dict[str, Any]]
    loc: Location = UNKNOWN_LOC

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        return self.body.walk()


@dataclass(eq=False)
class Module:
    """A compilation unit: the kernel after inlining (one function) plus its source facts."""

    func: Function
    source_hash: str = ""
