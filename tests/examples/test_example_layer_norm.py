from __future__ import annotations

import pytest
import torch


def _ref(x, w, b, eps):
    x64 = x.double().detach().requires_grad_(True)
    w64 = w.double().detach().requires_grad_(True)
    b64 = b.double().detach().requires_grad_(True)
    y = torch.nn.functional.layer_norm(x64, (x.shape[-1],), w64, b64, eps)
    return x64, w64, b64, y


@pytest.mark.parametrize("shape,block", [((1, 7), None), ((33, 1000), None), ((20, 5000), 1024), ((3, 4, 129), 64)])
def test_layer_norm_forward(example, shape, block):
    ln = example("layer_norm")
    x = 1.5 + 2 * torch.randn(shape)
    w, b = torch.randn(shape[-1]), torch.randn(shape[-1])
    y, mean, rstd = ln.layer_norm_fwd(x, w, b, 1e-5, BLOCK_SIZE=block)
    _, _, _, ref = _ref(x, w, b, 1e-5)
    torch.testing.assert_close(y.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    x2 = x.reshape(-1, shape[-1]).double()
    torch.testing.assert_close(mean.double(), x2.mean(1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(rstd.double(), 1 / torch.sqrt(x2.var(1, unbiased=False) + 1e-5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("M,N", [(1, 7), (33, 1000), (700, 100), (300, 1500)])
def test_layer_norm_backward(example, M, N):
    # M=700 > GROUP_SIZE_M=256 rows per lock: rows contend for the spin locks.
    ln = example("layer_norm")
    x = -2.3 + 0.5 * torch.randn(M, N)
    w, b = torch.rand(N), torch.rand(N)
    dy = 0.1 * torch.randn(M, N)
    _, mean, rstd = ln.layer_norm_fwd(x, w, b, 1e-5)
    dx, dw, db = ln.layer_norm_bwd(dy, x, w, mean, rstd)
    x64, w64, b64, y64 = _ref(x, w, b, 1e-5)
    y64.backward(dy.double())
    torch.testing.assert_close(dx.double(), x64.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), w64.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(db.double(), b64.grad, rtol=1e-4, atol=1e-4)


def test_layer_norm_autograd(example):
    ln = example("layer_norm")
    x = torch.randn(50, 64, requires_grad=True)
    w = torch.rand(64, requires_grad=True)
    b = torch.rand(64, requires_grad=True)
    y = ln.layer_norm(x, (64,), w, b, 1e-5)
    (y * y).sum().backward()
    x64, w64, b64, y64 = _ref(x, w, b, 1e-5)
    (y64 * y64).sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(w.grad.double(), w64.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.grad.double(), b64.grad, rtol=1e-4, atol=1e-4)
