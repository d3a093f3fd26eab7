"""Debug mode names the tensor an out-of-bounds access went through (not the first pointer)."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import errors, jit


@jit(debug=True)
def _copy_then_overrun(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, v)  # y holds n elements: the unmasked store runs past it


def test_out_of_bounds_store_names_its_tensor() -> None:
    x = torch.randn(16)
    backing = torch.zeros(64)
    y = backing[:10]
    with pytest.raises(errors.OutOfBoundsError) as e:
        _copy_then_overrun[(1,)](x, y, 10, BLOCK=16)
    msg = str(e.value)
    assert "10 elements from the start of 'y_ptr' (which holds 10 elements)" in msg
    assert "x_ptr" not in msg
    assert torch.equal(backing[:10], x[:10]) and not backing[10:].any()  # nothing written past y


@jit(debug=True)
def _swap_in_loop(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    p = x_ptr
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(2):
        acc += tl.load(p + o)
        p = y_ptr  # from the second iteration on, p points into another tensor
    tl.store(out_ptr + o, acc)


def test_pointer_swapped_in_a_loop_is_not_checked_against_the_wrong_tensor() -> None:
    x, y, out = torch.randn(8), torch.randn(8), torch.full((8,), float("nan"))
    _swap_in_loop[(1,)](x, y, out, BLOCK=8)  # every access is in bounds: no error
    torch.testing.assert_close(out, x + y)
