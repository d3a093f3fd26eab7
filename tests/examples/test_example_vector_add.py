from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("n", [1, 1000, 1024, 4097, 98_432])
def test_add_matches_torch(example, n):
    va = example("vector_add")
    x, y = torch.rand(n), torch.rand(n)
    torch.testing.assert_close(va.add(x, y), x + y, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.float64])
def test_add_dtypes(example, dtype):
    va = example("vector_add")
    n = 3001
    if dtype.is_floating_point:
        x, y = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    else:
        x, y = torch.randint(-1000, 1000, (n,), dtype=dtype), torch.randint(-1000, 1000, (n,), dtype=dtype)
    torch.testing.assert_close(va.add(x, y, BLOCK_SIZE=256), x + y, rtol=0, atol=0)


def test_add_into_view_leaves_the_rest(example):
    va = example("vector_add")
    big = torch.full((3000,), -1.0)
    x, y = torch.rand(1234), torch.rand(1234)
    va.add(x, y, out=big[100:1334])
    torch.testing.assert_close(big[100:1334], x + y, rtol=0, atol=0)
    assert (big[:100] == -1).all() and (big[1334:] == -1).all()
