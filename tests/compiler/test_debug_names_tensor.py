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
