"""The split of a thread's row-major index into its own part plus a constant per register, which
the NVIDIA backend's shared-memory round trips address with (one address per thread, constant
offsets per register), checked against each layout's own map at every lane, warp and register."""

from __future__ import annotations

import random

import pytest
from layout_sim import all_inputs, random_distributed

from compiler.backends.nvidia.convert import register_offsets
from compiler.layouts import LANE, REGISTER, WARP, LinearLayout, fill_blocked, mma_v2_accumulator, wgmma_accumulator


def _row_major(point: tuple[int, ...], shape: tuple[int, ...]) -> int:
    idx = 0
    for c, s in zip(point, shape, strict=True):
        idx = idx * s + c
    return idx


def _check(layout: LinearLayout, shape: tuple[int, ...], offs: list[int]) -> None:
    for x in all_inputs(layout):
        own = layout.apply({**x, REGISTER: 0})
        got = _row_major(own, shape) + offs[x[REGISTER]]
        assert got == _row_major(layout.apply(x), shape), (x, own)


NAMED = {
    "wgmma 128x256 8 warps": (wgmma_accumulator((128, 256), (8, 1), 256), (128, 256)),
    "wgmma 64x128 4 warps": (wgmma_accumulator((64, 128), (4, 1), 128), (64, 128)),
    "mma.sync 128x128 (4,2)": (mma_v2_accumulator((128, 128), (4, 2)), (128, 128)),
    "blocked 64x128 vec 4": (fill_blocked((64, 128), 4, 4, 32), (64, 128)),
    "blocked 32x8 broadcast rows": (fill_blocked((32, 8), 1, 4, 32), (32, 8)),
    "blocked 1-D 1024": (fill_blocked((1024,), 4, 8, 32), (1024,)),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_register_offsets_of_the_backends_layouts(name: str) -> None:
    layout, shape = NAMED[name]
    offs = register_offsets(layout, shape)
    assert offs is not None and len(offs) == layout.in_dim_size(REGISTER)
    _check(layout, shape, offs)


@pytest.mark.parametrize("seed", range(20))
def test_register_offsets_of_random_distributed_layouts(seed: int) -> None:
    rng = random.Random(seed)
    shape = rng.choice([(64, 64), (32, 128), (16, 8, 32), (2048,)])
    layout = random_distributed(rng, shape, zeros=seed % 3)
    offs = register_offsets(layout, shape)
    assert offs is not None  # unit-vector bases never share a bit
    _check(layout, shape, offs)


def test_layouts_with_repeated_bases_split_only_where_it_is_exact() -> None:
    """Bases drawn with replacement from the unit vectors: some layouts give one coordinate bit to
    a register and to a lane or warp (refused), the rest must split exactly."""
    rng = random.Random(7)
    units = [(1 << k, 0) for k in range(3)] + [(0, 1 << k) for k in range(4)]
    refused = 0
    for _ in range(60):
        bases = {REGISTER: rng.choices(units, k=2), LANE: rng.choices(units, k=3), WARP: rng.choices(units, k=1)}
        layout = LinearLayout.from_bases(bases, {"dim0": 8, "dim1": 16}, require_surjective=False)
        offs = register_offsets(layout, (8, 16))
        if offs is None:
            refused += 1
        else:
            _check(layout, (8, 16), offs)
    assert 0 < refused < 60


def test_a_bit_shared_by_a_lane_and_a_register_is_refused() -> None:
    # lane 1 and register 1 both hold column bit 0: at lane 1, register 1 the element is column 0
    # (1 ^ 1), not column 2 as an index split into lane + register would have it
    layout = LinearLayout.from_bases({REGISTER: [(1,)], LANE: [(1,), (2,), (4,), (8,), (16,)], WARP: []},
                                     {"dim0": 32}, require_surjective=False)
    assert register_offsets(layout, (32,)) is None
