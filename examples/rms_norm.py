"""RMS normalization (as in LLaMA): y = x / sqrt(mean(x^2) + eps) * w.

One program per row. A row that fits in one block is read once; a wider row is walked twice
in BLOCK_SIZE chunks (sum of squares, then scale), chosen at compile time through the
constexpr SINGLE_PASS. The accumulation is in fp32 for fp16/bf16 inputs.

    python examples/rms_norm.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import jit, next_power_of_2


@jit
def rms_norm_kernel(X, Y, W, Rstd, x_stride, y_stride, N, eps, BLOCK_SIZE: tl.constexpr,
                    SINGLE_PASS: tl.constexpr):
    row = tl.program_id(0)
    X += row * x_stride
    Y += row * y_stride
    if SINGLE_PASS:
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        w = tl.load(W + cols, mask=mask).to(tl.float32)
        tl.store(Y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for off in range(0, N, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            mask = cols < N
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=mask).to(tl.float32)
            tl.store(Y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    tl.store(Rstd + row, rstd)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, max_block: int = 4096,
             return_rstd: bool = False):
    """RMS norm over the last dimension of x (any leading shape)."""
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    M = x2.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    BLOCK_SIZE = min(next_power_of_2(N), max_block)
    rms_norm_kernel[(M,)](x2, y, weight, rstd, x2.stride(0), y.stride(0), N, eps,
                          BLOCK_SIZE=BLOCK_SIZE, SINGLE_PASS=BLOCK_SIZE >= N)
    y = y.view(x.shape)
    return (y, rstd) if return_rstd else y


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


if __name__ == "__main__":
    torch.manual_seed(0)
    for shape, dtype in (((4, 37, 4096), torch.float32), ((513, 10000), torch.float32), ((64, 768), torch.float16)):
        x = torch.randn(shape, dtype=dtype)
        w = torch.rand(shape[-1], dtype=dtype)
        y = rms_norm(x, w)
        err = (y.double() - rms_norm_reference(x, w)).abs().max().item()
        print(f"rms norm {shape} {dtype}: max abs error vs float64 {err:.2e}")
