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
    "awq_gemm_kernel", "awq_gemv_split", "splitk_reduce_kernel",
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
def _nibble_f32(w, magic, I: tl.constexpr, EXACT: tl.constexpr):
    """Nibble I (bits 4I..4I+3) of each int32 of `w` as the fp32 value OFF + q, exactly, built by
    placing q in the mantissa under a fixed exponent (no int->float conversion instruction).

    EXACT: q goes to mantissa bits 19..22 under the exponent of 16.0, so the value is 16 + q (one
    shift per nibble). Otherwise nibbles 2j and 2j+1 share one shift: the odd one lands on bits
    19..22 (16 + q), the even one on bits 15..18 under the exponent of 256.0 (256 + q). OFF
    cancels in sum_k x_k (f_k - OFF - z) = A - (OFF + z) X; a larger OFF costs precision (about
    8 bits of the fp32 accumulator at 256: fine for 16-bit activations, not for fp32 ones).

    `magic` is the bit pattern of 16.0 (0x41800000) passed at run time: as a register operand the
    mask-and-OR is one LOP3 on NVIDIA GPUs (a LOP3 takes one immediate, and two constants would
    need two instructions)."""
    if EXACT:
        SH: tl.constexpr = 19 - 4 * I
    else:
        SH: tl.constexpr = 19 - 4 * I - 4 * ((I + 1) % 2)
    if SH > 0:
        v = w << SH
    elif SH < 0:
        v = w >> (0 - SH)
    else:
        v = w
    if EXACT or I % 2 == 1:
        out = (v & 0x780000) | magic
    else:
        out = (v & 0x78000) | (magic + 0x02000000)
    return out.to(tl.float32, bitcast=True)


@jit
def awq_gemv_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym, N8, NG,
                    GROUPS_PER_SPLIT, stride_ys, MAGIC, G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                    UNROLL: tl.constexpr, EXACT: tl.constexpr, EVEN_N: tl.constexpr):
    """y[m, n] (+ split s's partial at y + s * stride_ys) = sum over this split's K rows of x[m, k] W~[n, k].

    Program (n tile, K split, row m). The packed tile [UNROLL, BLOCK_K, BLOCK_N // 8] is loaded as
    int32 (16 bytes per thread: 4 words = 32 columns, UNROLL rows in flight); every nibble is
    turned into fp32 by a mask and an OR (_nibble_f32) and multiplied into a per-(row, column)
    partial A, together with X = sum of x over the same rows. Per group the scale and zero enter
    once: acc += s * (A - (OFF + z) X). Everything in the loop is elementwise in the load's layout
    (the sum over UNROLL is within each thread); the only cross-thread reduction is at the end.
    """
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    m = tl.program_id(2)
    BN8: tl.constexpr = BLOCK_N // 8
    STEP: tl.constexpr = UNROLL * BLOCK_K
    # index tiles, built once: row offsets within a step, word columns
    rows3 = tl.arange(0, UNROLL)[:, None, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :, None]
    rw3 = pid_n * BN8 + tl.arange(0, BN8)[None, None, :]
    w_off = rows3 * N8 + rw3
    x_off = tl.broadcast_to(rows3, (UNROLL, BLOCK_K, BN8)) + m * stride_xm
    rw2 = pid_n * BN8 + tl.arange(0, BN8)[None, :] + tl.zeros((BLOCK_K, BN8), dtype=tl.int32)
    w_ok3 = rw3 < N8
    w_ok2 = rw2 < N8
    g0 = pid_s * GROUPS_PER_SPLIT
    g1 = tl.minimum(g0 + GROUPS_PER_SPLIT, NG)
    acc0 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc4 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc5 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc6 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    acc7 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    for g in range(g0, g1):
        a0 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a1 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a2 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a3 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a4 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a5 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a6 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        a7 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        xs = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
        for kk in range(0, G, STEP):
            k = g * G + kk
            if EVEN_N:
                wv = tl.load(qweight_ptr + k * N8 + w_off)
            else:
                wv = tl.load(qweight_ptr + k * N8 + w_off, mask=w_ok3, other=0)
            xv = tl.load(x_ptr + k + x_off).to(tl.float32)
            xs += tl.sum(xv, axis=0)
            a0 += tl.sum(xv * _nibble_f32(wv, MAGIC, 0, EXACT), axis=0)
            a1 += tl.sum(xv * _nibble_f32(wv, MAGIC, 1, EXACT), axis=0)
            a2 += tl.sum(xv * _nibble_f32(wv, MAGIC, 2, EXACT), axis=0)
            a3 += tl.sum(xv * _nibble_f32(wv, MAGIC, 3, EXACT), axis=0)
            a4 += tl.sum(xv * _nibble_f32(wv, MAGIC, 4, EXACT), axis=0)
            a5 += tl.sum(xv * _nibble_f32(wv, MAGIC, 5, EXACT), axis=0)
            a6 += tl.sum(xv * _nibble_f32(wv, MAGIC, 6, EXACT), axis=0)
            a7 += tl.sum(xv * _nibble_f32(wv, MAGIC, 7, EXACT), axis=0)
        # the group's zeros and scales, once per group; nibble i holds column AWQ_ORDER[i]
        if EVEN_N:
            zw = tl.load(qzeros_ptr + g * N8 + rw2)
        else:
            zw = tl.load(qzeros_ptr + g * N8 + rw2, mask=w_ok2, other=0)
        sp = scales_ptr + g * N + rw2 * 8
        if EVEN_N:
            s0, s1, s2, s3 = tl.load(sp + 0), tl.load(sp + 2), tl.load(sp + 4), tl.load(sp + 6)
            s4, s5, s6, s7 = tl.load(sp + 1), tl.load(sp + 3), tl.load(sp + 5), tl.load(sp + 7)
        else:
            s0, s1 = tl.load(sp + 0, mask=w_ok2, other=0.0), tl.load(sp + 2, mask=w_ok2, other=0.0)
            s2, s3 = tl.load(sp + 4, mask=w_ok2, other=0.0), tl.load(sp + 6, mask=w_ok2, other=0.0)
            s4, s5 = tl.load(sp + 1, mask=w_ok2, other=0.0), tl.load(sp + 3, mask=w_ok2, other=0.0)
            s6, s7 = tl.load(sp + 5, mask=w_ok2, other=0.0), tl.load(sp + 7, mask=w_ok2, other=0.0)
        acc0 += s0.to(tl.float32) * (a0 - _nibble_f32(zw, MAGIC, 0, EXACT) * xs)
        acc1 += s1.to(tl.float32) * (a1 - _nibble_f32(zw, MAGIC, 1, EXACT) * xs)
        acc2 += s2.to(tl.float32) * (a2 - _nibble_f32(zw, MAGIC, 2, EXACT) * xs)
        acc3 += s3.to(tl.float32) * (a3 - _nibble_f32(zw, MAGIC, 3, EXACT) * xs)
        acc4 += s4.to(tl.float32) * (a4 - _nibble_f32(zw, MAGIC, 4, EXACT) * xs)
        acc5 += s5.to(tl.float32) * (a5 - _nibble_f32(zw, MAGIC, 5, EXACT) * xs)
        acc6 += s6.to(tl.float32) * (a6 - _nibble_f32(zw, MAGIC, 6, EXACT) * xs)
        acc7 += s7.to(tl.float32) * (a7 - _nibble_f32(zw, MAGIC, 7, EXACT) * xs)
    rw = pid_n * BN8 + tl.arange(0, BN8)
    ok = rw < N8
    yp = y_ptr + pid_s * stride_ys + m * stride_ym + rw * 8
    ty = y_ptr.dtype.element_ty
    tl.store(yp + 0, tl.sum(acc0, axis=0).to(ty), mask=ok)
    tl.store(yp + 2, tl.sum(acc1, axis=0).to(ty), mask=ok)
    tl.store(yp + 4, tl.sum(acc2, axis=0).to(ty), mask=ok)
    tl.store(yp + 6, tl.sum(acc3, axis=0).to(ty), mask=ok)
    tl.store(yp + 1, tl.sum(acc4, axis=0).to(ty), mask=ok)
    tl.store(yp + 3, tl.sum(acc5, axis=0).to(ty), mask=ok)
    tl.store(yp + 5, tl.sum(acc6, axis=0).to(ty), mask=ok)
    tl.store(yp + 7, tl.sum(acc7, axis=0).to(ty), mask=ok)


@jit
def splitk_reduce_kernel(ws_ptr, y_ptr, MN, S, BLOCK: tl.constexpr):
    """y[i] = sum over s < S of ws[s * MN + i] (fp32), written in y's dtype."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, S):
        acc += tl.load(ws_ptr + s * MN + offs, mask=ok, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)


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


_SM_COUNT: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def awq_gemv_split(n_tiles: int, n_groups: int, device: torch.device, programs_per_sm: int = 4) -> int:
    """Default K split of awq_gemv: enough programs for `programs_per_sm` per SM on a GPU (each
    split keeps >= 2 groups, so the per-group work and the partials stay small); 1 on the CPU."""
    if device.type != "cuda":
        return 1
    want = max(1, (programs_per_sm * _sm_count(device)) // max(1, n_tiles))
    return max(1, min(want, n_groups // 2))


def awq_gemv(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             block_n: int | None = None, block_k: int = 8, *, split_k: int | None = None, unroll: int = 4,
             num_warps: int = 4, exact: bool | None = None) -> torch.Tensor:
    """y = x @ W~^T for x [M, K] with small M (batch 1 decoding); y has x's dtype.

    block_n columns per program (a power of two >= 8; None: 512 on a GPU, where a thread then
    holds 32 columns and 8 threads share K within a program with 4 warps, 64 on the CPU),
    block_k * unroll rows per loop step (block_k
    rows spread over threads, unroll rows held by each thread; the step must divide the group
    size). split_k programs share K (None: awq_gemv_split); their fp32 partials are summed by a
    second small kernel. exact (default: for fp32 x) keeps every nibble at full fp32 precision
    at the cost of one shift per nibble instead of one per two."""
    M, N, K, G = _check_gemm(x, qweight, qzeros)
    if block_n is None:
        block_n = 512 if x.device.type == "cuda" else 64
    if block_n % 8 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two and a multiple of 8, got {block_n}")
    step = block_k * unroll
    if G % step:
        raise ValueError(f"block_k * unroll = {step} must divide the group size {G}")
    N8, NG = N // 8, K // G
    bn8 = block_n // 8
    n_tiles = cdiv(N8, bn8)
    split = awq_gemv_split(n_tiles, NG, x.device) if split_k is None else max(1, min(split_k, NG))
    per = cdiv(NG, split)
    split = cdiv(NG, per)
    exact = x.dtype == torch.float32 if exact is None else exact
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    out = y if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=x.device)
    awq_gemv_kernel[(n_tiles, split, M)](x, qweight, qzeros, scales, out, M, N, K, x.stride(0), N, N8, NG, per,
                                         M * N, 0x41800000, G=G, BLOCK_K=block_k, BLOCK_N=block_n, UNROLL=unroll,
                                         EXACT=exact, EVEN_N=N8 % bn8 == 0, num_warps=num_warps)
    if split > 1:
        blk = 1024
        splitk_reduce_kernel[(cdiv(M * N, blk),)](out, y, M * N, split, BLOCK=blk, num_warps=4)
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
