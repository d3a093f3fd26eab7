"""layouts.fill_blocked: the default blocked layout for any number of lanes per warp (32: the NVIDIA
backend's, 64: AMD's wave64): every element has an owner, the lanes fill the fast dim first, and
the 32-lane layout is the blocked layout Triton's defaults describe."""

from __future__ import annotations

import pytest

from compiler.layouts import LANE, REGISTER, WARP, blocked_layout, fill_blocked

SHAPES = [(1024,), (64,), (16,), (4, 256), (32, 32), (128, 64), (2, 8, 16), (1, 2048)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("warps", [1, 4, 8])
@pytest.mark.parametrize("vec", [1, 4])
def test_with_32_lanes_it_is_the_nvidia_layout(shape: tuple[int, ...], warps: int, vec: int) -> None:
    """Against the blocked layout's parameters written out by hand: threads per warp fill the last
    dim (after `vec` elements each) then the ones before it; warps likewise with what is left."""
    vec = min(vec, shape[-1])
    rank = len(shape)
    rem = list(shape)
    rem[-1] //= vec
    tpw, lanes = [1] * rank, 32
    for d in reversed(range(rank)):
        tpw[d] = min(lanes, rem[d])
        lanes //= tpw[d]
        rem[d] //= tpw[d]
    tpw[0] *= lanes
    wpc, warps_left = [1] * rank, warps
    for d in reversed(range(rank)):
        wpc[d] = min(warps_left, max(1, rem[d]))
        warps_left //= wpc[d]
        rem[d] = max(1, rem[d] // wpc[d])
    wpc[0] *= warps_left
    spt = [1] * (rank - 1) + [vec]
    want = blocked_layout(shape, spt, tpw, wpc, list(reversed(range(rank))))
    assert fill_blocked(shape, vec, warps, 32) == want


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("warps", [1, 4, 16])
def test_wave64_covers_every_element(shape: tuple[int, ...], warps: int) -> None:
    lay = fill_blocked(shape, min(4, shape[-1]), warps, 64)
    assert lay.in_dim_size(LANE) == 64 and lay.in_dim_size(WARP) == warps
    seen = {tuple(lay.apply({REGISTER: r, LANE: ln, WARP: w}))
            for r in range(lay.in_dim_size(REGISTER)) for ln in range(64) for w in range(warps)}
    total = 1
    for s in shape:
        total *= s
    assert len(seen) == total
    if shape[-1] >= 256:  # lane k holds the k-th group of 4 consecutive elements of a row
        assert lay.bases(LANE)[0] == tuple(4 if d == len(shape) - 1 else 0 for d in range(len(shape)))
