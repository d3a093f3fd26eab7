from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("shape,max_block", [((1, 1), 1024), ((3, 1000), 1024), ((7, 3000), 512), ((4, 257), 64)])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_fp32(example, shape, max_block, reverse):
    cs = example("cumsum")
    x = torch.randn(shape)
    y = cs.cumsum(x, reverse=reverse, max_block=max_block)
    x64 = x.double()
    ref = torch.flip(torch.cumsum(torch.flip(x64, [1]), 1), [1]) if reverse else torch.cumsum(x64, 1)
    # fp32 running sums of up to 3000 N(0, 1) terms: absolute error ~ sqrt(n) * |sum| * eps.
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=2e-4)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.int64])
def test_cumsum_int_exact(example, dtype):
    cs = example("cumsum")
    x = torch.randint(-100, 100, (5, 1500), dtype=dtype)
    y = cs.cumsum(x, max_block=256)
    assert y.dtype == torch.int64
    assert torch.equal(y, torch.cumsum(x, 1))


def test_cumsum_int64_no_overflow(example):
    cs = example("cumsum")
    x = torch.full((2, 600), 2**31 - 1, dtype=torch.int32)
    assert torch.equal(cs.cumsum(x, max_block=128), torch.cumsum(x, 1))


def test_cumsum_fp16_and_strided(example):
    cs = example("cumsum")
    x = torch.randn(12, 200).half()[::3, :150]
    assert not x.is_contiguous()
    y = cs.cumsum(x)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y, torch.cumsum(x.double(), 1).half(), rtol=2e-3, atol=2e-3)
