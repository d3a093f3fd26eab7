"""Builds Tile IR: an insertion block plus the current source location."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .core import UNKNOWN_LOC, Block, Location, Op, Value
from .types import Type

__all__ = ["Builder"]


class Builder:
    """Appends ops to `block`; `loc` is stamped on every op created."""

    def __init__(self, block: Block, loc: Location = UNKNOWN_LOC) -> None:
        self.block = block
        self.loc = loc
        self.ops = 0  # ops created so far (the frontend bounds it)

    def create(
        self,
        opcode: str,
        operands: Sequence[Value],
        result_types: Sequence[Type],
        attrs: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
    ) -> Op:
        op = Op(opcode, operands, result_types, attrs, regions, self.loc)
        self.ops += 1
        self.block.append(op)
        return op

    def value(self, opcode: str, operands: Sequence[Value], result_type: Type, **attrs: Any) -> Value:
        return self.create(opcode, operands, [result_type], attrs).result

    @contextmanager
    def at(self, block: Block) -> Iterator[Block]:
        """Temporarily insert into `block`."""
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved

    @contextmanager
    def located(self, loc: Location) -> Iterator[None]:
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved
