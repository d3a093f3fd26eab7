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
needs one row of zeros and scales. Their launchers (awq_gemv, awq_gemm) are in
tools/kernels/w4a16.py; the tensor-core GEMV kernel in tools/kernels/int4_mma.py.
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit
from compiler.language.extra import libdevice

__all__ = [
    "AWQ_ORDER", "awq_shift", "awq_quantize_pack", "awq_dequantize", "awq_unpack", "awq_quantize_pack_kernel",
    "awq_dequantize_kernel", "awq_unpack_kernel", "awq_gemv_kernel", "awq_gemm_kernel", "splitk_reduce_kernel",
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
def _bf16_lanes(v):
    """The two bf16 lanes of each int32 of `v` as fp32 (low lane, high lane): exact, no conversion."""
    return (v << 16).to(tl.float32, bitcast=True), (v & -65536).to(tl.float32, bitcast=True)


@jit
def _bf16_pair(lo, hi):
    """fp32 (lo, hi) rounded to bf16 (nearest even) and packed into one int32, lo in the low lane."""
    lb = lo.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hb = hi.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32)
    return lb | (hb << 16)


@jit
def _fp16_lanes(v):
    """The two fp16 lanes of each int32 of `v` as fp32 (low lane, high lane)."""
    lo = v.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    hi = (v >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@jit
def _code_pair(w, magic, I: tl.constexpr, SUBNORMAL: tl.constexpr):
    """Codes of columns 2I and 2I+1 (nibbles I and I+4) of each packed word as two bf16 lanes (the
    low lane column 2I), with integer ops only: one shift and one AND-OR for a pair.

    Normal: the code goes to mantissa bits 0..3 under the exponent of 128 (`magic` = 0x43004300):
    the lanes are 128 + q. SUBNORMAL: the nibbles stay where they are under a zero exponent, so
    the lanes are the subnormals q * 2^-133 (pairs 0, 2) or 16q * 2^-133 (pairs 1, 3; bits 0..7 of
    a bf16 with exponent field 0 or 1 read as an integer times 2^-133): one shift per two pairs."""
    if SUBNORMAL:
        SH: tl.constexpr = 8 * (I // 2)
        MASK: tl.constexpr = 0x000F000F << (4 * (I % 2))
        if SH > 0:
            return (w >> SH) & MASK
        return w & MASK
    if I > 0:
        return ((w >> (4 * I)) & 0x000F000F) | magic
    return (w & 0x000F000F) | magic


@jit
def _mac2(v, z, xx, acc, ASM: tl.constexpr):
    """acc + (v - z) * xx on each of the two bf16 lanes of the int32 operands, rounded to bf16.

    v - z is exact (small integers, or the same multiple of 2^-133), so the only rounding is the
    fused multiply-add's. ASM: one sub.bf16x2 and one fma.rn.bf16x2 per pair (NVIDIA sm_90);
    otherwise the same arithmetic lane by lane in fp32, then rounded to bf16."""
    if ASM:
        return tl.inline_asm_elementwise(
            "{ .reg .b32 t; sub.rn.bf16x2 t, $1, $2; fma.rn.bf16x2 $0, t, $3, $4; }",
            "=r,r,r,r,r", [v, z, xx, acc], dtype=tl.int32, is_pure=True, pack=1)
    vl, vh = _bf16_lanes(v)
    zl, zh = _bf16_lanes(z)
    xl, xh = _bf16_lanes(xx)
    al, ah = _bf16_lanes(acc)
    return _bf16_pair(tl.fma(vl - zl, xl, al), tl.fma(vh - zh, xh, ah))


@jit
def _mac_rows(w, xx, z0, z1, z2, z3, h0, h1, h2, h3, magic, R: tl.constexpr, BLOCK_K: tl.constexpr,
              BN8: tl.constexpr, SUBNORMAL: tl.constexpr, ASM: tl.constexpr):
    """Adds the R rows (dim 0, a power of two) of the packed words `w` [R, BLOCK_K, BN8] times the
    activation pairs `xx` into the bf16 pairs h0..h3 (h_i: columns 2i, 2i+1 of each word), one row
    after the other. Splitting dim 0 renames registers (a thread holds all R rows), no data moves."""
    if R == 1:
        w1 = tl.reshape(w, (BLOCK_K, BN8))
        x1 = tl.reshape(xx, (BLOCK_K, BN8))
        h0 = _mac2(_code_pair(w1, magic, 0, SUBNORMAL), z0, x1, h0, ASM)
        h1 = _mac2(_code_pair(w1, magic, 1, SUBNORMAL), z1, x1, h1, ASM)
        h2 = _mac2(_code_pair(w1, magic, 2, SUBNORMAL), z2, x1, h2, ASM)
        h3 = _mac2(_code_pair(w1, magic, 3, SUBNORMAL), z3, x1, h3, ASM)
    else:
        we, wo = tl.split(tl.permute(tl.reshape(w, (R // 2, 2, BLOCK_K, BN8)), (0, 2, 3, 1)))
        xe, xo = tl.split(tl.permute(tl.reshape(xx, (R // 2, 2, BLOCK_K, BN8)), (0, 2, 3, 1)))
        h0, h1, h2, h3 = _mac_rows(we, xe, z0, z1, z2, z3, h0, h1, h2, h3, magic, R // 2, BLOCK_K, BN8,
                                   SUBNORMAL, ASM)
        h0, h1, h2, h3 = _mac_rows(wo, xo, z0, z1, z2, z3, h0, h1, h2, h3, magic, R // 2, BLOCK_K, BN8,
                                   SUBNORMAL, ASM)
    return h0, h1, h2, h3


@jit
def _load_group(qzeros_ptr, scales_ptr, g, N8, rw2, ok, EVEN_N: tl.constexpr):
    """Group g's packed zeros (one word per 8 columns) and scales as int32 pairs of fp16 (pair i of
    a word: columns 2i, 2i+1)."""
    zp = qzeros_ptr + g * N8 + rw2
    sp = scales_ptr + g * (N8 * 4) + rw2 * 4
    if EVEN_N:
        return tl.load(zp), tl.load(sp), tl.load(sp + 1), tl.load(sp + 2), tl.load(sp + 3)
    return (tl.load(zp, mask=ok, other=0), tl.load(sp, mask=ok, other=0), tl.load(sp + 1, mask=ok, other=0),
            tl.load(sp + 2, mask=ok, other=0), tl.load(sp + 3, mask=ok, other=0))


@jit
def awq_gemv_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym, N8, NG,
                    GROUPS_PER_SPLIT, stride_ys, MAGIC, G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                    UNROLL: tl.constexpr, EXACT: tl.constexpr, EVEN_N: tl.constexpr, PACKED: tl.constexpr = False,
                    SUBNORMAL: tl.constexpr = False, ASM: tl.constexpr = False):
    """y[m, n] (+ split s's partial at y + s * stride_ys) = sum over this split's K rows of x[m, k] W~[n, k].

    Program (n tile, K split, row m); `scales_ptr` is the scales viewed as int32 pairs. The packed
    tile [UNROLL, BLOCK_K, BLOCK_N // 8] is loaded as int32 (16 bytes per thread: 4 words = 32
    columns, UNROLL rows in flight), one step ahead of its use, as are the activations; a group's
    zeros and scales are loaded one group ahead. Everything in the loop is elementwise in the
    load's layout (UNROLL rows are held by each thread); the only cross-thread reduction is at the end.

    Not PACKED (fp32, portable): every nibble becomes fp32 with a mask and an OR (_nibble_f32) and
    is multiplied into a per-(row, column) partial A, beside X = sum of x over the same rows; per
    group acc += s * (A - (OFF + z) X).

    PACKED (bf16 x): a shift and an AND-OR give two columns' codes as bf16 lanes of one int32
    (_code_pair); one bf16x2 subtract and one bf16x2 FMA add (q - z) * x for both (_mac2, inline
    PTX when ASM, else emulated). The bf16 partials cover the UNROLL rows of one step, then go to
    fp32: acc += s * partial. SUBNORMAL keeps the codes as subnormals (one shift per four columns)
    and scales x by 2^100 so that the products are normal."""
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
    k_last = g1 * G - STEP
    # the first step's weights and activations, the first group's zeros and scales
    if EVEN_N:
        wv = tl.load(qweight_ptr + g0 * G * N8 + w_off)
    else:
        wv = tl.load(qweight_ptr + g0 * G * N8 + w_off, mask=w_ok3, other=0)
    xv = tl.load(x_ptr + g0 * G + x_off)
    zw, sp0, sp1, sp2, sp3 = _load_group(qzeros_ptr, scales_ptr, g0, N8, rw2, w_ok2, EVEN_N)
    # c_j: fp32 sum of column j of each word
    c0 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c1 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c2 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c3 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c4 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c5 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c6 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    c7 = tl.zeros((BLOCK_K, BN8), dtype=tl.float32)
    hz = tl.zeros((BLOCK_K, BN8), dtype=tl.int32)
    for g in range(g0, g1):
        # this group's scales per column (fp32); then the next group's loads go out
        f0, f1 = _fp16_lanes(sp0)
        f2, f3 = _fp16_lanes(sp1)
        f4, f5 = _fp16_lanes(sp2)
        f6, f7 = _fp16_lanes(sp3)
        zc = zw
        zw, sp0, sp1, sp2, sp3 = _load_group(qzeros_ptr, scales_ptr, tl.minimum(g + 1, g1 - 1), N8, rw2, w_ok2,
                                             EVEN_N)
        if PACKED:
            z0 = _code_pair(zc, MAGIC, 0, SUBNORMAL)
            z1 = _code_pair(zc, MAGIC, 1, SUBNORMAL)
            z2 = _code_pair(zc, MAGIC, 2, SUBNORMAL)
            z3 = _code_pair(zc, MAGIC, 3, SUBNORMAL)
            if SUBNORMAL:  # products carry 2^-33 (pairs 0, 2) or 16 * 2^-33 (pairs 1, 3)
                f0, f1, f4, f5 = f0 * 8589934592.0, f1 * 8589934592.0, f4 * 8589934592.0, f5 * 8589934592.0
                f2, f3, f6, f7 = f2 * 536870912.0, f3 * 536870912.0, f6 * 536870912.0, f7 * 536870912.0
        else:
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
            # the next step's loads (the last step reloads itself: no bounds check needed)
            kn = tl.minimum(g * G + kk + STEP, k_last)
            if EVEN_N:
                wn = tl.load(qweight_ptr + kn * N8 + w_off)
            else:
                wn = tl.load(qweight_ptr + kn * N8 + w_off, mask=w_ok3, other=0)
            xn = tl.load(x_ptr + kn + x_off)
            if PACKED:
                xf = xv.to(tl.float32)
                if SUBNORMAL:
                    xf = xf * 1.2676506002282294e30  # 2^100: exact
                xi = xf.to(tl.int32, bitcast=True)
                xx = xi | ((xi >> 16) & 0xFFFF)  # x in both bf16 lanes
                h0, h1, h2, h3 = _mac_rows(wv, xx, z0, z1, z2, z3, hz, hz, hz, hz, MAGIC, UNROLL, BLOCK_K, BN8,
                                           SUBNORMAL, ASM)
                lo, hi = _bf16_lanes(h0)
                c0 += f0 * lo
                c1 += f1 * hi
                lo, hi = _bf16_lanes(h1)
                c2 += f2 * lo
                c3 += f3 * hi
                lo, hi = _bf16_lanes(h2)
                c4 += f4 * lo
                c5 += f5 * hi
                lo, hi = _bf16_lanes(h3)
                c6 += f6 * lo
                c7 += f7 * hi
            else:
                xf = xv.to(tl.float32)
                xs += tl.sum(xf, axis=0)
                a0 += tl.sum(xf * _nibble_f32(wv, MAGIC, 0, EXACT), axis=0)
                a1 += tl.sum(xf * _nibble_f32(wv, MAGIC, 1, EXACT), axis=0)
                a2 += tl.sum(xf * _nibble_f32(wv, MAGIC, 2, EXACT), axis=0)
                a3 += tl.sum(xf * _nibble_f32(wv, MAGIC, 3, EXACT), axis=0)
                a4 += tl.sum(xf * _nibble_f32(wv, MAGIC, 4, EXACT), axis=0)
                a5 += tl.sum(xf * _nibble_f32(wv, MAGIC, 5, EXACT), axis=0)
                a6 += tl.sum(xf * _nibble_f32(wv, MAGIC, 6, EXACT), axis=0)
                a7 += tl.sum(xf * _nibble_f32(wv, MAGIC, 7, EXACT), axis=0)
            wv = wn
            xv = xn
        if not PACKED:  # nibble i holds column AWQ_ORDER[i]
            c0 += f0 * (a0 - _nibble_f32(zc, MAGIC, 0, EXACT) * xs)
            c2 += f2 * (a1 - _nibble_f32(zc, MAGIC, 1, EXACT) * xs)
            c4 += f4 * (a2 - _nibble_f32(zc, MAGIC, 2, EXACT) * xs)
            c6 += f6 * (a3 - _nibble_f32(zc, MAGIC, 3, EXACT) * xs)
            c1 += f1 * (a4 - _nibble_f32(zc, MAGIC, 4, EXACT) * xs)
            c3 += f3 * (a5 - _nibble_f32(zc, MAGIC, 5, EXACT) * xs)
            c5 += f5 * (a6 - _nibble_f32(zc, MAGIC, 6, EXACT) * xs)
            c7 += f7 * (a7 - _nibble_f32(zc, MAGIC, 7, EXACT) * xs)
    rw = pid_n * BN8 + tl.arange(0, BN8)
    ok = rw < N8
    yp = y_ptr + pid_s * stride_ys + m * stride_ym + rw * 8
    ty = y_ptr.dtype.element_ty
    tl.store(yp + 0, tl.sum(c0, axis=0).to(ty), mask=ok)
    tl.store(yp + 1, tl.sum(c1, axis=0).to(ty), mask=ok)
    tl.store(yp + 2, tl.sum(c2, axis=0).to(ty), mask=ok)
    tl.store(yp + 3, tl.sum(c3, axis=0).to(ty), mask=ok)
    tl.store(yp + 4, tl.sum(c4, axis=0).to(ty), mask=ok)
    tl.store(yp + 5, tl.sum(c5, axis=0).to(ty), mask=ok)
    tl.store(yp + 6, tl.sum(c6, axis=0).to(ty), mask=ok)
    tl.store(yp + 7, tl.sum(c7, axis=0).to(ty), mask=ok)


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
