"""Reductions and scans of register tiles along one axis (docs/layouts.md#reductions-and-scans).

Every input bit whose basis moves along the axis is classified by where it lives: register
bits are combined inside a thread, lane bits by butterfly shuffles, warp bits by a trip
through shared memory followed by more butterflies. Bases touching the axis must not move
along any other dim (true of blocked, mma and slice layouts).

Partial results are described by layouts over the same output dims whose axis dim counts the
partials still to be combined; their axis components are renumbered 1, 2, 4, ... in
hardware order after every step, so the combine must be commutative and associative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .convert import ConversionPlan, plan_conversion
from .linear import BLOCK, LANE, REGISTER, WARP, Basis, LinearLayout


@dataclass(frozen=True)
class WarpRound:
    """Convert the partials from ``before`` to ``after`` (through shared memory), then
    butterfly over ``lane_masks`` so every lane of a group holds the combined value."""

    before: LinearLayout
    after: LinearLayout
    conversion: ConversionPlan
    lane_masks: tuple[int, ...]


@dataclass(frozen=True)
class ReductionPlan:
    """Steps of a reduction along ``axis``.

    1. combine the registers that differ in ``register_bits`` (in-thread tree); registers
       that differ only in ``duplicate_register_bits`` are copies and are skipped. The
       surviving values are numbered by the remaining register bits, in order;
    2. ``shfl.bfly`` with each of ``lane_masks``;
    3. each `WarpRound` in order;
    then ``result`` (the axis output dim removed) describes who holds which reduced element.
    ``partials`` is the layout of the values after step 2 (axis dim = remaining partials).
    """

    axis: int
    register_bits: tuple[int, ...]
    duplicate_register_bits: tuple[int, ...]
    lane_masks: tuple[int, ...]
    partials: LinearLayout
    warp_rounds: tuple[WarpRound, ...]
    result: LinearLayout

    @property
    def needs_shared_memory(self) -> bool:
        """True when partials held by different warps must be combined."""
        return bool(self.warp_rounds)


def _axis_bits(layout: LinearLayout, in_dim: str, axis: int) -> tuple[int, ...]:
    return tuple(k for k, b in enumerate(layout.bases(in_dim)) if b[axis])


def _check_axis_pure(layout: LinearLayout, axis: int) -> None:
    for name, bases in layout.in_dims:
        for k, b in enumerate(bases):
            if b[axis] and any(v for i, v in enumerate(b) if i != axis):
                raise ValueError(f"{name}[{k}] = {b} moves along the axis and another dim")


def _renumber(layout: LinearLayout, axis: int) -> LinearLayout:
    """Give the remaining axis-carrying bases the components 1, 2, 4, ... in hardware order."""
    count = 0
    in_dims = []
    for name, bases in layout.in_dims:
        rows = []
        for b in bases:
            if b[axis]:
                b = tuple((1 << count) if i == axis else v for i, v in enumerate(b))
                count += 1
            rows.append(b)
        in_dims.append((name, tuple(rows)))
    sizes = tuple((n, (1 << count) if i == axis else s) for i, (n, s) in enumerate(layout.out_dims))
    return LinearLayout(tuple(in_dims), sizes)


def _zero(layout: LinearLayout, in_dim: str, bits: Sequence[int]) -> LinearLayout:
    zero = tuple(0 for _ in layout.out_dims)
    return layout.with_in_dim(in_dim, [zero if k in bits else b for k, b in enumerate(layout.bases(in_dim))])


def plan_reduction(layout: LinearLayout, axis: int, element_bits: int = 32) -> ReductionPlan:
    """Plan a reduction of a register tile along output dim ``axis``."""
    if not 0 <= axis < len(layout.out_dims):
        raise ValueError(f"axis {axis} out of range for {layout.out_dim_names}")
    _check_axis_pure(layout, axis)
    register_bits = _axis_bits(layout, REGISTER, axis)
    duplicates = tuple(k for k, b in enumerate(layout.bases(REGISTER)) if not any(b))
    current = layout.with_in_dim(
        REGISTER,
        [b for k, b in enumerate(layout.bases(REGISTER)) if k not in register_bits and k not in duplicates],
    )
    lane_bits = _axis_bits(current, LANE, axis)
    current = _renumber(_zero(current, LANE, lane_bits), axis)
    partials = current
    rounds = []
    for outer in (WARP, BLOCK):
        while _axis_bits(current, outer, axis):
            moving = _axis_bits(current, outer, axis)
            lanes = current.bases(LANE)
            zero_slots = [k for k, b in enumerate(lanes) if not any(b)]
            busy_slots = [k for k, b in enumerate(lanes) if any(b) and not b[axis]]
            slots = (zero_slots + busy_slots)[: len(moving)]
            if not slots:
                raise ValueError("no lane slot is free to receive the partials of other warps")
            outer_bases = list(current.bases(outer))
            lane_bases = list(lanes)
            for slot, bit in zip(slots, moving, strict=False):
                lane_bases[slot], outer_bases[bit] = outer_bases[bit], lane_bases[slot]
            after = current.with_in_dim(LANE, lane_bases).with_in_dim(outer, outer_bases)
            conversion = plan_conversion(current, after, element_bits)
            combined = _renumber(_zero(after, LANE, slots[: len(moving)]), axis)
            rounds.append(
                WarpRound(
                    before=current,
                    after=after,
                    conversion=conversion,
                    lane_masks=tuple(1 << s for s in slots[: len(moving)]),
                )
            )
            current = combined
    keep = [i for i in range(len(current.out_dims)) if i != axis]
    names = [f"dim{j}" for j in range(len(keep))]
    in_dims: dict[str, list[Basis]] = {}
    for name, bases in current.in_dims:
        in_dims[name] = [tuple(b[i] for i in keep) for b in bases]
    result = LinearLayout.from_bases(in_dims, {names[j]: current.out_shape[i] for j, i in enumerate(keep)})
    return ReductionPlan(
        axis=axis,
        register_bits=register_bits,
        duplicate_register_bits=duplicates,
        lane_masks=tuple(1 << k for k in lane_bits),
        partials=partials,
        warp_rounds=tuple(rounds),
        result=result,
    )


@dataclass(frozen=True)
class ScanPlan:
    """Steps of an inclusive scan along ``axis`` (docs/layouts.md#reductions-and-scans).

    The axis coordinate of a held element is ``register part + chunk·(lane part + lanes·warp
    part)``: ``register_bits``, ``lane_bits`` and ``warp_bits`` (each ascending) carry its
    bits from least to most significant. Each thread scans its chunk sequentially, lanes run a
    Hillis–Steele scan of chunk totals (``shfl.up`` by ``lane_deltas`` when the lane bits are
    contiguous), and warps combine their totals through shared memory.
    """

    axis: int
    register_bits: tuple[int, ...]
    lane_bits: tuple[int, ...]
    warp_bits: tuple[int, ...]
    lane_deltas: tuple[int, ...] | None

    @property
    def chunk(self) -> int:
        """Consecutive axis elements held by one thread."""
        return 1 << len(self.register_bits)

    @property
    def needs_shared_memory(self) -> bool:
        """True when several warps lie along the axis."""
        return bool(self.warp_bits)


def plan_scan(layout: LinearLayout, axis: int) -> ScanPlan:
    """Plan an inclusive scan along ``axis``; the axis bits must be in hardware order."""
    _check_axis_pure(layout, axis)
    if layout.has_in_dim(BLOCK) and _axis_bits(layout, BLOCK, axis):
        raise ValueError("scans across CTAs are not supported")
    expected = 1
    bits: dict[str, tuple[int, ...]] = {}
    for name in (REGISTER, LANE, WARP):
        bits[name] = _axis_bits(layout, name, axis)
        for k in bits[name]:
            if layout.bases(name)[k][axis] != expected:
                raise ValueError(
                    f"{name}[{k}] carries axis value {layout.bases(name)[k][axis]}, expected {expected}: "
                    "convert to a layout whose axis bits go register, lane, warp in order"
                )
            expected <<= 1
    lane_bits = bits[LANE]
    contiguous = all(b == lane_bits[0] + i for i, b in enumerate(lane_bits))
    deltas = tuple(1 << (lane_bits[0] + i) for i in range(len(lane_bits))) if contiguous and lane_bits else ()
    return ScanPlan(
        axis=axis,
        register_bits=bits[REGISTER],
        lane_bits=lane_bits,
        warp_bits=bits[WARP],
        lane_deltas=deltas if contiguous else None,
    )


__all__ = ["ReductionPlan", "ScanPlan", "WarpRound", "plan_reduction", "plan_scan"]
