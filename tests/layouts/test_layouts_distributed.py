"""Register layouts checked element by element against the hardware index formulas."""

from __future__ import annotations

from math import prod

import pytest
from layout_sim import all_inputs

from compiler.layouts import (
    LANE,
    REGISTER,
    WARP,
    BlockedEncoding,
    LinearLayout,
    blocked_layout,
    mma_v2_accumulator,
    mma_v2_operand,
    slice_layout,
    tcgen05_accumulator,
    wgmma_accumulator,
)


def mixed_radix(value: int, sizes: list[int], order: tuple[int, ...]) -> list[int]:
    """Split value into digits along ``order`` (fastest first)."""
    digits = [0] * len(sizes)
    for d in order:
        digits[d] = value % sizes[d]
        value //= sizes[d]
    return digits


def blocked_formula(
    shape: tuple[int, ...],
    spt: tuple[int, ...],
    tpw: tuple[int, ...],
    wpc: tuple[int, ...],
    order: tuple[int, ...],
    reg: int,
    lane: int,
    warp: int,
) -> tuple[int, ...]:
    """The classic blocked index formula, with repetitions and wrap-around."""
    rank = len(shape)
    footprint = [spt[d] * tpw[d] * wpc[d] for d in range(rank)]
    reps = [max(1, shape[d] // footprint[d]) for d in range(rank)]
    inner = mixed_radix(reg % prod(spt), list(spt), order)
    rep = mixed_radix(reg // prod(spt), reps, order)
    lane_id = mixed_radix(lane, list(tpw), order)
    warp_id = mixed_radix(warp, list(wpc), order)
    return tuple(
        (rep[d] * footprint[d] + warp_id[d] * spt[d] * tpw[d] + lane_id[d] * spt[d] + inner[d]) % shape[d]
        for d in range(rank)
    )


BLOCKED_CASES = [
    ((64, 64), (1, 8), (4, 8), (4, 1), (1, 0)),
    ((128, 64), (1, 8), (4, 8), (4, 1), (1, 0)),
    ((1024,), (4,), (32,), (4,), (0,)),
    ((64,), (1,), (32,), (4,), (0,)),
    ((16, 16), (2, 2), (8, 4), (2, 2), (0, 1)),
    ((8, 4), (1, 4), (8, 4), (2, 2), (1, 0)),
    ((32, 8, 4), (1, 2, 2), (2, 4, 4), (1, 2, 2), (2, 1, 0)),
    ((2, 256), (1, 4), (1, 32), (2, 2), (1, 0)),
]


@pytest.mark.parametrize(("shape", "spt", "tpw", "wpc", "order"), BLOCKED_CASES)
def test_blocked_matches_formula(
    shape: tuple[int, ...],
    spt: tuple[int, ...],
    tpw: tuple[int, ...],
    wpc: tuple[int, ...],
    order: tuple[int, ...],
) -> None:
    layout = blocked_layout(shape, spt, tpw, wpc, order)
    assert layout.is_surjective
    for x in all_inputs(layout):
        expected = blocked_formula(shape, spt, tpw, wpc, order, x[REGISTER], x[LANE], x[WARP])
        assert layout.apply(x) == expected, x
    assert BlockedEncoding(spt, tpw, wpc, order).layout(shape) == layout


def test_blocked_worked_example_table() -> None:
    # docs/layouts.md#blocked-layouts: fp16 64×64, 4 warps, 4 repetitions along dim0.
    layout = blocked_layout((64, 64), (1, 8), (4, 8), (4, 1), (1, 0))
    assert layout.bases(REGISTER) == ((0, 1), (0, 2), (0, 4), (16, 0), (32, 0))
    assert layout.bases(LANE) == ((0, 8), (0, 16), (0, 32), (1, 0), (2, 0))
    assert layout.bases(WARP) == ((4, 0), (8, 0))
    assert layout.is_invertible


def test_blocked_smaller_than_footprint_broadcasts() -> None:
    layout = blocked_layout((64,), (1,), (32,), (4,), (0,))
    assert layout.bases(WARP) == ((32,), (0,))
    assert layout.free_variable_masks()[WARP] == 0b10
    tiny = blocked_layout((4,), (8,), (32,), (1,), (0,))
    assert tiny.bases(REGISTER) == ((1,), (2,), (0,))
    assert all(b == (0,) for b in tiny.bases(LANE))


def test_blocked_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        blocked_layout((48, 64), (1, 8), (4, 8), (4, 1), (1, 0))
    with pytest.raises(ValueError):
        blocked_layout((64, 64), (1, 8), (4, 8), (4, 1), (1, 1))
    with pytest.raises(ValueError):
        BlockedEncoding((1, 3), (4, 8), (4, 1), (1, 0))


def test_slice_worked_example() -> None:
    # docs/layouts.md#slices: row sums of the 64×64 blocked layout.
    parent = blocked_layout((64, 64), (1, 8), (4, 8), (4, 1), (1, 0))
    sliced = slice_layout(parent, 1)
    assert sliced == LinearLayout.from_bases(
        {REGISTER: [(16,), (32,)], LANE: [(0,), (0,), (0,), (1,), (2,)], WARP: [(4,), (8,)]}, {"dim0": 64}
    )
    assert sliced.free_variable_masks()[LANE] == 0b00111
    # Same as building the parent for shape [64, 1] first.
    assert slice_layout(blocked_layout((64, 1), (1, 8), (4, 8), (4, 1), (1, 0)), 1) == sliced


def test_slice_brute_force_against_parent() -> None:
    parent = blocked_layout((32, 16), (2, 2), (4, 8), (2, 2), (0, 1))
    sliced = slice_layout(parent, 0)
    narrow = blocked_layout((1, 16), (2, 2), (4, 8), (2, 2), (0, 1))
    for x in all_inputs(sliced):
        full_regs = narrow.in_dim_size(REGISTER)
        matches = {narrow.apply({**x, REGISTER: r})[1] for r in range(full_regs)}
        assert sliced.apply(x)[0] in matches


def ptx_mma_c(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return g + 8 * (i >> 1), 2 * t + (i & 1)


def ptx_mma_a(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def ptx_mma_b(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return 2 * t + (i & 1) + 8 * (i >> 1), g


def test_mma_v2_fragments_match_ptx() -> None:
    # docs/layouts.md#tensor-core-layouts, one warp, one instruction.
    c = mma_v2_accumulator((16, 8), (1, 1))
    a = mma_v2_operand((16, 16), 0, (1, 1))
    b = mma_v2_operand((16, 8), 1, (1, 1))
    assert c.bases(REGISTER) == ((0, 1), (8, 0))
    assert a.bases(REGISTER) == ((0, 1), (8, 0), (0, 8))
    assert b.bases(REGISTER) == ((1, 0), (8, 0))
    assert a.bases(LANE) == c.bases(LANE) == ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
    assert b.bases(LANE) == ((2, 0), (4, 0), (0, 1), (0, 2), (0, 4))
    for layout, formula, regs in ((c, ptx_mma_c, 4), (a, ptx_mma_a, 8), (b, ptx_mma_b, 4)):
        assert layout.in_dim_size(REGISTER) == regs
        for lane in range(32):
            for i in range(regs):
                assert layout.apply({REGISTER: i, LANE: lane}) == formula(lane, i)


@pytest.mark.parametrize(("shape", "warps"), [((64, 32), (2, 2)), ((32, 64), (1, 4)), ((128, 128), (4, 2))])
def test_mma_v2_accumulator_whole_cta(shape: tuple[int, int], warps: tuple[int, int]) -> None:
    layout = mma_v2_accumulator(shape, warps)
    wm, wn = warps
    reps_n = shape[1] // (8 * wn)
    for x in all_inputs(layout):
        warp_n, warp_m = x[WARP] % wn, x[WARP] // wn
        rep = x[REGISTER] >> 2
        rep_n, rep_m = rep % reps_n, rep // reps_n
        row, col = ptx_mma_c(x[LANE], x[REGISTER] & 3)
        expected = (rep_m * 16 * wm + warp_m * 16 + row, rep_n * 8 * wn + warp_n * 8 + col)
        assert layout.apply(x) == expected


def test_mma_v2_ground_truth_32x32() -> None:
    layout = mma_v2_accumulator((32, 32), (1, 1))
    assert layout.bases(REGISTER) == ((0, 1), (8, 0), (0, 8), (0, 16), (16, 0))


def test_mma_accumulator_is_next_a_operand() -> None:
    # docs/layouts.md#tensor-core-layouts: a 16×16 accumulator (two n8 instructions) has exactly the A bases.
    assert mma_v2_accumulator((16, 16), (1, 1)) == mma_v2_operand((16, 16), 0, (1, 1))
    assert mma_v2_accumulator((64, 64), (4, 1)) == mma_v2_operand((64, 64), 0, (4, 1))


def test_dot_operands_broadcast_over_other_warps() -> None:
    a = mma_v2_operand((64, 32), 0, (2, 2))
    b = mma_v2_operand((32, 64), 1, (2, 2))
    # Ampere: warp bit 0 runs along N, bit 1 along M.
    assert a.bases(WARP) == ((0, 0), (16, 0))
    assert b.bases(WARP) == ((0, 8), (0, 0))
    acc = mma_v2_accumulator((64, 64), (2, 2))
    for warp in range(4):
        rows = {acc.apply({REGISTER: r, LANE: lane, WARP: warp})[0] for r in range(32) for lane in range(32)}
        a_rows = {a.apply({REGISTER: r, LANE: lane, WARP: warp})[0] for r in range(32) for lane in range(32)}
        cols = {acc.apply({REGISTER: r, LANE: lane, WARP: warp})[1] for r in range(32) for lane in range(32)}
        b_cols = {b.apply({REGISTER: r, LANE: lane, WARP: warp})[1] for r in range(32) for lane in range(32)}
        assert rows == a_rows and cols == b_cols


@pytest.mark.parametrize("k_width", [2, 4, 8])
def test_dot_operand_k_permutation_is_consistent(k_width: int) -> None:
    # Every thread's K values, in register order, are the same sequence in A and in B.
    k = 32
    a = mma_v2_operand((16, k), 0, (1, 1), k_width=k_width)
    b = mma_v2_operand((k, 8), 1, (1, 1), k_width=k_width)
    a_k_bits = [i for i, v in enumerate(a.bases(REGISTER)) if v[1]]
    b_k_bits = [i for i, v in enumerate(b.bases(REGISTER)) if v[0]]
    assert len(a_k_bits) == len(b_k_bits)
    for lane in range(32):
        a_seq = [
            a.apply(
                {REGISTER: sum(1 << a_k_bits[j] for j in range(len(a_k_bits)) if (i >> j) & 1), LANE: lane}
            )[1]
            for i in range(1 << len(a_k_bits))
        ]
        b_seq = [
            b.apply(
                {REGISTER: sum(1 << b_k_bits[j] for j in range(len(b_k_bits)) if (i >> j) & 1), LANE: lane}
            )[0]
            for i in range(1 << len(b_k_bits))
        ]
        assert a_seq == b_seq
    if k_width == 8:
        assert a.bases(REGISTER)[:4] == ((0, 1), (0, 2), (0, 4), (8, 0))
        assert a.bases(LANE)[:2] == ((0, 8), (0, 16))


@pytest.mark.parametrize("n", [8, 16, 32, 64, 256])
def test_wgmma_accumulator_matches_ptx(n: int) -> None:
    # docs/layouts.md#tensor-core-layouts: row = 16w + g + 8((i>>1)&1), col = 8(i>>2) + 2t + (i&1).
    layout = wgmma_accumulator((64, n), (4, 1), n)
    assert layout.in_dim_size(REGISTER) == n // 2
    for x in all_inputs(layout):
        i, lane, w = x[REGISTER], x[LANE], x[WARP]
        g, t = lane >> 2, lane % 4
        assert layout.apply(x) == (16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1))


@pytest.mark.parametrize(("n", "warps"), [(16, 4), (64, 4), (128, 4), (256, 4), (64, 8), (128, 8), (256, 8)])
def test_tcgen05_accumulator_matches_the_32x32b_data_path(n: int, warps: int) -> None:
    # tcgen05.ld.32x32b.xN of an M = 128 (cta_group::1) accumulator: warp w reads TMEM lanes
    # 32 * (w % 4) + lane (= rows), register i is column i of the warp's run; with 8 warps the
    # second warpgroup reads columns n/2 onwards. Every (row, column) exactly once.
    layout = tcgen05_accumulator((128, n), warps)
    per = n // (warps // 4)
    assert layout.in_dim_size(REGISTER) == per and layout.is_invertible
    seen = set()
    for x in all_inputs(layout):
        i, lane, w = x[REGISTER], x[LANE], x[WARP]
        want = (32 * (w % 4) + lane, (w // 4) * per + i)
        assert layout.apply(x) == want
        seen.add(want)
    assert len(seen) == 128 * n
    with pytest.raises(ValueError):
        tcgen05_accumulator((64, 64), 4)
    with pytest.raises(ValueError):
        tcgen05_accumulator((128, 64), 2)


def test_wgmma_ground_truth_and_more_warps() -> None:
    layout = wgmma_accumulator((64, 16), (4, 1), 16)
    assert layout.bases(REGISTER) == ((0, 1), (8, 0), (0, 8))
    assert layout.bases(LANE) == ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
    assert layout.bases(WARP) == ((16, 0), (32, 0))
    eight = wgmma_accumulator((128, 128), (8, 1), 64)
    assert eight.bases(WARP) == ((16, 0), (32, 0), (64, 0))
    split_n = wgmma_accumulator((64, 256), (4, 2), 128)
    assert split_n.bases(WARP) == ((16, 0), (32, 0), (0, 128))
    with pytest.raises(ValueError):
        wgmma_accumulator((64, 64), (2, 2), 64)
