"""Anvil kernels and the torch ops made of them (compiler.torch.op), shared by tests/torch/test_ops.py
and tests/gpu/test_torch_ops_gpu.py: gelu(x) * y with its backward as a second op, a row RMSNorm,
and an in-place add. Outputs start as NaN, so an element a kernel fails to write shows in a comparison."""

from __future__ import annotations

import math

import torch

import compiler.language as tl
from compiler import cdiv, jit, next_power_of_2
from compiler.torch import op

BLOCK = 256  # elements per program of the elementwise kernels; test sizes are not multiples of it
SQRT1_2 = 0.7071067811865476
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


@jit
def gelu_mul_kernel(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    y = tl.load(Y + offs, mask=mask)
    gelu = 0.5 * x * (1.0 + tl.erf(x * SQRT1_2))
    tl.store(Out + offs, gelu * y, mask=mask)


@jit
def gelu_mul_backward_kernel(G, X, Y, DX, DY, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(G + offs, mask=mask)
    x = tl.load(X + offs, mask=mask)
    y = tl.load(Y + offs, mask=mask)
    cdf = 0.5 * (1.0 + tl.erf(x * SQRT1_2))
    pdf = tl.exp(-0.5 * x * x) * INV_SQRT_2PI
    tl.store(DX + offs, g * y * (cdf + x * pdf), mask=mask)
    tl.store(DY + offs, g * x * cdf, mask=mask)


@jit
def rms_norm_kernel(X, W, Out, stride, N, eps, BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Out += row * stride
    if ONE_BLOCK:  # the row fits in a block: read it once
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        w = tl.load(W + cols, mask=cols < N).to(tl.float32)
        tl.store(Out + cols, (x * rstd * w).to(Out.dtype.element_ty), mask=cols < N)
    else:  # a wide row: sum of squares, then scale, BLOCK columns at a time
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=cols < N).to(tl.float32)
            tl.store(Out + cols, (x * rstd * w).to(Out.dtype.element_ty), mask=cols < N)


@jit
def add_into_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(X + offs, tl.load(X + offs, mask=mask) + tl.load(Y + offs, mask=mask), mask=mask)


@op("anvil_test::gelu_mul")
def gelu_mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """gelu(x) * y (exact gelu, erf form), elementwise; x and y of one shape and dtype."""
    x, y = x.contiguous(), y.contiguous()
    out = torch.full_like(x, float("nan"))
    n = x.numel()
    gelu_mul_kernel[(cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


@op("anvil_test::gelu_mul_backward")
def gelu_mul_backward(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    g, x, y = g.contiguous(), x.contiguous(), y.contiguous()
    dx = torch.full_like(x, float("nan"))
    dy = torch.full_like(y, float("nan"))
    n = x.numel()
    gelu_mul_backward_kernel[(cdiv(n, BLOCK),)](g, x, y, dx, dy, n, BLOCK=BLOCK)
    return dx, dy


def _gelu_mul_setup(ctx: torch.autograd.function.FunctionCtx, inputs: tuple[torch.Tensor, ...],
                    output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _gelu_mul_bwd(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = ctx.saved_tensors  # type: ignore[attr-defined]
    return gelu_mul_backward(g, x, y)


gelu_mul.register_autograd(_gelu_mul_bwd, setup_context=_gelu_mul_setup)


@op("anvil_test::rms_norm")
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x**2, -1) + eps) * w over the last dimension, accumulated in float32."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    out = torch.full_like(x2, float("nan"))
    block = min(next_power_of_2(n), 1024)
    rms_norm_kernel[(x2.shape[0],)](x2, w.contiguous(), out, x2.stride(0), n, eps, BLOCK=block,
                                    ONE_BLOCK=block >= n)
    return out.view(x.shape)


@op("anvil_test::add_into", mutates_args=("x",))
def add_into(x: torch.Tensor, y: torch.Tensor) -> None:
    """x += y, written by the kernel into x (contiguous, of y's shape and dtype)."""
    if not x.is_contiguous():
        raise ValueError("add_into writes x in place: pass a contiguous x")
    n = x.numel()
    add_into_kernel[(cdiv(n, BLOCK),)](x, y.contiguous(), n, BLOCK=BLOCK)


def gelu_mul_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * y


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).to(x.dtype)
