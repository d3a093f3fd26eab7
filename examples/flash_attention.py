"""Flash attention forward: softmax(Q K^T * sm_scale) V without materializing the scores.

One program computes BLOCK_M rows of the output for one (batch, head). It walks the keys and
values in BLOCK_N blocks, keeping for each query row a running maximum m_i, a running sum of
exponentials l_i and an unnormalized output acc; when m_i grows, l_i and acc are rescaled by
exp(m_old - m_new) ("online softmax"). Scores use exp2 with log2(e) folded into the scale.
Causal attention stops at the diagonal block and masks inside it. Sequence lengths need not
be multiples of the blocks: padded keys score -inf, padded queries are never stored.

    python examples/flash_attention.py
"""

from __future__ import annotations

import math

import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def _attn_fwd(Q, K, V, Out, LSE, sm_scale,
              stride_qz, stride_qh, stride_qm, stride_qk,
              stride_kz, stride_kh, stride_kn, stride_kk,
              stride_vz, stride_vh, stride_vn, stride_vk,
              stride_oz, stride_oh, stride_om, stride_ok,
              H, N_CTX,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = Q + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = K + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = V + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = Out + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                mask=offs_m[:, None] < N_CTX, other=0.0)

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1 / ln(2): exp(x) == exp2(x * log2(e))

    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    else:
        hi = N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk,
                    mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk * qk_scale, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    # On entry l_i is 1 and m_i -inf, so the first block's alpha (0) clears that 1.
    acc = acc / l_i[:, None]
    tl.store(LSE + off_hz * N_CTX + offs_m, (m_i + tl.math.log2(l_i)) / 1.44269504, mask=offs_m < N_CTX)
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok, acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N_CTX)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None, BLOCK_M: int = 32, BLOCK_N: int = 32,
              return_lse: bool = False):
    """softmax(q k^T * sm_scale [+ causal mask]) v for (batch, heads, seq, head_dim) tensors."""
    Z, H, N_CTX, HEAD_DIM = q.shape
    assert k.shape == v.shape == q.shape
    assert HEAD_DIM in (16, 32, 64, 128), "HEAD_DIM must be a power of two in 16..128"
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    o = torch.empty_like(q)
    lse = torch.empty((Z, H, N_CTX), dtype=torch.float32, device=q.device)
    grid = (cdiv(N_CTX, BLOCK_M), Z * H)
    _attn_fwd[grid](q, k, v, o, lse, sm_scale,
                    q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                    k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                    v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                    o.stride(0), o.stride(1), o.stride(2), o.stride(3),
                    H, N_CTX, HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal,
                    num_warps=8 if HEAD_DIM >= 128 else 4)  # a 128-wide accumulator fits 8 warps' registers
    return (o, lse) if return_lse else o


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        sm_scale: float | None = None) -> torch.Tensor:
    q, k, v = q.double(), k.double(), v.double()
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


if __name__ == "__main__":
    torch.manual_seed(0)
    for causal in (False, True):
        for dtype in (torch.float32, torch.float16):
            q, k, v = (torch.randn(2, 3, 197, 64, dtype=dtype) for _ in range(3))
            o = attention(q, k, v, causal=causal)
            err = (o.double() - attention_reference(q, k, v, causal)).abs().max().item()
            print(f"attention (2, 3, 197, 64) {dtype} causal={causal}: max abs error vs float64 {err:.2e}")
