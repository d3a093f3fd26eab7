from __future__ import annotations

import pytest
import torch


def _grads(fa, q, k, v, do, causal, sm_scale=None):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    fa.attention_reference(q, k, v, causal, sm_scale).backward(do.double())
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (1, 2, 37, 32), (2, 1, 64, 16), (1, 1, 100, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_fp32(example, f32_dot_tol, shape, causal):
    bwd = example("flash_attention_bwd")
    fa = example("flash_attention")
    q, k, v, do = (torch.randn(shape) for _ in range(4))
    o, lse = fa.attention(q, k, v, causal=causal, return_lse=True)
    got = bwd.attention_backward(q, k, v, o, lse, do, causal)
    for g, r in zip(got, _grads(fa, q, k, v, do, causal), strict=True):
        torch.testing.assert_close(g.double(), r.double(), **f32_dot_tol(1e-4, 1e-4))


@pytest.mark.parametrize("blocks", [(16, 64), (64, 16), (32, 32)])
def test_backward_blocks_causal_boundaries(example, f32_dot_tol, blocks):
    bwd = example("flash_attention_bwd")
    fa = example("flash_attention")
    q, k, v, do = (torch.randn(1, 2, 70, 16) for _ in range(4))
    o, lse = fa.attention(q, k, v, causal=True, sm_scale=0.3, return_lse=True)
    got = bwd.attention_backward(q, k, v, o, lse, do, True, 0.3, BLOCK_M=blocks[0], BLOCK_N=blocks[1])
    for g, r in zip(got, _grads(fa, q, k, v, do, True, 0.3), strict=True):
        torch.testing.assert_close(g.double(), r.double(), **f32_dot_tol(1e-4, 1e-4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_backward_half_types(example, dtype):
    bwd = example("flash_attention_bwd")
    fa = example("flash_attention")
    q, k, v, do = (torch.randn(1, 2, 77, 64, dtype=dtype) for _ in range(4))
    o, lse = fa.attention(q, k, v, return_lse=True)
    got = bwd.attention_backward(q, k, v, o, lse, do)
    assert all(g.dtype == dtype for g in got)
    tol = 3e-3 if dtype == torch.float16 else 2e-2  # P and dS are rounded to the input type for the dots
    for g, r in zip(got, _grads(fa, q, k, v, do, False), strict=True):
        torch.testing.assert_close(g.double(), r.double(), rtol=0, atol=tol)


def test_autograd_function(example, f32_dot_tol):
    bwd = example("flash_attention_bwd")
    fa = example("flash_attention")
    q, k, v = (torch.randn(2, 2, 45, 32, requires_grad=True) for _ in range(3))
    do = torch.randn(2, 2, 45, 32)
    out = bwd.attention_with_grad(q, k, v, True)
    out.backward(do)
    ref = _grads(fa, q, k, v, do, True)
    for t, r in zip((q, k, v), ref, strict=True):
        torch.testing.assert_close(t.grad.double(), r.double(), **f32_dot_tol(1e-4, 1e-4))
