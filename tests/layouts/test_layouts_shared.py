"""Shared-memory layouts against their index formulas, and the bank model."""

from __future__ import annotations

import itertools

import pytest

from compiler.layouts import (
    LANE,
    OFFSET,
    REGISTER,
    LinearLayout,
    Vectorisation,
    count_wavefronts,
    nvmma_shared,
    nvmma_swizzle,
    swizzled_shared,
    unswizzled_shared,
)
from compiler.layouts.swizzle import lanes_per_phase, phase_wavefronts


def offsets_of(layout: LinearLayout) -> dict[tuple[int, ...], int]:
    inverse = layout.invert()
    names = layout.out_dim_names
    return {
        point: inverse.apply(dict(zip(names, point, strict=True)))[0]
        for point in itertools.product(*(range(s) for s in layout.out_shape))
    }


def test_unswizzled_orders() -> None:
    row_major = unswizzled_shared((8, 16))
    assert all(off == 16 * i + j for (i, j), off in offsets_of(row_major).items())
    col_major = unswizzled_shared((8, 16), order=(0, 1))
    assert all(off == i + 8 * j for (i, j), off in offsets_of(col_major).items())
    cube = unswizzled_shared((2, 4, 8), order=(1, 2, 0))
    assert all(off == j + 4 * k + 32 * i for (i, j, k), off in offsets_of(cube).items())


def swizzle_formula(r: int, c: int, cols: int, vec: int, per_phase: int, max_phase: int) -> int:
    phase = (r // per_phase) % max_phase
    return r * cols + (((c // vec) ^ phase) % (cols // vec)) * vec + c % vec


SWIZZLE_CASES = [
    (32, 32, 2, 2, 4),
    (32, 64, 8, 1, 8),
    (64, 64, 8, 2, 4),
    (16, 32, 4, 4, 2),
    (32, 16, 1, 1, 16),
    (8, 128, 16, 1, 8),
    (64, 8, 4, 1, 8),
]


@pytest.mark.parametrize(("rows", "cols", "vec", "per_phase", "max_phase"), SWIZZLE_CASES)
def test_swizzled_matches_formula(rows: int, cols: int, vec: int, per_phase: int, max_phase: int) -> None:
    layout = swizzled_shared((rows, cols), vec, per_phase, max_phase)
    for (r, c), off in offsets_of(layout).items():
        assert off == swizzle_formula(r, c, cols, vec, per_phase, max_phase)
    transposed = swizzled_shared((cols, rows), vec, per_phase, max_phase, order=(0, 1))
    for (c, r), off in offsets_of(transposed).items():
        assert off == swizzle_formula(r, c, cols, vec, per_phase, max_phase)


def test_swizzle_worked_example() -> None:
    # docs/layouts.md#shared-memory-layouts-and-swizzles: vec 2, perPhase 2, maxPhase 4 on 32×32.
    layout = swizzled_shared((32, 32), 2, 2, 4)
    assert layout.bases(OFFSET)[5:] == ((1, 0), (2, 2), (4, 4), (8, 0), (16, 0))
    assert layout.bases(OFFSET)[:5] == ((0, 1), (0, 2), (0, 4), (0, 8), (0, 16))


@pytest.mark.parametrize(
    ("mode", "rows"),
    [(128, ((1, 8), (2, 16), (4, 32))), (64, ((1, 0), (2, 8), (4, 16))), (32, ((1, 0), (2, 0), (4, 8)))],
)
def test_nvmma_fp16_row_bases(mode: int, rows: tuple[tuple[int, int], ...]) -> None:
    width = mode // 2
    layout = nvmma_shared((64, width), 16, mode)
    bits = width.bit_length() - 1
    assert layout.bases(OFFSET)[bits : bits + 3] == rows
    params = nvmma_swizzle(mode, 16)
    assert (params.vec, params.per_phase * params.max_phase, params.row_elements) == (8, 8, width)


@pytest.mark.parametrize("mode", [32, 64, 128])
@pytest.mark.parametrize("element_bits", [8, 16, 32])
def test_nvmma_matches_byte_address_formula(mode: int, element_bits: int) -> None:
    size = element_bits // 8
    width = mode // size
    shape = (32, 2 * width)
    layout = nvmma_shared(shape, element_bits, mode)
    max_phase = mode // 16
    for (r, c), off in offsets_of(layout).items():
        linear = ((c // width) * shape[0] + r) * mode + (c % width) * size
        swizzled = linear ^ (((linear >> 7) & (max_phase - 1)) << 4)
        assert off * size == swizzled


def test_nvmma_transposed_and_errors() -> None:
    layout = nvmma_shared((64, 32), 16, 128, transposed=True)
    plain = nvmma_shared((32, 64), 16, 128)
    assert layout == plain.transpose_outs(["dim1", "dim0"]).rename_outs({"dim1": "dim0", "dim0": "dim1"})
    with pytest.raises(ValueError):
        nvmma_shared((64, 32), 16, 128)
    with pytest.raises(ValueError):
        nvmma_swizzle(48, 16)


def test_bank_model_phases() -> None:
    assert [lanes_per_phase(b) for b in (1, 2, 4, 8, 16)] == [32, 32, 32, 16, 8]
    assert phase_wavefronts([4 * lane for lane in range(32)], 4) == 1
    assert phase_wavefronts([128 * lane for lane in range(32)], 4) == 32
    assert phase_wavefronts([0] * 32, 4) == 1  # broadcast
    assert phase_wavefronts([2 * lane for lane in range(32)], 2) == 1  # two lanes per word
    assert phase_wavefronts([16 * lane for lane in range(8)], 16) == 1


def test_count_wavefronts_row_vs_column_access() -> None:
    # One warp, 32×32 fp32 row-major: lane = column is conflict-free, lane = row is 32-way.
    by_column = LinearLayout.from_bases(
        {REGISTER: [32 << k for k in range(5)], LANE: [1 << k for k in range(5)]}, {OFFSET: 1024}
    )
    by_row = LinearLayout.from_bases(
        {REGISTER: [1 << k for k in range(5)], LANE: [32 << k for k in range(5)]}, {OFFSET: 1024}
    )
    scalar = Vectorisation(1, tuple(range(5)))
    assert count_wavefronts(by_column, 32, scalar) == 32
    assert count_wavefronts(by_row, 32, scalar) == 32 * 32
    # 16-byte vectors: 8 instructions × 4 phases of 8 lanes, each lane on its own line.
    assert count_wavefronts(by_row, 32, by_row.vectorisation(OFFSET, max_width=4)) == 8 * 4 * 8
    assert count_wavefronts(by_row, 32, scalar, skip={LANE: 0b11110}) == 32 * 2
