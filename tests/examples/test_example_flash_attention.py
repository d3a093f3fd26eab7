from __future__ import annotations

import math

import pytest
import torch


@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (1, 2, 37, 32), (2, 1, 64, 16), (1, 1, 100, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_fp32(example, f32_dot_tol, shape, causal):
    fa = example("flash_attention")
    q, k, v = (torch.randn(shape) for _ in range(3))
    o, lse = fa.attention(q, k, v, causal=causal, return_lse=True)
    ref = fa.attention_reference(q, k, v, causal)
    torch.testing.assert_close(o.double(), ref, **f32_dot_tol(1e-5, 1e-5))
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(shape[-1])
    if causal:
        n = shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), **f32_dot_tol(1e-5, 1e-5))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_fp16(example, causal):
    fa = example("flash_attention")
    q, k, v = (torch.randn(1, 2, 77, 32, dtype=torch.float16) for _ in range(3))
    o = fa.attention(q, k, v, causal=causal)
    assert o.dtype == torch.float16
    # P is rounded to fp16 before P @ V, as on the GPU.
    torch.testing.assert_close(o.double(), fa.attention_reference(q, k, v, causal), rtol=0, atol=3e-3)


def test_attention_blocks_and_scale(example, f32_dot_tol):
    fa = example("flash_attention")
    q, k, v = (torch.randn(1, 1, 50, 16) for _ in range(3))
    for bm, bn in ((16, 64), (64, 16)):
        o = fa.attention(q, k, v, causal=True, sm_scale=0.3, BLOCK_M=bm, BLOCK_N=bn)
        torch.testing.assert_close(o.double(), fa.attention_reference(q, k, v, True, 0.3),
                                   **f32_dot_tol(1e-5, 1e-5))


def test_attention_strided_inputs(example, f32_dot_tol):
    fa = example("flash_attention")
    # (batch, seq, heads, dim) memory viewed as (batch, heads, seq, dim).
    q, k, v = (torch.randn(2, 45, 3, 32).transpose(1, 2) for _ in range(3))
    o = fa.attention(q, k, v)
    torch.testing.assert_close(o.double(), fa.attention_reference(q, k, v), **f32_dot_tol(1e-5, 1e-5))


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_half_types_and_head_dims(example, head_dim, dtype, causal):
    fa = example("flash_attention")
    q, k, v = (torch.randn(1, 2, 100, head_dim, dtype=dtype) for _ in range(3))
    o = fa.attention(q, k, v, causal=causal, BLOCK_M=64, BLOCK_N=32)
    assert o.dtype == dtype
    # P is rounded to q's type before P @ V, as on the GPU; bf16 keeps 8 mantissa bits
    tol = 3e-3 if dtype == torch.float16 else 2e-2
    torch.testing.assert_close(o.double(), fa.attention_reference(q, k, v, causal), rtol=0, atol=tol)
