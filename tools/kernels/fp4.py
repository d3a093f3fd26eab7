# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type; the launchers keep the other checks)
"""FP4 (e2m1) kernels in Anvil's DSL: NVFP4 and MXFP4 quantize + pack, dequantize, and a
weight-only GEMV that dequantizes to bf16 in registers.

e2m1 codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Two codes per byte, the
even element in the low nibble. Rounding is to nearest, ties to the even code.

- NVFP4 (ModelOpt): blocks of 16 along K; per-tensor ``g = amax(W) / (448 * 6)`` (fp32);
  per block ``bs = e4m3(clamp(amax_block / 6 / g, 2^-6, 448))``; ``q = e2m1(clamp(x / (bs * g),
  -6, 6))``; ``x~ = e2m1(q) * bs * g``.
- MXFP4 (OCP MX): blocks of 32 along K; scale e8m0 ``E = clamp(floor(log2(amax)) - 2 + 127, 0,
  254)`` with value ``2^(E - 127)``; ``q = e2m1(clamp(x / 2^(E-127), -6, 6))``.
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit

from .fp8 import fp8_amax

__all__ = [
    "E2M1_VALUES", "nvfp4_quantize", "mxfp4_quantize", "fp4_dequantize", "fp4_gemv", "fp4_quantize_kernel",
    "fp4_dequantize_kernel", "fp4_gemv_kernel",
]

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
NV, MX = 0, 1


@jit
def _e2m1_encode(y):
    """fp32 -> 4-bit e2m1 code (int32), round to nearest even, saturating at 6."""
    a = tl.abs(y)
    code = ((a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32)
            + (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
            + (a > 5.0).to(tl.int32))
    return tl.where(y < 0.0, code | 8, code)


@jit
def _e2m1_decode(code):
    """4-bit e2m1 code (int32) -> fp32."""
    c = code & 7
    e = c >> 1
    m = (c & 1).to(tl.float32)
    mag = tl.where(e == 0, m * 0.5, (2.0 + m) * (1 << e).to(tl.float32) * 0.25)
    return tl.where((code & 8) != 0, -mag, mag)


@jit
def _e8m0_value(e):
    """e8m0 code (int32, 0..254) -> 2^(e - 127) as fp32."""
    return tl.where(e > 0, e << 23, 0x00400000).to(tl.float32, bitcast=True)


@jit
def fp4_quantize_kernel(w_ptr, packed_ptr, scale_ptr, amax_ptr, N, K, stride_wn, stride_wk, KIND: tl.constexpr,
                        BS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """W[N, K] -> packed uint8 [N, K/2] and one scale per BS elements along K ([N, K/BS]).

    KIND 0 (NVFP4): scales e4m3, the global scale g from amax_ptr[0]; KIND 1 (MXFP4): e8m0 codes.
    """
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    m = (rn[:, None] < N) & (rk[None, :] < K)
    w = tl.load(w_ptr + rn[:, None] * stride_wn + rk[None, :] * stride_wk, mask=m, other=0.0).to(tl.float32)
    wb = tl.reshape(w, (BLOCK_N, BLOCK_K // BS, BS))
    bmax = tl.max(tl.abs(wb), axis=2)
    if KIND == 0:
        amax = tl.load(amax_ptr)
        g = tl.where(amax > 0.0, amax / 2688.0, 1.0)
        bs8 = tl.clamp(bmax / 6.0 / g, 0.015625, 448.0).to(tl.float8e4nv)
        sv = bs8.to(tl.float32) * g
        sc = bs8
    else:
        e = ((bmax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 2
        e = tl.where(bmax > 0.0, tl.minimum(tl.maximum(e, 0), 254), 0)
        sv = _e8m0_value(e)
        sc = e.to(tl.uint8)
    codes = _e2m1_encode(tl.clamp(wb / sv[:, :, None], -6.0, 6.0))
    lo, hi = tl.split(tl.reshape(codes, (BLOCK_N, BLOCK_K // 2, 2)))
    byte = (lo | (hi << 4)).to(tl.uint8)
    rk2 = tl.program_id(1) * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)
    tl.store(packed_ptr + rn[:, None] * (K // 2) + rk2[None, :], byte, mask=(rn[:, None] < N) & (rk2[None, :] < K // 2))
    rkb = tl.program_id(1) * (BLOCK_K // BS) + tl.arange(0, BLOCK_K // BS)
    tl.store(scale_ptr + rn[:, None] * (K // BS) + rkb[None, :], sc,
             mask=(rn[:, None] < N) & (rkb[None, :] < K // BS))


@jit
def _fp4_tile(packed_ptr, scale_ptr, g, rn, k0, N, K, KIND: tl.constexpr, BS: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """Dequantized fp32 tile [BLOCK_N, BLOCK_K] of W starting at column k0."""
    rk2 = k0 // 2 + tl.arange(0, BLOCK_K // 2)
    n_ok = rn < N
    byte = tl.load(packed_ptr + rn[:, None] * (K // 2) + rk2[None, :], mask=n_ok[:, None] & (rk2[None, :] < K // 2),
                   other=0).to(tl.int32)
    codes = tl.reshape(tl.join(byte & 0xF, byte >> 4), (BLOCK_N, BLOCK_K))
    v = tl.reshape(_e2m1_decode(codes), (BLOCK_N, BLOCK_K // BS, BS))
    rkb = k0 // BS + tl.arange(0, BLOCK_K // BS)
    sm = n_ok[:, None] & (rkb[None, :] < K // BS)
    if KIND == 0:
        bs = tl.load(scale_ptr + rn[:, None] * (K // BS) + rkb[None, :], mask=sm, other=0.0).to(tl.float32)
        w = v * bs[:, :, None] * g
    else:
        e = tl.load(scale_ptr + rn[:, None] * (K // BS) + rkb[None, :], mask=sm, other=0).to(tl.int32)
        w = v * _e8m0_value(e)[:, :, None]
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@jit
def fp4_dequantize_kernel(packed_ptr, scale_ptr, g_ptr, out_ptr, N, K, KIND: tl.constexpr, BS: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    rk = k0 + tl.arange(0, BLOCK_K)
    g = tl.load(g_ptr)
    w = _fp4_tile(packed_ptr, scale_ptr, g, rn, k0, N, K, KIND, BS, BLOCK_N, BLOCK_K)
    tl.store(out_ptr + rn[:, None] * K + rk[None, :], w.to(out_ptr.dtype.element_ty),
             mask=(rn[:, None] < N) & (rk[None, :] < K))


@jit
def fp4_gemv_kernel(x_ptr, packed_ptr, scale_ptr, g_ptr, y_ptr, M, N, K, stride_xm, stride_ym, KIND: tl.constexpr,
                    BS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y[m, :] = x[m, :] @ bf16(W~)^T: weights dequantized to bf16 in registers, fp32 accumulation."""
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.program_id(1)
    g = tl.load(g_ptr)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + m * stride_xm + rk, mask=rk < K, other=0.0).to(tl.float32)
        w = _fp4_tile(packed_ptr, scale_ptr, g, rn, k0, N, K, KIND, BS, BLOCK_N, BLOCK_K)
        acc += tl.sum(w.to(tl.bfloat16).to(tl.float32) * x[None, :], axis=1)
    tl.store(y_ptr + m * stride_ym + rn, acc.to(y_ptr.dtype.element_ty), mask=rn < N)


# --- launchers ---------------------------------------------------------------------------------------


def _quantize(w: torch.Tensor, kind: int, bs: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    N, K = w.shape
    if K % bs:
        raise ValueError(f"K={K} is not a multiple of the block size {bs}")
    packed = torch.empty((N, K // 2), dtype=torch.uint8, device=w.device)
    sdt = torch.float8_e4m3fn if kind == NV else torch.uint8
    scales = torch.empty((N, K // bs), dtype=sdt, device=w.device)
    amax = fp8_amax(w) if kind == NV else torch.zeros(1, dtype=torch.float32, device=w.device)
    bk = 64
    fp4_quantize_kernel[(cdiv(N, 16), cdiv(K, bk))](w, packed, scales, amax, N, K, w.stride(0), w.stride(1),
                                                    KIND=kind, BS=bs, BLOCK_N=16, BLOCK_K=bk)
    g = torch.where(amax > 0, amax / 2688.0, torch.ones_like(amax)).reshape(())
    return packed, scales, g


def nvfp4_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W[N, K] -> (weight uint8 [N, K/2], weight_scale e4m3 [N, K/16], weight_scale_2 fp32 scalar)."""
    return _quantize(w, NV, 16)


def mxfp4_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """W[N, K] -> (packed uint8 [N, K/2], e8m0 scales uint8 [N, K/32])."""
    packed, scales, _ = _quantize(w, MX, 32)
    return packed, scales


def _kind(scales: torch.Tensor) -> tuple[int, int]:
    if scales.dtype == torch.float8_e4m3fn:
        return NV, 16
    if scales.dtype == torch.uint8:
        return MX, 32
    raise ValueError(f"scales must be float8_e4m3fn (NVFP4) or uint8 e8m0 (MXFP4), got {scales.dtype}")


def _g(g: torch.Tensor | float | None, device: torch.device) -> torch.Tensor:
    if g is None:
        return torch.ones(1, dtype=torch.float32, device=device)
    return torch.as_tensor(g, dtype=torch.float32, device=device).reshape(1)


def fp4_dequantize(packed: torch.Tensor, scales: torch.Tensor, g: torch.Tensor | float | None = None,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """W~[N, K] from packed e2m1 codes and block scales (e4m3 + g: NVFP4; uint8 e8m0: MXFP4)."""
    kind, bs = _kind(scales)
    N, K = packed.shape[0], packed.shape[1] * 2
    if tuple(scales.shape) != (N, K // bs):
        raise ValueError(f"scales shape {tuple(scales.shape)} != {(N, K // bs)}")
    out = torch.empty((N, K), dtype=dtype, device=packed.device)
    fp4_dequantize_kernel[(cdiv(N, 16), cdiv(K, 64))](packed.contiguous(), scales.contiguous(),
                                                      _g(g, packed.device), out, N, K, KIND=kind, BS=bs,
                                                      BLOCK_N=16, BLOCK_K=64)
    return out


def fp4_gemv(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, g: torch.Tensor | float | None = None,
             block_n: int = 32, block_k: int = 128) -> torch.Tensor:
    """y = x @ bf16(W~)^T for x [M, K] (small M), NVFP4 or MXFP4 weights; y has x's dtype."""
    kind, bs = _kind(scales)
    M, K = x.shape
    N = packed.shape[0]
    if packed.shape[1] * 2 != K:
        raise ValueError(f"x has K={K} but the packed weight has {packed.shape[1] * 2} columns")
    if x.stride(1) != 1:
        raise ValueError("x must be contiguous along K")
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    fp4_gemv_kernel[(cdiv(N, block_n), M)](x, packed.contiguous(), scales.contiguous(), _g(g, x.device), y, M, N,
                                           K, x.stride(0), y.stride(0), KIND=kind, BS=bs, BLOCK_N=block_n,
                                           BLOCK_K=block_k)
    return y
