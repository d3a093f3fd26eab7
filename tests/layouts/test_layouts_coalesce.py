"""Coalesced layout choice for global accesses (docs/layouts.md#coalesced-global-accesses)."""

from __future__ import annotations

import pytest

from compiler.layouts import (
    LANE,
    OFFSET,
    REGISTER,
    WARP,
    BlockedEncoding,
    LinearLayout,
    MemoryAccess,
    coalesced_encoding,
    coalesced_layout,
    elements_per_thread,
    global_vector_width,
)


def access(shape: tuple[int, ...], elem: int, divisibility: int, is_store: bool = False) -> MemoryAccess:
    """Row-major access: only the last dim is contiguous, with the given byte alignment."""
    contiguity = tuple(1 for _ in shape[:-1]) + (shape[-1],)
    div = tuple(elem for _ in shape[:-1]) + (divisibility,)
    return MemoryAccess(shape, elem, contiguity, div, is_store)


def test_fp32_1d_four_per_thread() -> None:
    acc = access((1024,), 4, 16)
    assert coalesced_encoding(acc, 4) == BlockedEncoding((4,), (32,), (4,), (0,))
    layout = coalesced_layout(acc, 4)
    assert [b[0] for b in layout.bases(REGISTER)] == [1, 2, 512]
    assert [b[0] for b in layout.bases(LANE)] == [4, 8, 16, 32, 64]
    assert [b[0] for b in layout.bases(WARP)] == [128, 256]
    assert global_vector_width(layout, acc) == 4  # 2 × ld.global.v4.b32


def test_fp16_2d_eight_per_thread() -> None:
    acc = access((128, 64), 2, 16)
    assert coalesced_encoding(acc, 4) == BlockedEncoding((1, 8), (4, 8), (4, 1), (1, 0))
    layout = coalesced_layout(acc, 4)
    assert layout.bases(REGISTER) == ((0, 1), (0, 2), (0, 4), (16, 0), (32, 0), (64, 0))
    assert layout.bases(LANE) == ((0, 8), (0, 16), (0, 32), (1, 0), (2, 0))
    assert layout.bases(WARP) == ((4, 0), (8, 0))
    assert global_vector_width(layout, acc) == 8  # 16-byte loads
    # One warp instruction covers 4 rows × 128 bytes: whole lines.
    global_map = LinearLayout.from_bases(
        {"dim0": [64 << k for k in range(7)], "dim1": [1 << k for k in range(6)]}, {OFFSET: 8192}
    )
    addresses = layout.compose(global_map)
    lines = {addresses.apply_flat({LANE: lane}) * 2 // 128 for lane in range(32)}
    assert len(lines) == 4


def test_poorly_aligned_rows() -> None:
    acc = access((128, 64), 2, 4)
    assert coalesced_encoding(acc, 4) == BlockedEncoding((1, 2), (1, 32), (4, 1), (1, 0))
    layout = coalesced_layout(acc, 4)
    assert all(b[0] == 0 for b in layout.bases(LANE))
    assert global_vector_width(layout, acc) == 2


def test_small_tile_broadcasts_warps() -> None:
    acc = access((64,), 4, 16)
    assert coalesced_encoding(acc, 4) == BlockedEncoding((1,), (32,), (4,), (0,))
    layout = coalesced_layout(acc, 4)
    assert [b[0] for b in layout.bases(WARP)] == [32, 0]
    assert layout.free_variable_masks()[WARP] == 0b10  # stores predicate on (warp & 2) == 0


@pytest.mark.parametrize(
    ("shape", "elem", "expected"),
    [((4096,), 4, 4), ((4096,), 2, 8), ((4096,), 1, 16), ((4096,), 8, 2), ((256,), 4, 2), ((128,), 2, 1)],
)
def test_elements_per_thread(shape: tuple[int, ...], elem: int, expected: int) -> None:
    assert elements_per_thread(access(shape, elem, 16), 128) == expected


def test_related_accesses_and_store_cap() -> None:
    narrow = access((4096,), 2, 4)
    wide = access((4096,), 2, 16)
    assert elements_per_thread(narrow, 128) == 2
    assert elements_per_thread(narrow, 128, related=[wide]) == 8
    store = access((4096,), 2, 4, is_store=True)
    assert elements_per_thread(store, 128, related=[wide]) == 2


def test_order_follows_contiguity() -> None:
    col_major = MemoryAccess((64, 128), 4, contiguity=(64, 1), divisibility=(16, 4))
    assert col_major.order == (0, 1)
    enc = coalesced_encoding(col_major, 8)
    assert enc.order == (0, 1) and enc.size_per_thread == (4, 1)
    assert enc.threads_per_warp == (16, 2) and enc.warps_per_cta == (1, 8)
    three = MemoryAccess((4, 8, 32), 2, contiguity=(1, 1, 32), divisibility=(2, 2, 16))
    enc3 = coalesced_encoding(three, 2)
    assert enc3.size_per_thread == (1, 1, 8) and enc3.order == (2, 1, 0)
    assert enc3.threads_per_warp == (1, 8, 4) and enc3.warps_per_cta == (2, 1, 1)


def test_mask_constancy_caps_vector_width() -> None:
    acc = access((1024,), 4, 16)
    layout = coalesced_layout(acc, 4)
    assert global_vector_width(layout, acc, mask_constancy=2) == 2
    assert global_vector_width(layout, acc, mask_constancy=1024) == 4
