"""The plain graph a fused kernel is generated from: no torch, no FX, only values and ops.

A `Group` is one kernel's worth of work over one iteration domain:

- `pointwise`: every value has the domain's shape; one program handles BLOCK consecutive elements
  of it (in row-major order).
- `rows`: the domain is (rows..., C); values are either `full` (one per element) or `row` (one per
  row: the results of reductions over C, and anything computed from them alone). One program
  handles ROWS whole rows, each held in registers (C <= the emitter's limit).
- `cols`: the domain is (rows..., C) again, reduced over the rows (a bias's gradient): values are
  `full`, or `col` (one per column: the reductions' results and what is computed from them alone).
  One program handles BLOCK_C columns, walking the rows BLOCK_R at a time.
- `matmul`: one `dot` op (its operands: two inputs, (M..., K) and (K, N)) and an elementwise epilogue
  on its (M..., N) result: every other value is `full` on that domain. One program handles a
  BLOCK_M x BLOCK_N tile of the result, accumulating over K in float32 (matmul.py).

Inputs are tensors the kernel loads; how each is laid out in memory (contiguous, broadcast,
strided) is known only at launch, so the emitter takes it per launch as a `Layout`. Outputs are
written contiguously. Ops refer to earlier values by `Ref`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Ref", "Op", "Group", "Layout", "Scalar", "Kind", "FULL", "ROW", "COL"]

FULL: Literal["full"] = "full"
ROW: Literal["row"] = "row"
COL: Literal["col"] = "col"
Kind = Literal["full", "row", "col"]
Scalar = bool | int | float


@dataclass(frozen=True)
class Ref:
    """Input `index` of the group (`input=True`) or the result of op `index`."""

    index: int
    input: bool = False


@dataclass(frozen=True)
class Op:
    """One operation: `name` from the op table (ops.py), operands, the result's dtype and kind.

    `dtype` is a torch dtype name without the prefix ("float32", "bfloat16", "bool").
    """

    name: str
    args: tuple[Ref | Scalar | str | None, ...]
    dtype: str
    kind: Kind = FULL


@dataclass(frozen=True)
class Layout:
    """How one input is addressed at one launch.

    `row_dims`: (size, stride) pairs, outermost first, over which the (row or flat) index is
    decomposed after merging dims that are contiguous with each other; a dim of stride 0 (broadcast)
    adds nothing to the offset but its size still divides the index of the dims outside it.
    `linear` says the offset is the index itself. `col_stride` (rows
    groups only): the stride along C (0: broadcast along the row).
    """

    linear: bool
    row_dims: tuple[tuple[int, int], ...] = ()
    col_stride: int = 1
    outer: bool = True  # row_dims[0] is the domain's outermost dim: its index needs no modulo

    def key(self) -> tuple[object, ...]:
        """What changes the kernel text: the dims (broadcast ones read nothing) and how C is strided."""
        return (self.linear, self.outer, tuple(stride == 0 for _, stride in self.row_dims),
                "c1" if self.col_stride == 1 else "c0" if self.col_stride == 0 else "cs")


@dataclass
class Group:
    """One fused kernel: inputs (dtype, kind), ops in order, outputs (op index)."""

    kind: Literal["pointwise", "rows", "cols", "matmul"]
    inputs: list[tuple[str, Kind]] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def describe(self) -> str:
        """A one-line name for the kernel: its ops, in order, without repeats."""
        names: list[str] = []
        for op in self.ops:
            if op.name not in ("load", "convert", "view") and op.name not in names:
                names.append(op.name)
        return "_".join(names[:6]) or "copy"
