"""Flash attention backward: dQ, dK, dV from dO without materializing the attention matrix.

The forward (flash_attention.py) saves each query row's log-sum-exp (LSE), so a score block can
be turned back into probabilities P = exp(Q K^T * scale - LSE) without a softmax pass. With
delta = rowsum(dO * O) (one small kernel):

    dV = P^T dO        dP = dO V^T        dS = P * (dP - delta)        dQ = dS K * scale,  dK = dS^T Q * scale

One kernel owns a block of keys and walks the query blocks (accumulating dK and dV in registers),
another owns a block of queries and walks the key blocks (accumulating dQ), so no output needs
atomics. Causal attention skips the blocks above the diagonal and masks inside it.
`attention_with_grad` wraps forward and backward in a torch.autograd.Function.

    python examples/flash_attention_bwd.py
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch

import compiler.language as tl
from compiler import cdiv, jit


def _forward_module():  # the forward kernel lives beside this file
    name = "anvil_examples.flash_attention"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("flash_attention.py"))
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


@jit
def _bwd_preprocess(O, DO, Delta, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta[row] = sum over the head dim of dO * O (contiguous (Z*H, N_CTX, HEAD_DIM) tensors)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = off_hz * N_CTX * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :]
    mask = rows[:, None] < N_CTX
    o = tl.load(O + ptrs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Delta + off_hz * N_CTX + rows, tl.sum(o * do, axis=1), mask=rows < N_CTX)


@jit
def _probabilities(q, k, lse, offs_m, offs_n, N_CTX, sm_scale, CAUSAL: tl.constexpr):
    """P = exp(q k^T * scale - lse) for one block, zero where masked (padding or causal)."""
    qk = tl.dot(q, tl.trans(k)) * sm_scale
    valid = (offs_m[:, None] < N_CTX) & (offs_n[None, :] < N_CTX)
    if CAUSAL:
        valid = valid & (offs_m[:, None] >= offs_n[None, :])
    return tl.where(valid, tl.exp(qk - lse[:, None]), 0.0)


@jit
def _bwd_dkdv(Q, K, V, DO, DK, DV, LSE, Delta, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    off_hz = tl.program_id(1)
    base = off_hz * N_CTX * HEAD_DIM
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_ptrs = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(K + kv_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
    v = tl.load(V + kv_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        lo = (start_n // BLOCK_M) * BLOCK_M  # query blocks above the diagonal see none of these keys
    else:
        lo = 0
    for start_m in range(lo, N_CTX, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q_ptrs = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        q = tl.load(Q + q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
        do = tl.load(DO + q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
        lse = tl.load(LSE + off_hz * N_CTX + offs_m, mask=offs_m < N_CTX, other=0.0)
        delta = tl.load(Delta + off_hz * N_CTX + offs_m, mask=offs_m < N_CTX, other=0.0)
        p = _probabilities(q, k, lse, offs_m, offs_n, N_CTX, sm_scale, CAUSAL)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    tl.store(DK + kv_ptrs, (dk * sm_scale).to(DK.dtype.element_ty), mask=offs_n[:, None] < N_CTX)
    tl.store(DV + kv_ptrs, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < N_CTX)


@jit
def _bwd_dq(Q, K, V, DO, DQ, LSE, Delta, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    base = off_hz * N_CTX * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    do = tl.load(DO + q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    lse = tl.load(LSE + off_hz * N_CTX + offs_m, mask=offs_m < N_CTX, other=0.0)
    delta = tl.load(Delta + off_hz * N_CTX + offs_m, mask=offs_m < N_CTX, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, N_CTX)
    else:
        hi = N_CTX
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ptrs = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        v = tl.load(V + kv_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        p = _probabilities(q, k, lse, offs_m, offs_n, N_CTX, sm_scale, CAUSAL)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + q_ptrs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                       do: torch.Tensor, causal: bool = False, sm_scale: float | None = None,
                       BLOCK_M: int = 32, BLOCK_N: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) for (batch, heads, seq, head_dim) tensors, given the forward's output and LSE."""
    Z, H, N_CTX, HEAD_DIM = q.shape
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.contiguous().float()
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    delta = torch.empty((Z, H, N_CTX), dtype=torch.float32, device=q.device)
    _bwd_preprocess[(cdiv(N_CTX, BLOCK_M), Z * H)](o, do, delta, N_CTX, HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M)
    warps = 8 if HEAD_DIM >= 64 else 4  # dK, dV (and dQ) accumulators of 64+ columns fit 8 warps
    _bwd_dkdv[(cdiv(N_CTX, BLOCK_N), Z * H)](q, k, v, do, dk, dv, lse, delta, sm_scale, N_CTX, HEAD_DIM=HEAD_DIM,
                                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal, num_warps=warps)
    _bwd_dq[(cdiv(N_CTX, BLOCK_M), Z * H)](q, k, v, do, dq, lse, delta, sm_scale, N_CTX, HEAD_DIM=HEAD_DIM,
                                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal, num_warps=warps)
    return dq, dk, dv


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):  # type: ignore[no-untyped-def]
        o, lse = _forward_module().attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):  # type: ignore[no-untyped-def]
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None


def attention_with_grad(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        sm_scale: float | None = None) -> torch.Tensor:
    """Flash attention with a backward pass (autograd)."""
    return _Attention.apply(q, k, v, causal, sm_scale)


if __name__ == "__main__":
    torch.manual_seed(0)
    fa = _forward_module()
    for causal in (False, True):
        q, k, v = (torch.randn(1, 2, 77, 32, requires_grad=True) for _ in range(3))
        do = torch.randn(1, 2, 77, 32)
        attention_with_grad(q, k, v, causal).backward(do)
        got = [t.grad.clone() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        fa.attention_reference(q, k, v, causal).backward(do.double())
        errs = [(g.double() - t.grad).abs().max().item() for g, t in zip(got, (q, k, v), strict=True)]
        print(f"attention backward (1, 2, 77, 32) causal={causal}: max abs error dq {errs[0]:.1e} "
              f"dk {errs[1]:.1e} dv {errs[2]:.1e}")
