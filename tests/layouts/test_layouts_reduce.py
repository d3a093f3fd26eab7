"""Reduction and scan plans, executed on random data and compared with numpy-free brute force."""

from __future__ import annotations

import itertools
import random

import pytest
from layout_sim import Slot, random_distributed, run_conversion, table

from compiler.layouts import (
    LANE,
    REGISTER,
    WARP,
    ConversionKind,
    LinearLayout,
    ReductionPlan,
    blocked_layout,
    mma_v2_accumulator,
    plan_reduction,
    plan_scan,
    slice_layout,
)

BLOCKED_64 = blocked_layout((64, 64), (1, 8), (4, 8), (4, 1), (1, 0))


def run_reduction(
    plan: ReductionPlan, layout: LinearLayout, data: dict[tuple[int, ...], int]
) -> dict[Slot, int]:
    """Execute the plan: sums per (register, lane, warp) slot of ``plan.result``."""
    threads = list(itertools.product(range(layout.in_dim_size(LANE)), range(layout.in_dim_size(WARP))))
    regs = layout.in_dim_size(REGISTER)
    axis_mask = sum(1 << k for k in plan.register_bits)
    copies = sum(1 << k for k in plan.duplicate_register_bits)
    keep_mask = (regs - 1) & ~axis_mask
    kept = [r for r in range(regs) if r & (axis_mask | copies) == 0]
    values: dict[Slot, object] = {}
    for lane, warp in threads:
        for i, r in enumerate(kept):
            total = sum(
                data[layout.apply({REGISTER: r | a, LANE: lane, WARP: warp})]
                for a in range(regs)
                if a & keep_mask == 0
            )
            values[(i, lane, warp)] = total
    values = butterfly(values, plan.lane_masks)
    current = plan.partials
    for round_ in plan.warp_rounds:
        assert round_.before == current
        values = run_conversion(round_.conversion, round_.before, round_.after, values)
        values = butterfly(values, round_.lane_masks)
        current = round_.after
    return values  # type: ignore[return-value]


def butterfly(values: dict[Slot, object], masks: tuple[int, ...]) -> dict[Slot, object]:
    for mask in masks:
        values = {
            (r, lane, *rest): v + values[(r, lane ^ mask, *rest)] for (r, lane, *rest), v in values.items()
        }
    return values


def check_reduction(layout: LinearLayout, axis: int, seed: int = 0) -> ReductionPlan:
    rng = random.Random(seed)
    shape = layout.out_shape
    data = {p: rng.randrange(1000) for p in itertools.product(*(range(s) for s in shape))}
    plan = plan_reduction(layout, axis)
    held = run_reduction(plan, layout, data)
    for slot, point in table(plan.result).items():
        full = [point[:axis] + (a,) + point[axis:] for a in range(shape[axis])]
        assert held[slot] == sum(data[p] for p in full), (slot, point)
    return plan


def test_row_sum_worked_example() -> None:
    # docs/layouts.md#reductions-and-scans, axis 1.
    plan = check_reduction(BLOCKED_64, 1)
    assert plan.register_bits == (0, 1, 2)
    assert plan.lane_masks == (1, 2, 4)
    assert not plan.needs_shared_memory
    assert plan.result == LinearLayout.from_bases(
        {REGISTER: [(16,), (32,)], LANE: [(0,), (0,), (0,), (1,), (2,)], WARP: [(4,), (8,)]}, {"dim0": 64}
    )
    assert plan.result == slice_layout(BLOCKED_64, 1)


def test_column_sum_worked_example() -> None:
    # docs/layouts.md#reductions-and-scans, axis 0: warps exchange partials through shared memory.
    plan = check_reduction(BLOCKED_64, 0)
    assert plan.register_bits == (3, 4)
    assert plan.lane_masks == (8, 16)
    assert len(plan.warp_rounds) == 1
    round_ = plan.warp_rounds[0]
    assert round_.lane_masks == (8, 16)
    assert round_.conversion.kind == ConversionKind.SHARED_MEMORY
    assert round_.after.bases(LANE)[3:] == ((1, 0), (2, 0))
    assert plan.result == LinearLayout.from_bases(
        {REGISTER: [(1,), (2,), (4,)], LANE: [(8,), (16,), (32,), (0,), (0,)], WARP: [(0,), (0,)]},
        {"dim0": 64},
    )
    assert plan.result.free_variable_masks() == {REGISTER: 0, LANE: 0b11000, WARP: 0b11}


@pytest.mark.parametrize("axis", [0, 1])
def test_mma_reductions(axis: int) -> None:
    check_reduction(mma_v2_accumulator((32, 64), (2, 2)), axis)


def test_swap_into_busy_lane_slots() -> None:
    # No lane slot is free: all 32 lanes hold distinct columns and two warps lie on the axis.
    layout = LinearLayout.from_bases(
        {REGISTER: [(1, 0)], LANE: [(0, 1 << k) for k in range(5)], WARP: [(2, 0), (4, 0)]},
        {"dim0": 8, "dim1": 32},
    )
    plan = check_reduction(layout, 0)
    assert len(plan.warp_rounds) == 1 and plan.warp_rounds[0].lane_masks == (1, 2)


@pytest.mark.parametrize("seed", range(10))
def test_random_reductions(seed: int) -> None:
    rng = random.Random(seed)
    layout = random_distributed(rng, (16, 32), lane_bits=5, warp_bits=2, zeros=rng.randrange(2))
    check_reduction(layout, rng.randrange(2), seed)


def test_duplicate_registers_are_skipped() -> None:
    layout = blocked_layout((8, 4), (2, 8), (8, 4), (1, 1), (1, 0))  # dim1 bases beyond 4 are zero
    assert layout.bases(REGISTER) == ((0, 1), (0, 2), (0, 0), (1, 0))
    plan = check_reduction(layout, 1)
    assert plan.register_bits == (0, 1) and plan.duplicate_register_bits == (2,)
    assert plan.result.bases(REGISTER) == ((1,),)


def test_reduction_rejects_mixed_bases() -> None:
    layout = LinearLayout.from_bases({REGISTER: [(1, 1), (0, 1)], LANE: [(1, 0)]}, {"dim0": 2, "dim1": 2})
    with pytest.raises(ValueError, match="another dim"):
        plan_reduction(layout, 0)


def run_scan(layout: LinearLayout, axis: int, data: dict[tuple[int, ...], int]) -> dict[Slot, int]:
    """Inclusive prefix sums computed the way the scan plan prescribes."""
    plan = plan_scan(layout, axis)
    lanes, warps = layout.in_dim_size(LANE), layout.in_dim_size(WARP)
    regs = layout.in_dim_size(REGISTER)
    chunk_bits = plan.register_bits

    def chunk_order(r: int) -> int:
        return sum(1 << j for j, b in enumerate(chunk_bits) if (r >> b) & 1)

    value = {
        (r, l, w): data[layout.apply({REGISTER: r, LANE: l, WARP: w})]
        for r in range(regs)
        for l in range(lanes)
        for w in range(warps)
    }
    # 1. sequential scan of each thread's chunk.
    scanned = dict(value)
    for r, l, w in value:
        scanned[(r, l, w)] = sum(
            value[(q, l, w)]
            for q in range(regs)
            if (q & ~sum(1 << b for b in chunk_bits)) == (r & ~sum(1 << b for b in chunk_bits))
            and chunk_order(q) <= chunk_order(r)
        )
    top = sum(1 << b for b in chunk_bits)

    def total(r: int, l: int, w: int) -> int:
        return scanned[((r & ~top) | top, l, w)]

    # 2. Hillis–Steele over lanes on the axis (shfl.up by lane_deltas), on chunk totals.
    lane_mask = sum(1 << b for b in plan.lane_bits)
    assert plan.lane_deltas is not None
    running = {(r, l, w): total(r, l, w) for (r, l, w) in value}
    for delta in plan.lane_deltas:
        running = {
            (r, l, w): v + (running[(r, l - delta, w)] if (l & lane_mask) >= delta else 0)
            for (r, l, w), v in running.items()
        }
    # 3. warps: add the totals of preceding warps along the axis.
    last_lane = lane_mask
    warp_mask = sum(1 << b for b in plan.warp_bits)
    out = {}
    for (r, l, w), v in scanned.items():
        prefix_lanes = running[(r, l, w)] - total(r, l, w)
        prefix_warps = sum(
            running[(r, (l & ~lane_mask) | last_lane, q)]
            for q in range(warps)
            if (q & ~warp_mask) == (w & ~warp_mask) and (q & warp_mask) < (w & warp_mask)
        )
        out[(r, l, w)] = v + prefix_lanes + prefix_warps
    return out


@pytest.mark.parametrize(
    ("shape", "spt", "tpw", "wpc", "axis"),
    [
        ((64, 64), (1, 8), (4, 8), (4, 1), 1),
        ((16, 64), (1, 8), (4, 8), (4, 1), 0),
        ((256,), (2,), (32,), (4,), 0),
        ((16, 128), (2, 4), (2, 16), (1, 4), 1),
    ],
)
def test_scan_matches_prefix_sums(
    shape: tuple[int, ...], spt: tuple[int, ...], tpw: tuple[int, ...], wpc: tuple[int, ...], axis: int
) -> None:
    layout = blocked_layout(shape, spt, tpw, wpc, tuple(reversed(range(len(shape)))))
    rng = random.Random(1)
    data = {p: rng.randrange(100) for p in itertools.product(*(range(s) for s in shape))}
    got = run_scan(layout, axis, data)
    for slot, point in table(layout).items():
        expected = sum(data[point[:axis] + (a,) + point[axis + 1 :]] for a in range(point[axis] + 1))
        assert got[slot] == expected


def test_scan_plan_fields_and_order_check() -> None:
    plan = plan_scan(blocked_layout((16, 64), (1, 8), (4, 8), (4, 1), (1, 0)), 0)
    assert plan.register_bits == () and plan.lane_bits == (3, 4) and plan.warp_bits == (0, 1)
    assert plan.lane_deltas == (8, 16) and plan.chunk == 1 and plan.needs_shared_memory
    row = plan_scan(BLOCKED_64, 1)
    assert row.register_bits == (0, 1, 2) and row.chunk == 8 and row.lane_deltas == (1, 2, 4)
    # Repetitions along dim0 are register bits above the warps: not in hardware order.
    with pytest.raises(ValueError, match="expected"):
        plan_scan(BLOCKED_64, 0)
    with pytest.raises(ValueError):
        plan_scan(mma_v2_accumulator((16, 16), (1, 1)), 1)
