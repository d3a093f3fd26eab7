"""What a reference expression's parts become while it is translated into fusion ops.

Every tensor carries a meta tensor (shape, dtype and, for an input read through a view, strides; no
data): torch itself, on the meta device, says what shape and dtype each step has, so the kernel
promotes and broadcasts exactly as the reference does. Nothing is computed on real data here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["OpRef", "InputRef", "ParamRef", "Operand", "Val", "Const", "Pair", "Scalar", "PreOp"]

Scalar = bool | int | float


@dataclass(frozen=True)
class OpRef:
    """The result of op `index`."""

    index: int


@dataclass(frozen=True)
class InputRef:
    """The argument `name`, a tensor the kernel loads."""

    name: str


@dataclass(frozen=True)
class ParamRef:
    """The scalar argument `name`, a parameter of the kernel."""

    name: str


Operand = OpRef | InputRef | ParamRef | bool | int | float


@dataclass(frozen=True)
class Val:
    """A tensor (`meta` set) or a number (`meta` None, `number` its value) of the expression.

    `row`: one value per row (a reduction over the last dim, or what is computed from such values
    alone); the kernel holds it as a (ROWS, 1) column. `view` (inputs only): the view of the
    argument the kernel reads, with its strides (`meta` may be a float32 stand-in for it).
    """

    operand: Operand
    meta: torch.Tensor | None
    number: Scalar | None = None
    row: bool = False
    view: torch.Tensor | None = None

    @property
    def is_tensor(self) -> bool:
        return self.meta is not None

    def probe(self) -> Any:
        """What torch is given to find a result's shape and dtype: the meta tensor, or a 0-d one."""
        return self.meta if self.meta is not None else torch.tensor(self.number, device="meta")


@dataclass(frozen=True)
class Const:
    """A compile-time value that is not a number: a dtype, a string, None, a tuple of sizes."""

    value: Any


@dataclass(frozen=True)
class Pair:
    """What torch.max(x, dim) returns: its `.values` (the reduction) are usable, its indices are not."""

    values: Val


@dataclass
class PreOp:
    """One op before the group is laid out: fusion op `name` over operands, with its result's meta
    (None for an op on numbers only) and dtype name."""

    name: str
    args: tuple[Operand, ...]
    meta: torch.Tensor | None
    dtype: str
    row: bool = False
    reduce: bool = False
    source: str = ""  # the part of the expression it comes from, for messages
