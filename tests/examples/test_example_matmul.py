from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (37, 61, 29), (130, 70, 90), (64, 64, 64)])
def test_matmul_fp32(example, f32_dot_tol, M, N, K):
    mm = example("matmul")
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = mm.matmul(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), **f32_dot_tol(1e-5, 1e-4))
    assert mm.matmul_kernel.best_config is not None


@pytest.mark.parametrize("M,N,K", [(3, 5, 7), (65, 33, 47), (100, 128, 64)])
def test_matmul_fp16(example, M, N, K):
    mm = example("matmul")
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = mm.matmul(a, b)
    assert c.dtype == torch.float16
    # fp32 accumulation of exact fp16 products, then one rounding to fp16.
    torch.testing.assert_close(c, (a.double() @ b.double()).half(), rtol=1e-3, atol=1e-3)


def test_matmul_strided_and_activation(example, f32_dot_tol):
    mm = example("matmul")
    a = torch.randn(90, 50).t()[:, :70]  # 50 x 70, column-major
    b = torch.randn(80, 45)[:70:, ::2]  # 70 x 23, column stride 2
    c = mm.matmul(a, b, activation="leaky_relu")
    ref = torch.nn.functional.leaky_relu(a.double() @ b.double(), 0.01)
    torch.testing.assert_close(c.double(), ref, **f32_dot_tol(1e-5, 1e-4))


def test_matmul_autotune_caches_per_shape(example):
    mm = example("matmul")
    a, b = torch.randn(40, 30), torch.randn(30, 20)
    mm.matmul(a, b)
    n = len(mm.matmul_kernel.cache)
    mm.matmul(torch.randn(40, 30), torch.randn(30, 20))
    assert len(mm.matmul_kernel.cache) == n  # same (M, N, K): no re-tuning
