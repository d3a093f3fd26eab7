from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (130, 70, 90), (64, 64, 64), (257, 129, 33)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_persistent_matmul(example, M, N, K, dtype):
    pm = example("persistent_matmul")
    a, b = torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)
    c = pm.persistent_matmul(a, b, BLOCK_SIZE_M=64, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32)
    assert c.dtype == dtype
    # fp32 accumulation of exact products, one rounding to the output type
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(c.double(), pm.reference(a, b).to(dtype).double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("activation", ["", "relu", "gelu_tanh"])
def test_persistent_matmul_epilogue(example, f32_dot_tol, activation):
    pm = example("persistent_matmul")
    a, b, bias = torch.randn(100, 75), torch.randn(75, 90), torch.randn(90)
    c = pm.persistent_matmul(a, b, bias, activation, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16)
    torch.testing.assert_close(c.double(), pm.reference(a, b, bias, activation), **f32_dot_tol(1e-5, 1e-4))


def test_more_tiles_than_programs_each_written_once(example, f32_dot_tol):
    pm = example("persistent_matmul")
    a, b = torch.randn(300, 40), torch.randn(40, 300)
    # 10 x 10 tiles of 32 walked by at most 8 programs on the CPU (NUM_SMS): every tile visited
    c = pm.persistent_matmul(a, b, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16)
    assert not torch.isnan(c).any()
    torch.testing.assert_close(c.double(), pm.reference(a, b), **f32_dot_tol(1e-4, 1e-3))
