# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type; the launchers keep the other checks)
"""FP8 kernels in Anvil's DSL: amax, quantize (per-tensor, per-row, row groups, 2-D blocks),
dequantize, and a GEMM with per-tensor, per-row or 128x128 block scales.

Scales are fp32 multipliers: ``s = amax / FP8_MAX`` (1 where amax is 0), ``q = fp8(clamp(x / s,
-FP8_MAX, FP8_MAX))``, ``x ~ q * s``. Clamping before the cast makes every stack agree bit for
bit (saturating or not). The GEMM computes ``Y[m, n] = sa * sw * sum_k qa[m, k] qw[n, k]`` with
fp8 products accumulated in fp32; with block scales each 128-wide K slice's partial sum is
scaled and accumulated (DeepSeek-V3 / DeepGEMM).
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit

__all__ = [
    "FP8_MAX", "fp8_amax", "fp8_cast", "fp8_quantize", "fp8_dequantize", "fp8_gemm", "fp8_amax_kernel",
    "fp8_quantize_kernel", "fp8_dequantize_kernel", "fp8_gemm_kernel",
]

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}

# Scale granularities of fp8_quantize_kernel (MODE) and of the GEMM (SCALE).
TENSOR, ROW, GROUP, BLOCK = 0, 1, 2, 3


@jit
def fp8_amax_kernel(x_ptr, amax_ptr, R, C, stride_r, stride_c, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """amax_ptr[0] = max(amax_ptr[0], max |x|) over this program's tile (atomic)."""
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = (rr[:, None] < R) & (rc[None, :] < C)
    x = tl.load(x_ptr + rr[:, None] * stride_r + rc[None, :] * stride_c, mask=m, other=0.0)
    tl.atomic_max(amax_ptr, tl.max(tl.max(tl.abs(x.to(tl.float32)), axis=1), axis=0))


@jit
def _scale_of(amax, FP8_MAX: tl.constexpr):
    return tl.where(amax > 0.0, amax / FP8_MAX, 1.0)


@jit
def _cast(x, s, FP8_MAX: tl.constexpr, q_ptr):
    return tl.clamp(x / s, -FP8_MAX, FP8_MAX, propagate_nan=tl.PropagateNan.ALL).to(q_ptr.dtype.element_ty)


@jit
def fp8_quantize_kernel(x_ptr, q_ptr, s_ptr, amax_ptr, R, C, stride_xr, stride_xc, stride_qr, stride_qc,
                        stride_sr, stride_sc, MODE: tl.constexpr, FP8_MAX: tl.constexpr, BLOCK_R: tl.constexpr,
                        BLOCK_C: tl.constexpr):
    """Quantize x[R, C] to q (fp8) with scales s:

    MODE 0 (tensor): one scale from amax_ptr[0] (see fp8_amax_kernel); programs tile x.
    MODE 1 (row): one scale per row; a program owns BLOCK_R rows and walks C twice.
    MODE 2 (group): one scale per row and BLOCK_C columns (1x128 activation groups).
    MODE 3 (block): one scale per BLOCK_R x BLOCK_C block (128x128 weight blocks).
    """
    pr = tl.program_id(0)
    pc = tl.program_id(1)
    rr = pr * BLOCK_R + tl.arange(0, BLOCK_R)
    r_ok = rr < R
    if MODE == 1:
        amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
        for c0 in range(0, C, BLOCK_C):
            rc = c0 + tl.arange(0, BLOCK_C)
            m = r_ok[:, None] & (rc[None, :] < C)
            x = tl.load(x_ptr + rr[:, None] * stride_xr + rc[None, :] * stride_xc, mask=m, other=0.0)
            amax = tl.maximum(amax, tl.max(tl.abs(x.to(tl.float32)), axis=1))
        s = _scale_of(amax, FP8_MAX)
        tl.store(s_ptr + rr * stride_sr, s, mask=r_ok)
        for c0 in range(0, C, BLOCK_C):
            rc = c0 + tl.arange(0, BLOCK_C)
            m = r_ok[:, None] & (rc[None, :] < C)
            x = tl.load(x_ptr + rr[:, None] * stride_xr + rc[None, :] * stride_xc, mask=m, other=0.0)
            q = _cast(x.to(tl.float32), s[:, None], FP8_MAX, q_ptr)
            tl.store(q_ptr + rr[:, None] * stride_qr + rc[None, :] * stride_qc, q, mask=m)
    else:
        rc = pc * BLOCK_C + tl.arange(0, BLOCK_C)
        m = r_ok[:, None] & (rc[None, :] < C)
        x = tl.load(x_ptr + rr[:, None] * stride_xr + rc[None, :] * stride_xc, mask=m, other=0.0).to(tl.float32)
        if MODE == 0:
            s = _scale_of(tl.load(amax_ptr), FP8_MAX)
            if (pr == 0) & (pc == 0):
                tl.store(s_ptr, s)
            q = _cast(x, s, FP8_MAX, q_ptr)
        elif MODE == 2:
            s = _scale_of(tl.max(tl.abs(x), axis=1), FP8_MAX)
            tl.store(s_ptr + rr * stride_sr + pc * stride_sc, s, mask=r_ok)
            q = _cast(x, s[:, None], FP8_MAX, q_ptr)
        else:
            s = _scale_of(tl.max(tl.max(tl.abs(x), axis=1), axis=0), FP8_MAX)
            tl.store(s_ptr + pr * stride_sr + pc * stride_sc, s)
            q = _cast(x, s, FP8_MAX, q_ptr)
        tl.store(q_ptr + rr[:, None] * stride_qr + rc[None, :] * stride_qc, q, mask=m)


@jit
def fp8_dequantize_kernel(q_ptr, s_ptr, out_ptr, R, C, stride_sr, stride_sc, GR: tl.constexpr, GC: tl.constexpr,
                          BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[r, c] = q[r, c] * s[r // GR, c // GC] (strides 0 broadcast a scale); q, out contiguous."""
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = (rr[:, None] < R) & (rc[None, :] < C)
    q = tl.load(q_ptr + rr[:, None] * C + rc[None, :], mask=m, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + (rr // GR)[:, None] * stride_sr + (rc // GC)[None, :] * stride_sc, mask=m, other=0.0)
    tl.store(out_ptr + rr[:, None] * C + rc[None, :], (q * s).to(out_ptr.dtype.element_ty), mask=m)


@jit
def fp8_gemm_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                    stride_sam, stride_sak, stride_sbn, stride_sbk, SCALE: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[M, N] = A[M, K] (fp8) @ B[N, K]^T (fp8) with scales.

    SCALE 0/1 (tensor / row): sa[m * stride_sam], sb[n * stride_sbn] applied in the epilogue
    (stride 0 for a per-tensor scale). SCALE 3 (block): sa[m, k // 128] (1x128 activation groups),
    sb[n // 128, k // 128] (128x128 weight blocks), applied per K slice; BLOCK_K must be 128.
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + rn[:, None] * stride_bn + rk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        if SCALE == 3:
            tl.static_assert(BLOCK_K == 128, "block scales need BLOCK_K == 128")
            kb = k0 // 128
            sa = tl.load(sa_ptr + rm * stride_sam + kb * stride_sak, mask=m_ok, other=0.0)
            sb = tl.load(sb_ptr + (rn // 128) * stride_sbn + kb * stride_sbk, mask=n_ok, other=0.0)
            acc += tl.dot(a, tl.trans(b)) * sa[:, None] * sb[None, :]
        else:
            acc = tl.dot(a, tl.trans(b), acc)
    if SCALE != 3:
        sa = tl.load(sa_ptr + rm * stride_sam, mask=m_ok, other=0.0)
        sb = tl.load(sb_ptr + rn * stride_sbn, mask=n_ok, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


# --- launchers ---------------------------------------------------------------------------------------


def fp8_amax(x: torch.Tensor) -> torch.Tensor:
    """max |x| of a 2-D tensor, as a 1-element fp32 tensor."""
    R, C = x.shape
    amax = torch.zeros(1, dtype=torch.float32, device=x.device)
    fp8_amax_kernel[(cdiv(R, 32), cdiv(C, 128))](x, amax, R, C, x.stride(0), x.stride(1), BLOCK_R=32,
                                                 BLOCK_C=128)
    return amax


def fp8_quantize(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn, scheme: str = "tensor",
                 block: tuple[int, int] = (128, 128)) -> tuple[torch.Tensor, torch.Tensor]:
    """x[R, C] -> (q fp8 [R, C], fp32 scales).

    Scale shapes: "tensor" [] (scalar), "channel"/"row" [R, 1], "group" [R, ceil(C / block[1])]
    (per-token 1x128 activation groups), "block" [ceil(R / block[0]), ceil(C / block[1])].
    """
    if dtype not in FP8_MAX:
        raise ValueError(f"unsupported fp8 dtype {dtype}")
    fmax = FP8_MAX[dtype]
    R, C = x.shape
    q = torch.empty((R, C), dtype=dtype, device=x.device)
    dummy = torch.zeros(1, dtype=torch.float32, device=x.device)
    common = dict(FP8_MAX=fmax)
    if scheme == "tensor":
        s = torch.empty((), dtype=torch.float32, device=x.device)
        amax = fp8_amax(x)
        fp8_quantize_kernel[(cdiv(R, 32), cdiv(C, 128))](x, q, s, amax, R, C, x.stride(0), x.stride(1), C, 1, 0, 0,
                                                         MODE=TENSOR, BLOCK_R=32, BLOCK_C=128, **common)
    elif scheme in ("channel", "row"):
        s = torch.empty((R, 1), dtype=torch.float32, device=x.device)
        fp8_quantize_kernel[(cdiv(R, 16), 1)](x, q, s, dummy, R, C, x.stride(0), x.stride(1), C, 1, 1, 0,
                                              MODE=ROW, BLOCK_R=16, BLOCK_C=128, **common)
    elif scheme == "group":
        gc = block[1]
        s = torch.empty((R, cdiv(C, gc)), dtype=torch.float32, device=x.device)
        fp8_quantize_kernel[(cdiv(R, 16), cdiv(C, gc))](x, q, s, dummy, R, C, x.stride(0), x.stride(1), C, 1,
                                                        s.stride(0), 1, MODE=GROUP, BLOCK_R=16, BLOCK_C=gc, **common)
    elif scheme == "block":
        gr, gc = block
        s = torch.empty((cdiv(R, gr), cdiv(C, gc)), dtype=torch.float32, device=x.device)
        fp8_quantize_kernel[(cdiv(R, gr), cdiv(C, gc))](x, q, s, dummy, R, C, x.stride(0), x.stride(1), C, 1,
                                                        s.stride(0), 1, MODE=BLOCK, BLOCK_R=gr, BLOCK_C=gc, **common)
    else:
        raise ValueError(f"unknown fp8 scheme {scheme!r}: use tensor, channel, group or block")
    return q, s


def fp8_cast(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> torch.Tensor:
    """Clamp to the format's finite range and cast (round to nearest even), with no scale."""
    R, C = x.shape
    q = torch.empty((R, C), dtype=dtype, device=x.device)
    s = torch.empty((), dtype=torch.float32, device=x.device)
    amax = torch.full((1,), FP8_MAX[dtype], dtype=torch.float32, device=x.device)  # -> scale exactly 1
    fp8_quantize_kernel[(cdiv(R, 32), cdiv(C, 128))](x, q, s, amax, R, C, x.stride(0), x.stride(1), C, 1, 0, 0,
                                                     MODE=TENSOR, FP8_MAX=FP8_MAX[dtype], BLOCK_R=32, BLOCK_C=128)
    return q


def fp8_dequantize(q: torch.Tensor, s: torch.Tensor, dtype: torch.dtype = torch.float32,
                   block: tuple[int, int] = (128, 128)) -> torch.Tensor:
    """q[R, C] * s, with s of any shape fp8_quantize returns (the granularity follows from it)."""
    q = q.contiguous()
    R, C = q.shape
    s = s.to(torch.float32)
    shape = tuple(s.shape)
    if s.numel() == 1:
        gr, gc, ssr, ssc = 1, 1, 0, 0
        s = s.reshape(1, 1)
    elif shape == (R, 1):
        gr, gc, ssr, ssc = 1, 1, 1, 0
    elif shape == (R, cdiv(C, block[1])):
        gr, gc, ssr, ssc = 1, block[1], s.stride(0), s.stride(1)
    elif shape == (cdiv(R, block[0]), cdiv(C, block[1])):
        gr, gc, ssr, ssc = block[0], block[1], s.stride(0), s.stride(1)
    else:
        raise ValueError(f"scale shape {shape} does not tile a {R}x{C} tensor")
    out = torch.empty((R, C), dtype=dtype, device=q.device)
    fp8_dequantize_kernel[(cdiv(R, 32), cdiv(C, 64))](q, s, out, R, C, ssr, ssc, GR=gr, GC=gc, BLOCK_R=32,
                                                      BLOCK_C=64)
    return out


def fp8_gemm(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
             out_dtype: torch.dtype = torch.bfloat16, block_m: int = 32, block_n: int = 64,
             block_k: int = 64, num_warps: int = 4) -> torch.Tensor:
    """C = (A * sa) @ (B * sb)^T for fp8 A[M, K], B[N, K] (weights as stored, W[N, K]).

    Scales: scalars (per-tensor), sa [M, 1] and sb [N, 1] (per-row), or sa [M, ceil(K/128)] with
    sb [ceil(N/128), ceil(K/128)] (block); the scale shapes select the kernel's mode.
    """
    M, K = a.shape
    N, Kb = b.shape
    if Kb != K:
        raise ValueError(f"K mismatch: a has {K}, b has {Kb}")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("a and b must be contiguous along K")
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    sa = sa.to(torch.float32)
    sb = sb.to(torch.float32)
    kb = cdiv(K, 128)
    if sa.numel() == M * kb and sb.numel() == cdiv(N, 128) * kb and sb.dim() == 2 and sb.shape[0] != N:
        mode, block_k = BLOCK, 128
        block_n = min(block_n, 128)
        sa2, sb2 = sa.reshape(M, kb), sb.reshape(cdiv(N, 128), kb)
        strides = (sa2.stride(0), sa2.stride(1), sb2.stride(0), sb2.stride(1))
    elif sa.numel() in (1, M) and sb.numel() in (1, N):
        mode = TENSOR if sa.numel() == 1 and sb.numel() == 1 else ROW
        sa2, sb2 = sa.reshape(-1), sb.reshape(-1)
        strides = (1 if sa2.numel() > 1 else 0, 0, 1 if sb2.numel() > 1 else 0, 0)
    else:
        raise ValueError(f"scale shapes {tuple(sa.shape)} / {tuple(sb.shape)} match no scheme")
    grid = (cdiv(M, block_m), cdiv(N, block_n))
    fp8_gemm_kernel[grid](a, b, c, sa2, sb2, M, N, K, a.stride(0), b.stride(0), c.stride(0), *strides, SCALE=mode,
                          BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps)
    return c
