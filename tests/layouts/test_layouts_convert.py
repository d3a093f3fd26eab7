"""Conversion plans, executed on every element by the reference executor of layout_sim."""

from __future__ import annotations

import random

import pytest
from layout_sim import check_conversion, random_distributed

from compiler.layouts import (
    LANE,
    REGISTER,
    WARP,
    BarrierKind,
    ConversionKind,
    LinearLayout,
    Vectorisation,
    blocked_layout,
    conflict_ways,
    count_wavefronts,
    mma_v2_accumulator,
    mma_v2_operand,
    plan_conversion,
    unswizzled_shared,
    wgmma_accumulator,
)

BLOCKED_64 = blocked_layout((64, 64), (1, 8), (4, 8), (4, 1), (1, 0))
MMA_64 = mma_v2_accumulator((64, 64), (4, 1))


def test_identical_layouts_are_noop() -> None:
    plan = plan_conversion(BLOCKED_64, BLOCKED_64, 16)
    assert plan.kind == ConversionKind.NOOP and plan.dims == ()
    assert plan.register_sources == tuple(range(32))
    check_conversion(plan, BLOCKED_64, BLOCKED_64)


def test_accumulator_to_next_a_operand_is_noop() -> None:
    # docs/layouts.md#conversions: mma C (cast to fp16) → A operand of the next mma.
    acc = mma_v2_accumulator((16, 16), (1, 1))
    a = mma_v2_operand((16, 16), 0, (1, 1))
    plan = plan_conversion(acc, a, 16)
    assert plan.kind == ConversionKind.NOOP
    check_conversion(plan, acc, a)


def test_swapped_register_bases_are_a_permutation() -> None:
    regs = BLOCKED_64.bases(REGISTER)
    swapped = BLOCKED_64.with_in_dim(REGISTER, [regs[3], *regs[1:3], regs[0], regs[4]])
    plan = plan_conversion(BLOCKED_64, swapped, 16)
    assert plan.kind == ConversionKind.REGISTER_PERMUTATION and plan.dims == (REGISTER,)
    for r in range(32):
        src_r = plan.source_register(r)
        assert BLOCKED_64.apply({REGISTER: src_r}) == swapped.apply({REGISTER: r})
    check_conversion(plan, BLOCKED_64, swapped)


def test_broadcast_registers_are_stripped_and_rebroadcast() -> None:
    src = blocked_layout((4,), (8,), (32,), (1,), (0,))  # registers 4..7 repeat 0..3
    dst = blocked_layout((4,), (4,), (32,), (1,), (0,))
    plan = plan_conversion(src, dst, 32)
    assert plan.kind == ConversionKind.NOOP
    assert plan.src_registers.kept == 0b011 and plan.src.in_dim_size(REGISTER) == 4
    check_conversion(plan, src, dst)


def test_warp_broadcast_layouts_do_not_move_across_warps() -> None:
    # docs/layouts.md#conversions: both layouts broadcast over warp bit 1; identical warp sublayouts stay put.
    src = blocked_layout((64,), (1,), (32,), (4,), (0,))
    dst = src.with_in_dim(LANE, list(reversed(src.bases(LANE))))
    plan = plan_conversion(src, dst, 32)
    assert plan.kind == ConversionKind.WARP_SHUFFLE and WARP not in plan.dims
    check_conversion(plan, src, dst)


def test_blocked_to_mma_goes_through_shared_memory() -> None:
    # docs/layouts.md#conversions: warps split dim0 as (4,0),(8,0) vs (16,0),(32,0).
    plan = plan_conversion(BLOCKED_64, MMA_64, 16)
    assert plan.kind == ConversionKind.SHARED_MEMORY and WARP in plan.dims
    assert plan.shared is not None and plan.shared.barrier == BarrierKind.CTA
    assert plan.shared.scratch_bytes == 64 * 64 * 2
    check_conversion(plan, BLOCKED_64, MMA_64)


def test_shuffle_worked_example() -> None:
    # docs/layouts.md#conversions: mma C 16×16 → reg [(0,1),(0,2),(8,0)], lane [(0,4),(0,8),(1,0),(2,0),(4,0)].
    src = mma_v2_accumulator((16, 16), (1, 1))
    dst = LinearLayout.from_bases(
        {REGISTER: [(0, 1), (0, 2), (8, 0)], LANE: [(0, 4), (0, 8), (1, 0), (2, 0), (4, 0)], WARP: []},
        {"dim0": 16, "dim1": 16},
    )
    plan = plan_conversion(src, dst, 32)
    assert plan.kind == ConversionKind.WARP_SHUFFLE
    shuffle = plan.shuffle
    assert shuffle is not None
    assert shuffle.select_bases == (0, 4, 0, 0, 0)  # Rl has rank 1
    assert len(shuffle.moves) == 8 and shuffle.num_shuffles == 16
    check_conversion(plan, src, dst)
    packed = plan_conversion(src, dst, 16)
    assert packed.shuffle is not None and packed.shuffle.elements_per_word == 2
    assert packed.shuffle.num_shuffles == 8
    check_conversion(packed, src, dst)


def test_butterfly_shuffle() -> None:
    # Destination register 1 holds element 3 = src register 1 ⊕ lane 1: lane l reads lane l ^ 1.
    src = LinearLayout.from_bases({REGISTER: [1], LANE: [2, 4, 8, 16, 32], WARP: []}, {"dim0": 64})
    dst = LinearLayout.from_bases({REGISTER: [3], LANE: [2, 4, 8, 16, 32], WARP: []}, {"dim0": 64})
    plan = plan_conversion(src, dst, 32)
    assert plan.shuffle is not None and plan.shuffle.butterfly
    assert [m.lane_xor for m in plan.shuffle.moves] == [0, 1]
    assert plan.shuffle.num_shuffles == 2
    check_conversion(plan, src, dst)
    swap = LinearLayout.from_bases({REGISTER: [2], LANE: [1, 4, 8, 16, 32], WARP: []}, {"dim0": 64})
    generic = plan_conversion(src, swap, 32)
    assert generic.shuffle is not None and not generic.shuffle.butterfly
    assert generic.shuffle.select_bases == (1, 0, 0, 0, 0)
    check_conversion(generic, src, swap)


def test_wide_elements_take_two_words() -> None:
    src = LinearLayout.from_bases({REGISTER: [1], LANE: [2, 4, 8, 16, 32]}, {"dim0": 64})
    dst = LinearLayout.from_bases({REGISTER: [2], LANE: [1, 4, 8, 16, 32]}, {"dim0": 64})
    plan = plan_conversion(src, dst, 64)
    assert plan.shuffle is not None and plan.shuffle.words_per_element == 2
    check_conversion(plan, src, dst)


def test_transpose_worked_example() -> None:
    # docs/layouts.md#conversions, the transpose: fp32 32×32, one warp; lane = column → lane = row.
    src = LinearLayout.from_bases(
        {REGISTER: [(1 << k, 0) for k in range(5)], LANE: [(0, 1 << k) for k in range(5)], WARP: []},
        {"dim0": 32, "dim1": 32},
    )
    dst = LinearLayout.from_bases(
        {REGISTER: [(0, 1 << k) for k in range(5)], LANE: [(1 << k, 0) for k in range(5)], WARP: []},
        {"dim0": 32, "dim1": 32},
    )
    plan = plan_conversion(src, dst, 32, use_shuffles=False)
    shared = plan.shared
    assert plan.kind == ConversionKind.SHARED_MEMORY and shared is not None
    assert shared.barrier == BarrierKind.WARP
    inverse = shared.shared.invert()
    for r in range(32):
        for c in range(32):
            assert inverse.apply({"dim0": r, "dim1": c}) == (32 * r + (c ^ r),)
    assert shared.store.wavefronts == 32 and shared.load.wavefronts == 32  # 1 per access
    check_conversion(plan, src, dst)
    plain = plan_conversion(src, dst, 32, use_shuffles=False, swizzle=False)
    assert plain.shared is not None and plain.shared.shared == unswizzled_shared((32, 32))
    assert plain.shared.store.wavefronts == 32
    # Row-major loads: 32-way conflicts scalar; 16-byte vectors still hit 8 lines per phase.
    load = plain.shared.load
    assert count_wavefronts(load.layout, 32, Vectorisation(1, tuple(range(5)))) == 32 * 32
    assert load.vector == 4 and load.wavefronts == 8 * 4 * 8
    check_conversion(plain, src, dst)


def test_mma_to_blocked_worked_example() -> None:
    # docs/layouts.md#conversions, mma accumulator to blocked: fp16 64×64, 4 warps, mma C → blocked.
    plan = plan_conversion(MMA_64, BLOCKED_64, 16)
    shared = plan.shared
    assert shared is not None
    assert shared.store.vector == 2 and shared.load.vector == 2
    assert shared.store.wavefronts == 16 and shared.load.wavefronts == 16
    assert shared.load.layout.bases(LANE)[0] == (514,)
    check_conversion(plan, MMA_64, BLOCKED_64)
    # Segment vectors (offset bits above one 128-byte line) meet no phase lane span.
    segment = [shared.shared.flat_bases("offset")[k] for k in range(6, 12)]
    for layout in (MMA_64, BLOCKED_64):
        assert conflict_ways(segment, layout.flat_bases(LANE)) == 1
    plain = plan_conversion(MMA_64, BLOCKED_64, 16, swizzle=False)
    assert plain.shared is not None
    assert plain.shared.store.vector == 2 and plain.shared.store.wavefronts == 16 * 8
    assert plain.shared.load.vector == 8 and plain.shared.load.wavefronts == 4 * 4
    check_conversion(plain, MMA_64, BLOCKED_64)


def test_conflict_formula_matches_bank_model() -> None:
    row_major = unswizzled_shared((64, 64)).flat_bases("offset")
    segment = list(row_major[6:])  # 64 fp16 = one 128-byte line per row
    assert conflict_ways(segment, MMA_64.flat_bases(LANE)) == 8


def test_broadcast_source_stores_once_and_syncs_cta() -> None:
    src = blocked_layout((64,), (1,), (32,), (4,), (0,))  # warps 2, 3 copy warps 0, 1
    dst = blocked_layout((64,), (2,), (32,), (4,), (0,))
    plan = plan_conversion(src, dst, 32)
    assert plan.shared is not None
    assert dict(plan.shared.store.predicate) == {WARP: 0b10}
    assert plan.shared.barrier == BarrierKind.CTA
    check_conversion(plan, src, dst)
    lane_only = plan_conversion(
        src, src.with_in_dim(LANE, list(reversed(src.bases(LANE)))), 32, use_shuffles=False
    )
    assert lane_only.shared is not None and lane_only.shared.barrier == BarrierKind.CTA


def test_incompatible_layouts_are_rejected() -> None:
    with pytest.raises(ValueError):
        plan_conversion(BLOCKED_64, mma_v2_accumulator((64, 32), (4, 1)), 16)
    with pytest.raises(ValueError):
        plan_conversion(BLOCKED_64, blocked_layout((64, 64), (1, 8), (4, 8), (2, 1), (1, 0)), 16)


def _variants(rng: random.Random, layout: LinearLayout, mode: str) -> LinearLayout:
    regs, lanes, warps = (list(layout.bases(n)) for n in (REGISTER, LANE, WARP))
    if mode == "registers":
        rng.shuffle(regs)
    elif mode == "lanes":
        pool = regs + lanes
        rng.shuffle(pool)
        regs, lanes = pool[: len(regs)], pool[len(regs) :]
    return LinearLayout.from_bases({REGISTER: regs, LANE: lanes, WARP: warps}, dict(layout.out_dims))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mode", ["registers", "lanes", "any"])
def test_random_conversions_execute_correctly(seed: int, mode: str) -> None:
    rng = random.Random(seed * 7 + len(mode))
    shape = rng.choice([(32, 16), (16, 32), (64, 8), (8, 8, 8)])
    src = random_distributed(rng, shape, lane_bits=5, warp_bits=2, zeros=rng.randrange(3))
    if mode == "any":
        dst = random_distributed(rng, shape, lane_bits=5, warp_bits=2, zeros=rng.randrange(3))
    else:
        dst = _variants(rng, src, mode)
    bits = rng.choice([8, 16, 32])
    plan = plan_conversion(src, dst, bits)
    if mode == "registers":
        assert plan.kind in (ConversionKind.NOOP, ConversionKind.REGISTER_PERMUTATION)
    if mode == "lanes":
        assert plan.kind in (
            ConversionKind.NOOP,
            ConversionKind.REGISTER_PERMUTATION,
            ConversionKind.WARP_SHUFFLE,
        )
    check_conversion(plan, src, dst)
    if plan.kind == ConversionKind.WARP_SHUFFLE:
        check_conversion(plan_conversion(src, dst, bits, use_shuffles=False), src, dst)


@pytest.mark.parametrize("seed", range(6))
def test_swizzle_never_worse_than_row_major(seed: int) -> None:
    rng = random.Random(100 + seed)
    src = random_distributed(rng, (32, 32), lane_bits=5, warp_bits=2)
    dst = random_distributed(rng, (32, 32), lane_bits=5, warp_bits=2)
    swizzled = plan_conversion(src, dst, 16)
    plain = plan_conversion(src, dst, 16, swizzle=False)
    if swizzled.shared is None or plain.shared is None:
        return
    cost = swizzled.shared.store.wavefronts + swizzled.shared.load.wavefronts
    baseline = plain.shared.store.wavefronts + plain.shared.load.wavefronts
    assert cost <= baseline


def test_additive_immediate_offsets() -> None:
    # docs/layouts.md#conversions: register offsets whose bits no lane/warp term can set become ld/st immediates.
    plan = plan_conversion(MMA_64, BLOCKED_64, 16)
    assert plan.shared is not None
    load = plan.shared.load
    assert [load.layout.apply_flat({REGISTER: r}) for r in load.vector_bases()] == [
        0,
        2,
        4,
        6,
        128,
        130,
        132,
        134,
        256,
        258,
        260,
        262,
        384,
        386,
        388,
        390,
    ]
    assert [load.is_additive(r) for r in (1, 8, 16)] == [True, True, True]
    assert not load.is_additive(2)


def test_cross_cta_conversion_uses_cluster_shared_memory() -> None:
    src = LinearLayout.from_bases(
        {
            REGISTER: [(0, 1)],
            LANE: [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)],
            WARP: [(8, 0)],
            "block": [(0, 8)],
        },
        {"dim0": 16, "dim1": 16},
    )
    dst = LinearLayout.from_bases(
        {
            REGISTER: [(0, 1)],
            LANE: [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)],
            WARP: [(0, 8)],
            "block": [(8, 0)],
        },
        {"dim0": 16, "dim1": 16},
    )
    plan = plan_conversion(src, dst, 32)
    assert plan.kind == ConversionKind.CLUSTER_SHARED_MEMORY
    assert plan.shared is not None and plan.shared.barrier == BarrierKind.CLUSTER
    check_conversion(plan, src, dst)


@pytest.mark.parametrize(
    ("src", "dst", "bits"),
    [
        (
            mma_v2_accumulator((64, 128), (2, 2)),
            blocked_layout((64, 128), (1, 8), (2, 16), (4, 1), (1, 0)),
            16,
        ),
        (
            wgmma_accumulator((64, 64), (4, 1), 64),
            blocked_layout((64, 64), (1, 4), (2, 16), (4, 1), (1, 0)),
            32,
        ),
        (blocked_layout((32, 64), (1, 4), (2, 16), (4, 1), (1, 0)), mma_v2_operand((32, 64), 0, (2, 2)), 16),
        (blocked_layout((64, 32), (1, 4), (4, 8), (4, 1), (1, 0)), mma_v2_operand((64, 32), 1, (2, 2)), 16),
        (
            blocked_layout((64, 32), (4, 1), (8, 4), (1, 4), (0, 1)),
            blocked_layout((64, 32), (1, 4), (4, 8), (4, 1), (1, 0)),
            8,
        ),
    ],
)
def test_realistic_conversions(src: LinearLayout, dst: LinearLayout, bits: int) -> None:
    plan = plan_conversion(src, dst, bits)
    check_conversion(plan, src, dst)
    plain = plan_conversion(src, dst, bits, swizzle=False)
    check_conversion(plain, src, dst)
    if plan.shared is not None and plain.shared is not None:
        swizzled_cost = plan.shared.store.wavefronts + plan.shared.load.wavefronts
        assert swizzled_cost <= plain.shared.store.wavefronts + plain.shared.load.wavefronts


def test_plan_text_form() -> None:
    assert str(plan_conversion(BLOCKED_64, BLOCKED_64, 16)) == "noop"
    assert str(plan_conversion(MMA_64, BLOCKED_64, 16)) == (
        "shared_memory over (register, lane, warp): store v2 (16 wavefronts), "
        "load v2 (16 wavefronts), cta barrier, 8192 B scratch"
    )
    src = mma_v2_accumulator((16, 16), (1, 1))
    dst = LinearLayout.from_bases(
        {REGISTER: [(0, 1), (0, 2), (8, 0)], LANE: [(0, 4), (0, 8), (1, 0), (2, 0), (4, 0)], WARP: []},
        {"dim0": 16, "dim1": 16},
    )
    assert (
        str(plan_conversion(src, dst, 32))
        == "warp_shuffle over (register, lane): 16 shfl.idx, 1 element(s) per word"
    )
    swap = src.with_in_dim(REGISTER, [src.bases(REGISTER)[i] for i in (1, 0, 2)])
    assert (
        str(plan_conversion(src, swap, 16))
        == "register_permutation over (register): dst[r] = src[[0, 2, 1, 3, 4, 6, 5, 7][r]]"
    )
