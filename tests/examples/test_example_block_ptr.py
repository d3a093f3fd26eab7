from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (37, 61, 29), (130, 70, 90), (64, 64, 64)])
def test_block_ptr_matmul(example, f32_dot_tol, M, N, K):
    bp = example("block_ptr")
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = bp.matmul(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), **f32_dot_tol(1e-5, 1e-4))


def test_block_ptr_matmul_strided_fp16(example):
    bp = example("block_ptr")
    a = torch.randn(60, 45, dtype=torch.float16).t()  # 45 x 60, column-major
    b = torch.randn(60, 80, dtype=torch.float16)[:, 1::2]  # 60 x 40, column stride 2
    c = bp.matmul(a, b, BLOCK_M=32, BLOCK_N=16, BLOCK_K=16)
    assert c.dtype == torch.float16
    torch.testing.assert_close(c, (a.double() @ b.double()).half(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (100, 7), (64, 32)])
def test_block_ptr_transpose(example, shape):
    bp = example("block_ptr")
    x = torch.randn(shape)
    assert torch.equal(bp.transpose(x, BLOCK_M=32, BLOCK_N=16), x.t())


def test_block_ptr_transpose_strided_int(example):
    bp = example("block_ptr")
    x = torch.randint(-50, 50, (70, 90), dtype=torch.int32)[::2, 3:]
    assert torch.equal(bp.transpose(x), x.t())
