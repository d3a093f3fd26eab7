"""Matrix multiplication C = A @ B with `tl.dot`, grouped program order and autotuning.

Each program computes one BLOCK_SIZE_M x BLOCK_SIZE_N tile of C, walking K in BLOCK_SIZE_K
steps and accumulating in fp32. Program ids are mapped to tiles in groups of GROUP_SIZE_M
rows of tiles ("super-grouping"), so programs that run together share rows of A and columns
of B in cache. `@autotune` times each Config once per (M, N, K) and keeps the fastest.
Inputs may be fp32 or fp16 (fp16 products are accumulated in fp32; C has A's dtype).
An optional fused activation shows a nested `@jit` call.

    python examples/matmul.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import Config, autotune, cdiv, jit


def get_configs() -> list[Config]:
    return [
        Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=3,
               num_warps=4),
        Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4,
               num_warps=4),
        Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 4}, num_stages=4,
               num_warps=4),
        Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=5,
               num_warps=2),
    ]


@autotune(configs=get_configs(), key=["M", "N", "K"])
@jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    # Map the program id to the tile of C it computes, in grouped order.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Pointers to the first blocks of A and B; rows/columns past the edge wrap (masked below).
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def matmul(a: torch.Tensor, b: torch.Tensor, activation: str = "", out: torch.Tensor | None = None) -> torch.Tensor:
    """a @ b (2-D, any strides) with an optional fused "leaky_relu"."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "incompatible dimensions"
    assert a.dtype == b.dtype
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device) if out is None else out
    grid = lambda META: (cdiv(M, META["BLOCK_SIZE_M"]) * cdiv(N, META["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), ACTIVATION=activation)
    return c


if __name__ == "__main__":
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        a = torch.randn(300, 190, dtype=dtype)
        b = torch.randn(190, 250, dtype=dtype)
        c = matmul(a, b)
        ref = a.double() @ b.double()
        print(f"matmul 300x190x250 {dtype}: max abs error vs float64 {(c.double() - ref).abs().max().item():.2e}"
              f"  (best config: {matmul_kernel.best_config})")
    c = matmul(a.float(), b.float().t().contiguous().t(), activation="leaky_relu")
    ref = torch.nn.functional.leaky_relu(a.double() @ b.double(), 0.01)
    print(f"matmul + leaky_relu, B column-major: max abs error {(c.double() - ref).abs().max().item():.2e}")
