"""CPU backend: loops over blocks whose masks are checked true for the whole block in O(1) run a
copy without the masks (plain vector loads and stores); every other block keeps them. The results
must not change, at the edges or anywhere else (outputs poisoned), and masks that are not
recognized (or could wrap around) keep the masked loop."""

from __future__ import annotations

import re

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m, other=0.0), mask=m)


@jit
def window(x_ptr, out_ptr, lo, hi, BLOCK: tl.constexpr):
    """Reversed ranges, constant factors and bounds on both sides, index on either side."""
    base = tl.program_id(0) * BLOCK
    r = base + (BLOCK - 1 - tl.arange(0, BLOCK))  # decreasing
    m = (r >= lo) & (hi > r) & (2 * r + 1 < 2 * hi)
    tl.store(out_ptr + r, tl.load(x_ptr + r, mask=m, other=-1.0) * 2.0, mask=m)


@jit
def tile2d(a_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    p = rm[:, None] * stride + rn[None, :]
    tl.store(out_ptr + p, tl.load(a_ptr + p, mask=m, other=0.0) + 1.0, mask=m)


@jit
def wrapping(out_ptr, base, lo, BLOCK: tl.constexpr):
    """i32 offsets that wrap around inside the block: the lanes past the wrap are masked off."""
    offs = base + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.arange(0, BLOCK), offs * 0 + 7, mask=offs > lo)


@jit
def parity(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = (offs < n) & (offs % 2 == 0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@pytest.mark.parametrize("n", [1, 7, 64, 1000, 4096, 4097])
def test_add_every_size(n: int) -> None:
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full((n + 64,), float("nan"))
    add[(cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    torch.testing.assert_close(out[:n], x + y)
    assert out[n:].isnan().all()  # nothing written past n (the last block is partial)


@pytest.mark.parametrize(("lo", "hi"), [(0, 256), (5, 250), (64, 128), (100, 101), (130, 30)])
def test_window_masks(lo: int, hi: int) -> None:
    x = torch.randn(256)
    out = torch.full((256,), float("nan"))
    window[(4,)](x, out, lo, hi, BLOCK=64)
    idx = torch.arange(256)
    inside = (idx >= lo) & (idx < hi)
    torch.testing.assert_close(out[inside], x[inside] * 2)
    assert out[~inside].isnan().all()


@pytest.mark.parametrize(("M", "N"), [(64, 64), (50, 64), (64, 40), (33, 17), (128, 96)])
def test_tile2d(M: int, N: int) -> None:
    a = torch.randn(M, N)
    out = torch.full((M, N), float("nan"))
    tile2d[(cdiv(M, 32), cdiv(N, 32))](a, out, M, N, N, BM=32, BN=32)
    torch.testing.assert_close(out, a + 1)


def test_a_block_that_wraps_keeps_its_mask() -> None:
    out = torch.full((16,), -1, dtype=torch.int32)
    wrapping[(1,)](out, 2**31 - 8, 2**31 - 100, BLOCK=16)  # lanes 8.. wrap to -2^31..: masked off
    assert out[:8].eq(7).all() and out[8:].eq(-1).all()
    out.fill_(-1)
    wrapping[(1,)](out, 1000, 999, BLOCK=16)  # every lane above lo
    assert out.eq(7).all()


def test_unrecognized_masks_keep_the_masked_loop() -> None:
    x = torch.randn(300)
    out = torch.full((300,), float("nan"))
    parity[(cdiv(300, 64),)](x, out, 300, BLOCK=64)
    assert torch.equal(out[::2], x[::2]) and out[1::2].isnan().all()
    ir = parity.compile({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64}).asm["llir"]
    assert not re.search(r"store <\d+ x float>", ir)  # every vector store masked


def test_interior_blocks_use_plain_vector_stores() -> None:
    ir = add.compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024}).asm["llir"]
    assert re.search(r"store <\d+ x float>", ir)  # the copy for blocks inside the tensor
    assert "llvm.masked.store" in ir or re.search(r"store float", ir)  # and the edge block's


def test_debug_mode_keeps_its_checks() -> None:
    x, y = torch.randn(100), torch.randn(100)
    out = torch.empty(100)
    add[(2,)](x, y, out, 100, BLOCK=64, debug=True)
    torch.testing.assert_close(out, x + y)
