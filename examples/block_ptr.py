"""Block pointers: `tl.make_block_ptr`, `tl.advance` and `boundary_check`.

A block pointer describes a BLOCK-shaped window into a strided 2-D tensor (its shape, strides,
the window's offsets, and the memory order); `tl.load(ptr, boundary_check=(0, 1),
padding_option="zero")` reads it with the out-of-bounds part zero-filled, `tl.store(ptr, x,
boundary_check=(0, 1))` writes only the in-bounds part, and `tl.advance(ptr, (0, BLOCK_K))`
slides the window. Triton 3.9 removed them in favour of tensor descriptors; Anvil keeps them
because a lot of real code uses them.

Two kernels: a matmul walking K with advancing block pointers, and a 2-D transposing copy
(out = x.T) that reads one window and writes the transposed window.

    python examples/block_ptr.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def matmul_block_ptr_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    b_block = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N), order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N),
                                order=(1, 0))
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_xm, stride_xn),
                            offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N),
                            order=(1, 0))
    dst = tl.make_block_ptr(y_ptr, shape=(N, M), strides=(stride_ym, stride_yn),
                            offsets=(pid_n * BLOCK_N, pid_m * BLOCK_M), block_shape=(BLOCK_N, BLOCK_M),
                            order=(1, 0))
    tile = tl.load(src, boundary_check=(0, 1))
    tl.store(dst, tl.trans(tile), boundary_check=(0, 1))


def matmul(a: torch.Tensor, b: torch.Tensor, BLOCK_M: int = 64, BLOCK_N: int = 64, BLOCK_K: int = 32) -> torch.Tensor:
    """a @ b through block pointers (any strides; C has a's dtype, accumulation in fp32)."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0] and a.dtype == b.dtype
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))
    matmul_block_ptr_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                  c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def transpose(x: torch.Tensor, BLOCK_M: int = 32, BLOCK_N: int = 32) -> torch.Tensor:
    """x.T as a new contiguous tensor (x: 2-D, any strides)."""
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    grid = (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BLOCK_M=BLOCK_M,
                           BLOCK_N=BLOCK_N)
    return y


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.randn(200, 150)
    b = torch.randn(150, 170)
    c = matmul(a, b)
    print(f"block-pointer matmul 200x150x170: max abs error vs float64 "
          f"{(c.double() - a.double() @ b.double()).abs().max().item():.2e}")
    x = torch.randn(333, 77)
    print("block-pointer transpose equals x.T:", torch.equal(transpose(x), x.t()))
