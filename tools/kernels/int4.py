# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type; the launchers keep the other checks)
"""INT4 AWQ kernels in Anvil's DSL: quantize + pack, unpack + dequantize, W4A16 GEMV and GEMM.

Layout (AutoAWQ "gemm", what vLLM and transformers load), for a linear weight W[N, K]:
``qweight`` int32 [K, N/8] holds 8 uint4 along the output dimension, ``qzeros`` int32
[K/G, N/8] the zero points packed the same way, ``scales`` fp16 [K/G, N]. Inside each int32,
column j of its group of 8 sits at bit shift ``4 * [0, 4, 1, 5, 2, 6, 3, 7][j]``, which is
``4 * ((j % 2) * 4 + j // 2)``.

Quantization (asymmetric, per group of G input channels of one output row) follows AutoAWQ,
with one refinement: the scale is rounded to fp16 (the stored dtype) before the zero point and
the codes are computed, so that q, zero and every dequantization use exactly the stored scale.

    scale = fp16(max(wmax - wmin, 1e-5) / 15)
    zero  = clamp(-round(wmin / scale), 0, 15)
    q     = clamp(round(w / scale) + zero, 0, 15)
    w~    = (q - zero) * scale

The GEMV/GEMM kernels dequantize in registers: each K tile lies inside one group, so a tile
needs one row of zeros and scales.
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit
from compiler.language.extra import libdevice

__all__ = [
    "AWQ_ORDER", "awq_shift", "awq_quantize_pack", "awq_dequantize", "awq_unpack", "awq_gemv", "awq_gemm",
    "awq_quantize_pack_kernel", "awq_dequantize_kernel", "awq_unpack_kernel", "awq_gemv_kernel",
    "awq_gemm_kernel",
]

# Nibble i of an int32 holds column AWQ_ORDER[i] of its group of 8.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def awq_shift(j: int) -> int:
    """Bit shift of column ``j`` (0..7) of a group of 8 inside its packed int32."""
    return 4 * ((j % 2) * 4 + j // 2)


@jit
def _awq_shifts():
    j = tl.arange(0, 8)
    return ((j % 2) * 4 + j // 2) * 4


@jit
def _awq_unpack_cols(packed, BLOCK_N: tl.constexpr):
    """[R, BLOCK_N // 8] int32 -> [R, BLOCK_N] int32 codes in column order."""
    shifts = _awq_shifts()
    codes = (packed[:, :, None] >> shifts[None, None, :]) & 0xF
    return tl.reshape(codes, (packed.shape[0], BLOCK_N))


@jit
def awq_quantize_pack_kernel(w_ptr, qweight_ptr, qzeros_ptr, scales_ptr, N, K, stride_wn, stride_wk,
                             G: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: BLOCK_N output rows x one group of G input channels."""
    pid_n = tl.program_id(0)
    g = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = g * G + tl.arange(0, G)
    row_ok = rn < N
    w = tl.load(w_ptr + rn[:, None] * stride_wn + rk[None, :] * stride_wk, mask=row_ok[:, None], other=0.0)
    w = w.to(tl.float32)
    wmax = tl.max(w, axis=1)
    wmin = tl.min(w, axis=1)
    scale = tl.minimum(tl.maximum(wmax - wmin, 1e-5) / 15.0, 65504.0)
    scale = scale.to(tl.float16).to(tl.float32)
    zero = tl.clamp(-libdevice.rint(wmin / scale), 0.0, 15.0)
    q = tl.clamp(libdevice.rint(w / scale[:, None]) + zero[:, None], 0.0, 15.0).to(tl.int32)
    shifts = _awq_shifts()
    # qweight[k, n // 8]: 8 consecutive output columns per int32 (disjoint nibbles: xor == or).
    qt = tl.reshape(tl.trans(q), (G, BLOCK_N // 8, 8))
    packed = tl.xor_sum(qt << shifts[None, None, :], axis=2)
    rk8 = pid_n * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)
    col_ok = rk8 < N // 8
    tl.store(qweight_ptr + rk[:, None] * (N // 8) + rk8[None, :], packed, mask=col_ok[None, :])
    zp = tl.xor_sum(tl.reshape(zero.to(tl.int32), (BLOCK_N // 8, 8)) << shifts[None, :], axis=1)
    tl.store(qzeros_ptr + g * (N // 8) + rk8, zp, mask=col_ok)
    tl.store(scales_ptr + g * N + rn, scale.to(tl.float16), mask=row_ok)


@jit
def awq_unpack_kernel(packed_ptr, codes_ptr, R, C8, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    """packed int32 [R, C8] -> codes int8 [R, 8 * C8] in column order (qweight or qzeros)."""
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rc = tl.program_id(1) * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)
    m = (rr[:, None] < R) & (rc[None, :] < C8)
    p = tl.load(packed_ptr + rr[:, None] * C8 + rc[None, :], mask=m, other=0)
    codes = _awq_unpack_cols(p, BLOCK_N)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(codes_ptr + rr[:, None] * (C8 * 8) + rn[None, :], codes.to(tl.int8),
             mask=(rr[:, None] < R) & (rn[None, :] < C8 * 8))


@jit
def awq_dequantize_kernel(qweight_ptr, qzeros_ptr, scales_ptr, out_ptr, N, K, stride_on, stride_ok,
                          G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """W~[n, k] = (q - zero) * scale, written into out[N, K] (any float dtype)."""
    rk = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    rn8 = tl.program_id(1) * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mk = rk < K
    m8 = (mk[:, None]) & (rn8[None, :] < N // 8)
    q = _awq_unpack_cols(tl.load(qweight_ptr + rk[:, None] * (N // 8) + rn8[None, :], mask=m8, other=0), BLOCK_N)
    grp = rk // G
    z = _awq_unpack_cols(tl.load(qzeros_ptr + grp[:, None] * (N // 8) + rn8[None, :], mask=m8, other=0), BLOCK_N)
    m = mk[:, None] & (rn[None, :] < N)
    s = tl.load(scales_ptr + grp[:, None] * N + rn[None, :], mask=m, other=0.0).to(tl.float32)
    w = (q - z).to(tl.float32) * s
    tl.store(out_ptr + rn[None, :] * stride_on + rk[:, None] * stride_ok, w.to(out_ptr.dtype.element_ty), mask=m)


@jit
def _awq_tile(qweight_ptr, qzeros_ptr, scales_ptr, k0, rn8, rn, N, G: tl.constexpr, BLOCK_K: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """Dequantized [BLOCK_K, BLOCK_N] fp32 tile of W~^T starting at row k0 (BLOCK_K divides G)."""
    rk = k0 + tl.arange(0, BLOCK_K)
    n_ok = rn < N
    n8_ok = rn8 < N // 8
    q = _awq_unpack_cols(tl.load(qweight_ptr + rk[:, None] * (N // 8) + rn8[None, :], mask=n8_ok[None, :],
                                 other=0), BLOCK_N)
    g = k0 // G
    z = _awq_unpack_cols(tl.load(qzeros_ptr + g * (N // 8) + rn8, mask=n8_ok, other=0)[None, :], BLOCK_N)
    s = tl.load(scales_ptr + g * N + rn, mask=n_ok, other=0.0).to(tl.float32)
    return (q - z).to(tl.float32) * s[None, :]


@jit
def awq_gemv_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym,
                    G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """y[m, :] = x[m, :] @ W~^T for small M: program (n tile, row m); fp32 accumulation."""
    pid_n = tl.program_id(0)
    m = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rn8 = pid_n * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + m * stride_xm + k0 + tl.arange(0, BLOCK_K)).to(tl.float32)
        w = _awq_tile(qweight_ptr, qzeros_ptr, scales_ptr, k0, rn8, rn, N, G, BLOCK_K, BLOCK_N)
        acc += tl.sum(x[:, None] * w, axis=0)
    tl.store(y_ptr + m * stride_ym + rn, acc.to(y_ptr.dtype.element_ty), mask=rn < N)


@jit
def awq_gemm_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym,
                    G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """Y = X @ W~^T: the weight tile is dequantized to X's dtype in registers, then tl.dot."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rn8 = pid_n * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)
    m_ok = rm < M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :], mask=m_ok[:, None], other=0.0)
        w = _awq_tile(qweight_ptr, qzeros_ptr, scales_ptr, k0, rn8, rn, N, G, BLOCK_K, BLOCK_N)
        acc = tl.dot(x, w.to(x.dtype), acc)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & (rn[None, :] < N))


# --- launchers ---------------------------------------------------------------------------------------


def _check_awq(N: int, K: int, group_size: int) -> None:
    if N % 8:
        raise ValueError(f"AWQ packs 8 output channels per int32: N={N} is not a multiple of 8")
    if group_size < 16 or group_size & (group_size - 1):
        raise ValueError(f"group_size must be a power of two >= 16, got {group_size}")
    if K % group_size:
        raise ValueError(f"K={K} is not a multiple of group_size={group_size}")


def awq_quantize_pack(w: torch.Tensor, group_size: int = 128, block_n: int = 32
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W[N, K] (float) -> (qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales fp16 [K/G, N])."""
    N, K = w.shape
    _check_awq(N, K, group_size)
    qweight = torch.empty((K, N // 8), dtype=torch.int32, device=w.device)
    qzeros = torch.empty((K // group_size, N // 8), dtype=torch.int32, device=w.device)
    scales = torch.empty((K // group_size, N), dtype=torch.float16, device=w.device)
    grid = (cdiv(N, block_n), K // group_size)
    awq_quantize_pack_kernel[grid](w, qweight, qzeros, scales, N, K, w.stride(0), w.stride(1),
                                   G=group_size, BLOCK_N=block_n)
    return qweight, qzeros, scales


def awq_unpack(packed: torch.Tensor) -> torch.Tensor:
    """int32 [R, C/8] in AWQ order -> int8 codes [R, C] in column order."""
    packed = packed.contiguous()
    R, C8 = packed.shape
    codes = torch.empty((R, C8 * 8), dtype=torch.int8, device=packed.device)
    awq_unpack_kernel[(cdiv(R, 32), cdiv(C8 * 8, 64))](packed, codes, R, C8, BLOCK_R=32, BLOCK_N=64)
    return codes


def awq_dequantize(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The dequantized weight W~[N, K] from an AutoAWQ "gemm" triple."""
    K, N8 = qweight.shape
    N = N8 * 8
    group_size = K // qzeros.shape[0]
    _check_awq(N, K, group_size)
    out = torch.empty((N, K), dtype=dtype, device=qweight.device)
    bk = min(group_size, 64)
    awq_dequantize_kernel[(cdiv(K, bk), cdiv(N, 64))](qweight, qzeros, scales, out, N, K, out.stride(0),
                                                      out.stride(1), G=group_size, BLOCK_K=bk, BLOCK_N=64)
    return out


def _check_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor) -> tuple[int, int, int, int]:
    M, K = x.shape
    if qweight.shape[0] != K:
        raise ValueError(f"x has K={K} but qweight has {qweight.shape[0]} rows")
    N = qweight.shape[1] * 8
    group_size = K // qzeros.shape[0]
    _check_awq(N, K, group_size)
    if x.stride(1) != 1:
        raise ValueError("x must be contiguous along K")
    return M, N, K, group_size


def awq_gemv(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             block_n: int = 64, block_k: int = 64) -> torch.Tensor:
    """y = x @ W~^T for x [M, K] with small M (batch 1 decoding); y has x's dtype."""
    M, N, K, G = _check_gemm(x, qweight, qzeros)
    bk = min(block_k, G)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    awq_gemv_kernel[(cdiv(N, block_n), M)](x, qweight, qzeros, scales, y, M, N, K, x.stride(0), y.stride(0),
                                           G=G, BLOCK_K=bk, BLOCK_N=block_n)
    return y


def awq_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             block_m: int = 16, block_n: int = 64, block_k: int = 64) -> torch.Tensor:
    """Y = X @ W~^T for X [M, K] fp16/bf16 (batch 16-256); Y has X's dtype."""
    M, N, K, G = _check_gemm(x, qweight, qzeros)
    bk = min(block_k, G)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (cdiv(M, block_m), cdiv(N, block_n))
    awq_gemm_kernel[grid](x, qweight, qzeros, scales, y, M, N, K, x.stride(0), y.stride(0), G=G,
                          BLOCK_M=block_m, BLOCK_K=bk, BLOCK_N=block_n)
    return y
