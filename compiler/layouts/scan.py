"""Scans by recursive doubling over the bits of the scanned coordinate, for any GPU backend.

In a layout where every basis that moves along the scanned axis moves along it alone, each bit
of the axis coordinate is held by one hardware bit: a register, lane or warp bit. Taking the bits
in increasing significance, every thread keeps, per register, the inclusive prefix of its
element within the segment of the axis scanned so far and that segment's total. Merging two
halves of a segment along bit k: the upper half (bit set) puts the lower half's total before
its prefix, and both halves take the merged total. A reverse scan is the mirror image: the lower
half puts the upper half's total first, as the sequential definition (the CPU backend's, and
Triton's) folds from the end, `acc = combine(acc, x[j])` for j going down. The combine is
applied in the order of the elements along the axis, so an associative but not commutative scan
is right. `doubling` is independent of how values are represented and exchanged: the backends
pass their combine, select and partner exchange (shuffles, ds_bpermute, shared memory), and
tests run it on arrays holding every thread's values at once against a sequential fold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .linear import LANE, REGISTER, WARP, LinearLayout

__all__ = ["scan_bits", "doubling"]


def scan_bits(layout: LinearLayout, axis: int) -> list[tuple[int, str, int]] | None:
    """(coordinate step, hardware dim, bit) of each bit of the axis coordinate in increasing
    significance; None when some basis moves along the axis and another dim at once, or two
    bases share a step (the recursive doubling needs one hardware bit per coordinate bit)."""
    bits = []
    for dim in (REGISTER, LANE, WARP):
        for k, basis in enumerate(layout.bases(dim)):
            if not basis[axis]:
                continue
            if any(v for d, v in enumerate(basis) if d != axis) or basis[axis] & (basis[axis] - 1):
                return None
            bits.append((basis[axis], dim, k))
    steps = sorted(s for s, _, _ in bits)
    if steps != [1 << i for i in range(len(steps))] or 1 << len(steps) != layout.out_shape[axis]:
        return None
    return sorted(bits)


def doubling(bits: list[tuple[int, str, int]], reverse: bool, regs: list[list[Any]],
             comb: Callable[[list[Any], list[Any]], list[Any]], select: Callable[[Any, Any, Any], Any],
             upper: Callable[[str, int], Any], exchange: Callable[[str, int, list[list[Any]]], list[list[Any]]],
             ) -> list[list[Any]]:
    """The recursive doubling of one thread: `regs[r]` its values (one per scanned input) in
    register r; returns the inclusive prefixes. `upper(dim, k)`: whether this thread's lane or
    wave bit k is set; `exchange(dim, k, totals)`: the totals as the partner thread across that
    bit holds them. Independent of how values are represented, so tests run it on arrays that
    hold every thread's value at once."""
    n = len(regs)
    prefix = [list(p) for p in regs]
    total = [list(p) for p in regs]

    def sel(cond: Any, a: list[Any], c: list[Any]) -> list[Any]:
        return [select(cond, u, v) for u, v in zip(a, c, strict=True)]

    for _, dim, k in bits:
        if dim == REGISTER:
            for r0 in range(n):
                if r0 >> k & 1:
                    continue
                r1 = r0 | 1 << k
                if reverse:  # the later half's total goes first
                    merged = comb(total[r1], total[r0])
                    prefix[r0] = comb(total[r1], prefix[r0])
                else:
                    merged = comb(total[r0], total[r1])
                    prefix[r1] = comb(total[r0], prefix[r1])
                total[r0], total[r1] = merged, list(merged)
            continue
        up = upper(dim, k)
        partner = exchange(dim, k, total)
        for r in range(n):
            pt = partner[r]
            after = comb(pt, total[r])  # the partner's segment first
            before = comb(total[r], pt)
            if reverse:  # the upper half (later elements) is the partner of the lower half
                prefix[r] = sel(up, prefix[r], comb(pt, prefix[r]))
                total[r] = sel(up, before, after)
            else:
                prefix[r] = sel(up, comb(pt, prefix[r]), prefix[r])
                total[r] = sel(up, after, before)
    return prefix
