"""Layer normalization, forward and backward.

Forward: one program per row; the row is walked in BLOCK_SIZE chunks three times (mean,
variance, normalize), so rows of any width work. Mean and 1/std are saved for the backward.

Backward, as in Triton's tutorial: `_layer_norm_bwd_dx_fused` computes dx for one row and adds
the row's contribution to dw and db into one of GROUP_SIZE_M partial-sum buffers, picked by
row % GROUP_SIZE_M. Rows sharing a buffer take turns through a spin lock (`tl.atomic_cas` to
take it, `tl.atomic_xchg` to release it); a per-buffer counter says whether the buffer still
holds garbage (first writer stores, later writers accumulate). `_layer_norm_bwd_dwdb` then
sums the GROUP_SIZE_M partial buffers into the final dw and db.

    python examples/layer_norm.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit, next_power_of_2


@jit
def _layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    # Mean.
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    # Variance (two passes: numerically safer than E[x^2] - E[x]^2).
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    # Normalize and apply the affine transform.
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y.to(Y.dtype.element_ty), mask=mask)


@jit
def _layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                             GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    # Which partial buffer this row adds into; Lock holds GROUP_SIZE_M locks then as many counters.
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    # dx = (w * dy - (x_hat * c1 + c2)) * rstd, c1 = mean(x_hat * w * dy), c2 = mean(w * dy).
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.0)
    wdy = tl.where(mask, wdy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    # This row's share of dw and db, added to the partial sums under the lock.
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        # First to take this buffer: it holds garbage, so overwrite instead of adding.
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@jit
def _layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr,
                         BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.0)
        db += tl.load(DB + offs, mask=mask, other=0.0)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


def layer_norm_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
                   BLOCK_SIZE: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd) of layer norm over the last dimension of x."""
    x_arg = x.reshape(-1, x.shape[-1]).contiguous()
    M, N = x_arg.shape
    y = torch.empty_like(x_arg)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    if BLOCK_SIZE is None:
        BLOCK_SIZE = min(next_power_of_2(N), 4096)
    _layer_norm_fwd[(M,)](x_arg, y, weight, bias, mean, rstd, x_arg.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE)
    return y.view_as(x), mean, rstd


def layer_norm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dw, db) of layer norm, given the forward's saved mean and rstd."""
    x_arg = x.reshape(-1, x.shape[-1]).contiguous()
    dy_arg = dy.reshape(-1, dy.shape[-1]).contiguous()
    M, N = x_arg.shape
    BLOCK_SIZE_N = next_power_of_2(N)
    if BLOCK_SIZE_N > 65536:
        raise ValueError("layer_norm_bwd keeps a whole row in one block: N must be <= 65536")
    GROUP_SIZE_M = 64
    if N <= 8192:
        GROUP_SIZE_M = 96
    if N <= 4096:
        GROUP_SIZE_M = 128
    if N <= 1024:
        GROUP_SIZE_M = 256
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=weight.device)
    # No need to zero the partial sums: the first row to take a buffer overwrites it.
    _dw = torch.empty((GROUP_SIZE_M, N), dtype=weight.dtype, device=weight.device)
    _db = torch.empty((GROUP_SIZE_M, N), dtype=weight.dtype, device=weight.device)
    dw = torch.empty((N,), dtype=weight.dtype, device=weight.device)
    db = torch.empty((N,), dtype=weight.dtype, device=weight.device)
    dx = torch.empty_like(x_arg)
    _layer_norm_bwd_dx_fused[(M,)](dx, dy_arg, _dw, _db, x_arg, weight, mean, rstd, locks, x_arg.stride(0), N,
                                   GROUP_SIZE_M=GROUP_SIZE_M, BLOCK_SIZE_N=BLOCK_SIZE_N)
    grid = lambda meta: (cdiv(N, meta["BLOCK_SIZE_N"]),)
    _layer_norm_bwd_dwdb[grid](_dw, _db, dw, db, min(GROUP_SIZE_M, M), N, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)
    return dx.view_as(x), dw, db


class LayerNorm(torch.autograd.Function):
    """torch.autograd wrapper: `LayerNorm.apply(x, normalized_shape, weight, bias, eps)`."""

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):  # type: ignore[override]
        y, mean, rstd = layer_norm_fwd(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        x, w, mean, rstd = ctx.saved_tensors
        dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
        return dx, None, dw, db, None


layer_norm = LayerNorm.apply


if __name__ == "__main__":
    torch.manual_seed(0)
    M, N = 1151, 1000
    x = (-2.3 + 0.5 * torch.randn(M, N)).requires_grad_(True)
    w = torch.rand(N, requires_grad=True)
    b = torch.rand(N, requires_grad=True)
    dy = 0.1 * torch.randn(M, N)
    y = layer_norm(x, (N,), w, b, 1e-5)
    y.backward(dy)
    dx, dw, db = x.grad.clone(), w.grad.clone(), b.grad.clone()
    x.grad = w.grad = b.grad = None
    y_ref = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
    y_ref.backward(dy)
    print(f"layer norm {M}x{N}: y  max abs diff {(y - y_ref).abs().max().item():.2e}")
    print(f"                 dx max abs diff {(dx - x.grad).abs().max().item():.2e}")
    print(f"                 dw max abs diff {(dw - w.grad).abs().max().item():.2e}")
    print(f"                 db max abs diff {(db - b.grad).abs().max().item():.2e}")
