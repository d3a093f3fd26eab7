"""Persistent matrix multiplication: one program per streaming multiprocessor, each walking tiles.

A regular matmul launches one program per output tile; a persistent one launches as many programs
as the GPU runs at once (`NUM_SMS`) and lets each loop over tiles `pid, pid + NUM_SMS, ...`. The
tile order inside the loop is grouped (`GROUP_SIZE_M` rows of tiles at a time) so programs that
run together share rows of A and columns of B in cache, and an optional epilogue fuses a bias and
an activation. On the CPU backend `NUM_SMS` is simply the number of programs.

    python examples/persistent_matmul.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit


@jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                             stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                             BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                             HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_tiles = num_pid_m * num_pid_n
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    for tile_id in range(start_pid, num_tiles, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_left = K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_bn[None, :] < N), other=0.0)
            accumulator = tl.dot(a, b, accumulator)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        if HAS_BIAS:
            bias = tl.load(bias_ptr + offs_bn, mask=offs_bn < N, other=0.0)
            accumulator += bias[None, :].to(tl.float32)
        if ACTIVATION == "relu":
            accumulator = tl.maximum(accumulator, 0.0)
        elif ACTIVATION == "gelu_tanh":
            # 0.5 x (1 + tanh(u)) == x sigmoid(2u)
            inner = 0.7978845608028654 * (accumulator + 0.044715 * accumulator * accumulator * accumulator)
            accumulator = accumulator * tl.sigmoid(2.0 * inner)
        c_ptrs = c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 8


def persistent_matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str = "",
                      BLOCK_SIZE_M: int = 128, BLOCK_SIZE_N: int = 128, BLOCK_SIZE_K: int = 32,
                      GROUP_SIZE_M: int = 8, num_warps: int = 4) -> torch.Tensor:
    """a @ b (+ bias) (then "relu" or "gelu_tanh"), with a persistent grid of one program per SM."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "incompatible dimensions"
    assert a.dtype == b.dtype
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    tiles = cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)
    num_sms = min(_num_sms(a.device), tiles)
    persistent_matmul_kernel[(num_sms,)](
        a, b, c, bias if bias is not None else c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BLOCK_SIZE_M=BLOCK_SIZE_M, BLOCK_SIZE_N=BLOCK_SIZE_N, BLOCK_SIZE_K=BLOCK_SIZE_K,
        GROUP_SIZE_M=GROUP_SIZE_M, NUM_SMS=num_sms, HAS_BIAS=bias is not None, ACTIVATION=activation,
        num_warps=num_warps)
    return c


def reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str = "") -> torch.Tensor:
    out = a.double() @ b.double()
    if bias is not None:
        out = out + bias.double()
    if activation == "relu":
        out = out.clamp_min(0)
    elif activation == "gelu_tanh":
        out = torch.nn.functional.gelu(out, approximate="tanh")
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(333, 200, device=dev, dtype=torch.float16)
    b = torch.randn(200, 270, device=dev, dtype=torch.float16)
    bias = torch.randn(270, device=dev, dtype=torch.float16)
    c = persistent_matmul(a, b, bias, "gelu_tanh", BLOCK_SIZE_M=64, BLOCK_SIZE_N=64)
    err = (c.double() - reference(a, b, bias, "gelu_tanh")).abs().max().item()
    print(f"persistent matmul 333x200x270 fp16 + bias + gelu: max abs error vs float64 {err:.2e}")
