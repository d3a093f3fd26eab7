from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("shape", [(1, 1), (37, 781), (128, 1024), (5, 3000)])
def test_softmax_fp32(example, shape):
    sm = example("fused_softmax")
    x = 3 * torch.randn(shape)
    y = sm.softmax(x)
    ref = torch.softmax(x.double(), dim=1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("num_programs", [1, 3, 64])
def test_softmax_fewer_programs_than_rows(example, num_programs):
    sm = example("fused_softmax")
    x = torch.randn(50, 100)
    torch.testing.assert_close(
        sm.softmax(x, num_programs=num_programs).double(), torch.softmax(x.double(), 1), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_half(example, dtype):
    sm = example("fused_softmax")
    x = torch.randn(19, 300, dtype=dtype)
    y = sm.softmax(x)
    assert y.dtype == dtype
    ref = torch.softmax(x.double(), dim=1).to(dtype)
    torch.testing.assert_close(y, ref)


def test_softmax_strided_rows_and_extreme_values(example):
    sm = example("fused_softmax")
    base = torch.randn(40, 512)
    base[3, :] = -1e30
    base[4, 7] = 1e30
    x = base[::2, :300]  # row stride 1024, 300 columns
    torch.testing.assert_close(sm.softmax(x).double(), torch.softmax(x.double(), 1), rtol=1e-5, atol=1e-7)
