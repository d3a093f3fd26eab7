from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("shape,max_block", [((1, 1), 4096), ((3, 5, 77), 4096), ((17, 5000), 1024), ((9, 4096), 4096)])
def test_rms_norm_fp32(example, shape, max_block):
    rn = example("rms_norm")
    x = torch.randn(shape)
    w = torch.randn(shape[-1])
    y, rstd = rn.rms_norm(x, w, 1e-6, max_block=max_block, return_rstd=True)
    assert y.shape == x.shape
    torch.testing.assert_close(y.double(), rn.rms_norm_reference(x, w, 1e-6), rtol=1e-5, atol=1e-5)
    x2 = x.reshape(-1, shape[-1]).double()
    torch.testing.assert_close(rstd.double(), torch.rsqrt(x2.pow(2).mean(1) + 1e-6), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_half(example, dtype):
    rn = example("rms_norm")
    x = torch.randn(31, 700, dtype=dtype)
    w = torch.rand(700, dtype=dtype)
    y = rn.rms_norm(x, w, max_block=256)
    assert y.dtype == dtype
    torch.testing.assert_close(y, rn.rms_norm_reference(x, w).to(dtype))


def test_rms_norm_strided_rows(example):
    rn = example("rms_norm")
    x = torch.randn(20, 300)[:, :250]
    w = torch.randn(250)
    torch.testing.assert_close(rn.rms_norm(x, w).double(), rn.rms_norm_reference(x, w), rtol=1e-5, atol=1e-5)
