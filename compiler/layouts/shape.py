"""Shape ops as layout changes, for every GPU backend (docs/layouts.md#shape-ops).

In a linear layout, join, split, cat and a power-of-two reshape move no data: the result holds the
operand's registers unchanged under a layout whose bases say where they now sit.

- join adds a last dimension of size 2 held by the lowest register bit (`pair_layout`): a thread
  holds both halves of each pair, the first operand's element in the even register;
- split undoes it (`split_layout`) when the size-2 last dimension is held by one register bit
  alone (`pair_bit`); otherwise the backend first converts the operand to a `pair_layout`;
- cat of two equal tiles along dim 0 appends a register bit for the new high half of dim 0
  (`cat_layout`): the second operand's registers follow the first's;
- reshape reads the row-major flattened bits of the outputs back as the new shape
  (`reshaped_layout`);
- a bitonic sort along the last axis needs each coordinate bit of that axis held by exactly one
  register, lane or warp bit (`sortable`, `bit_owner`), which says where a partner element lives.

Register lists are in the layout's register order: register r holds element L(r, lane, warp).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from .linear import LANE, REGISTER, WARP, Basis, LinearLayout, dim_names

__all__ = ["pair_layout", "pair_bit", "split_layout", "interleave", "halves", "cat_layout", "reshaped_layout",
           "bit_owner", "sortable"]

R = TypeVar("R")


def _make(bases: dict[str, list[Basis]], shape: Sequence[int]) -> LinearLayout:
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))


def _log2(n: int) -> int:
    return max(0, n.bit_length() - 1)


def pair_layout(base: LinearLayout | None, shape: Sequence[int], lanes: int, warps: int) -> LinearLayout:
    """`base` (the layout of shape[:-1]; None for a pair of scalars) with a new last dimension of
    size 2 held by register bit 0. Without a base, every thread of `warps` warps of `lanes` lanes
    holds both elements."""
    unit = (*([0] * (len(shape) - 1)), 1)
    if base is None:
        return _make({REGISTER: [unit], LANE: [(0,)] * _log2(lanes), WARP: [(0,)] * _log2(warps)}, shape)
    bases: dict[str, list[Basis]] = {}
    for name, rows in base.in_dims:
        ext = [(*b, 0) for b in rows]
        bases[name] = [unit, *ext] if name == REGISTER else ext
    return _make(bases, shape)


def pair_bit(layout: LinearLayout) -> int | None:
    """The register bit holding the size-2 last dimension when it is the only basis touching that
    dimension (so the two halves are separate registers of the same thread); else None."""
    found = None
    rank = len(layout.out_dims)
    for name, rows in layout.in_dims:
        for k, b in enumerate(rows):
            if not b[rank - 1]:
                continue
            if name != REGISTER or any(b[:-1]) or found is not None:
                return None
            found = k
    return found


def split_layout(layout: LinearLayout, k: int) -> LinearLayout:
    """The layout of either half of a split: `layout` without register bit `k` (its `pair_bit`)
    and without the last dimension."""
    shape = layout.out_shape[:-1]
    bases = {name: [b[:-1] for i, b in enumerate(rows) if not (name == REGISTER and i == k)]
             for name, rows in layout.in_dims}
    return _make(bases, shape)


def interleave(a: Sequence[R], b: Sequence[R]) -> list[R]:
    """The registers of join(a, b) in its `pair_layout`: a0, b0, a1, b1, ..."""
    out: list[R] = []
    for x, y in zip(a, b, strict=True):
        out += [x, y]
    return out


def halves(regs: Sequence[R], k: int) -> tuple[list[R], list[R]]:
    """The registers with bit `k` clear, then those with it set (the two results of a split)."""
    lo = [v for r, v in enumerate(regs) if not (r >> k) & 1]
    hi = [v for r, v in enumerate(regs) if (r >> k) & 1]
    return lo, hi


def cat_layout(layout: LinearLayout) -> LinearLayout:
    """The layout of cat(a, b) along dim 0 for two tiles in `layout`: a new highest register bit
    moves by the operands' size along dim 0 (a's registers, then b's)."""
    shape = layout.out_shape
    hi = (shape[0], *([0] * (len(shape) - 1)))
    bases = {name: [*rows, hi] if name == REGISTER else list(rows) for name, rows in layout.in_dims}
    return _make(bases, (2 * shape[0], *shape[1:]))


def reshaped_layout(layout: LinearLayout, shape: Sequence[int]) -> LinearLayout | None:
    """`layout` with its output read as `shape` (row-major), or None when `shape` has a size that
    is not a power of two or a different element count."""
    if not shape or not all(s > 0 and s & (s - 1) == 0 for s in shape):
        return None
    n = 1
    for s in shape:
        n *= s
    if n != layout.total_out_size:
        return None
    return layout.reshape_outs(list(zip(dim_names(len(shape)), shape, strict=True)))


def bit_owner(layout: LinearLayout, axis: int, j: int) -> tuple[str, int] | None:
    """The (in_dim, bit) whose basis is coordinate bit j of `axis` alone, if unique."""
    hits = [(name, k) for name, rows in layout.in_dims for k, b in enumerate(rows)
            if b[axis] == j and not any(v for d, v in enumerate(b) if d != axis)]
    return hits[0] if len(hits) == 1 else None


def sortable(layout: LinearLayout, axis: int, n: int) -> bool:
    """Every coordinate bit of `axis` (of size n) is one unit basis and no other basis moves along it."""
    units = 0
    for _name, rows in layout.in_dims:
        for b in rows:
            if b[axis]:
                if any(v for d, v in enumerate(b) if d != axis) or b[axis] & (b[axis] - 1):
                    return False
                units += 1
    return units == _log2(n) and all(bit_owner(layout, axis, 1 << s) is not None for s in range(_log2(n)))
