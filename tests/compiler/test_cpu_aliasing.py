"""The CPU backend fuses a load into the loop of the store it feeds only when the load reads, at
each element, the element the store writes there. A program loads its whole tile before it
stores, as on the GPU, so a shifted read through an argument that is the same tensor as the
output (y = f(shift(x)) called with y is x) sees the old values, not the ones just stored."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def shifted(x_ptr, y_ptr, N, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = offs - SHIFT
    v = tl.load(x_ptr + src, mask=(src >= 0) & (src < N) & (offs < N), other=0.0)
    tl.store(y_ptr + offs, v * 2.0 + 1.0, mask=offs < N)


@jit
def scaled(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N) * 3.0, mask=offs < N)


@pytest.mark.parametrize("shift", [1, -1, 3])
@pytest.mark.parametrize("n", [8, 37, 64])
def test_shifted_read_through_an_aliased_argument(shift: int, n: int) -> None:
    """One program holds the whole vector (programs running at the same time see each other's
    stores in no defined order, on any backend)."""
    block = 64
    x = torch.randn(n)
    src = torch.arange(n) - shift
    ok = (src >= 0) & (src < n)
    want = torch.where(ok, x[src.clamp(0, n - 1)], torch.zeros(())) * 2.0 + 1.0
    y = x.clone()
    shifted[(1,)](y, y, n, SHIFT=shift, BLOCK=block)  # the same tensor twice
    torch.testing.assert_close(y, want)
    out = torch.full((n,), float("nan"))
    shifted[(1,)](x.clone(), out, n, SHIFT=shift, BLOCK=block)  # distinct tensors
    torch.testing.assert_close(out, want)


def test_elementwise_in_place_still_fuses_and_is_right() -> None:
    x = torch.randn(100)
    y = x.clone()
    scaled[(cdiv(100, 32),)](y, y, 100, BLOCK=32)
    torch.testing.assert_close(y, x * 3.0)
