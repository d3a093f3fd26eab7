"""tl.dot_scaled on the CPU backend against a float64 torch reference computed from the same bits.

Triton 3.6's interpreter has no dot_scaled (its builder lacks create_dot_scaled), so every case
carries a torch reference. The reference follows Triton's software path: each operand upcast to
the compute type (bfloat16, or float16 when either format is "fp16"), the e8m0 scale
(float32 bits s << 23, rounded to the compute type; s == 255 is NaN unless fast_math) multiplied
in that type, then the product of the two in float64, plus acc. Anvil accumulates in float32, so
results are compared with a tolerance relative to sum(|a| * |b|).

Cases: every format pair over several M/N/K, with and without scales on either side, with acc,
fp4 packed along M/N, fp8/bf16 operands passed as their own dtypes, a K loop, a batched (3-D)
dot, and the e8m0 special values 0, 254 and 255 with and without fast_math.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from diff_harness import HEADER, Case, case_ids, check_case, gen, poison, register

SRC = HEADER + """@triton.jit
def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr,
                      K: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr, LKP: tl.constexpr,
                      RKP: tl.constexpr, FAST: tl.constexpr):
    # The stored tiles: e2m1 holds two values per byte along K (along M / N when not K-packed).
    AM: tl.constexpr = M // 2 if FA == "e2m1" and not LKP else M
    AK: tl.constexpr = K // 2 if FA == "e2m1" and LKP else K
    BK: tl.constexpr = K // 2 if FB == "e2m1" and RKP else K
    BN: tl.constexpr = N // 2 if FB == "e2m1" and not RKP else N
    a = tl.load(a_ptr + tl.arange(0, AM)[:, None] * AK + tl.arange(0, AK)[None, :])
    b = tl.load(b_ptr + tl.arange(0, BK)[:, None] * BN + tl.arange(0, BN)[None, :])
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rs = tl.arange(0, K // 32)
    sa = None
    if sa_ptr is not None:
        sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + rs[None, :])
    sb = None
    if sb_ptr is not None:
        sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + rs[None, :])
    if c_ptr is not None:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        r = tl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FAST, lhs_k_pack=LKP, rhs_k_pack=RKP)
    else:
        r = tl.dot_scaled(a, sa, FA, b, sb, FB, fast_math=FAST, lhs_k_pack=LKP, rhs_k_pack=RKP)
    tl.static_assert(r.dtype == tl.float32)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], r)


@triton.jit
def dot_scaled_loop(a_ptr, sa_ptr, b_ptr, sb_ptr, o_ptr, K, M: tl.constexpr, N: tl.constexpr,
                    BK: tl.constexpr):
    # fp4 lhs (K-packed) with scales, e4m3 rhs with scales, accumulated over a K loop.
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * (K // 2) + k // 2 + tl.arange(0, BK // 2)[None, :])
        b = tl.load(b_ptr + (k + tl.arange(0, BK))[:, None] * N + rn[None, :])
        sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + k // 32 + tl.arange(0, BK // 32)[None, :])
        sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + k // 32 + tl.arange(0, BK // 32)[None, :])
        acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e4m3", acc)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def dot_scaled_batched(a_ptr, b_ptr, sb_ptr, o_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    # [B, M, K] e4m3 (no scale) @ [B, K // 2, N] e2m1 with [B, N, K // 32] scales.
    rb = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + rb * M * K + tl.arange(0, M)[None, :, None] * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + rb * (K // 2) * N + tl.arange(0, K // 2)[None, :, None] * N
                + tl.arange(0, N)[None, None, :])
    sb = tl.load(sb_ptr + rb * N * (K // 32) + tl.arange(0, N)[None, :, None] * (K // 32)
                 + tl.arange(0, K // 32)[None, None, :])
    r = tl.dot_scaled(a, None, "e4m3", b, sb, "e2m1")
    tl.store(o_ptr + rb * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :], r)
"""

REASON = "Triton 3.6's interpreter has no dot_scaled (its builder lacks create_dot_scaled)"

FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                   dtype=torch.float64)
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


# ---------------------------------------------------------------------------------- reference
def compute_dtype(fa: str, fb: str) -> torch.dtype:
    return torch.float16 if "fp16" in (fa, fb) else torch.bfloat16


def upcast(x: torch.Tensor, fmt: str, packed_axis: int, ct: torch.dtype) -> torch.Tensor:
    """The operand's values in the compute type; e2m1 bytes unpacked along `packed_axis`."""
    if fmt == "e2m1":
        lo, hi = FP4[(x & 15).long()], FP4[(x >> 4).long()]
        pair = torch.stack([lo, hi], dim=packed_axis + 1)
        shape = list(x.shape)
        shape[packed_axis] *= 2
        return pair.reshape(shape).to(ct)
    if fmt in FP8:
        v = x if x.dtype == FP8[fmt] else x.view(FP8[fmt])
        return v.to(torch.float32).to(ct)
    v = x if x.dtype == HALF[fmt] else x.view(HALF[fmt])
    return v.to(ct)


def scale_values(s: torch.Tensor, ct: torch.dtype, fast: bool) -> torch.Tensor:
    """e8m0 bytes [..., R, K // 32] -> [..., R, K] in the compute type: float32 bits s << 23."""
    f = (s.to(torch.int32) << 23).view(torch.float32).to(ct)
    if not fast:
        f = torch.where(s == 255, torch.full((), float("nan"), dtype=ct), f)
    return f.repeat_interleave(32, dim=-1)


def operands(a: torch.Tensor, sa: torch.Tensor | None, fa: str, b: torch.Tensor, sb: torch.Tensor | None,
             fb: str, lkp: bool = True, rkp: bool = True, fast: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The two scaled operands in the compute type, as float64: [.., M, K] and [.., K, N]."""
    ct = compute_dtype(fa, fb)
    r = a.dim()
    x = upcast(a, fa, r - 1 if lkp else r - 2, ct)
    y = upcast(b, fb, r - 2 if rkp else r - 1, ct)
    if sa is not None:
        x = x * scale_values(sa, ct, fast)
    if sb is not None:
        y = y * scale_values(sb, ct, fast).mT
    return x.double(), y.double()


def tolerance(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """float32 accumulation of K products: errors relative to the largest sum of |products|."""
    mag = (x.abs().nan_to_num(0.0, 0.0, 0.0) @ y.abs().nan_to_num(0.0, 0.0, 0.0)).max().item()
    return 2e-6, max(mag * 2e-6, 1e-30)


# ---------------------------------------------------------------------------------- inputs
def finite_bits(shape: tuple[int, ...], fmt: str, g: torch.Generator) -> torch.Tensor:
    """Random stored bits of `fmt` with no NaN or infinity among them."""
    if fmt in ("bf16", "fp16"):
        return torch.randn(shape, generator=g, dtype=torch.float64).clamp(-60, 60).to(HALF[fmt]).view(torch.uint16)
    x = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
    if fmt == "e4m3":  # 0x7f / 0xff are NaN
        x = torch.where(x & 0x7F == 0x7F, x ^ 1, x)
    elif fmt == "e5m2":  # exponent 11111 is inf / NaN
        x = torch.where(x & 0x7C == 0x7C, x & 0xF3, x)
    return x


def positive(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """The same bits with every value made positive and nonzero."""
    if fmt == "e2m1":
        lo, hi = x & 7, (x >> 4) & 7
        return torch.where(lo == 0, 2, lo) | (torch.where(hi == 0, 2, hi) << 4)
    if fmt in ("bf16", "fp16"):
        v = x.view(HALF[fmt]).abs()
        return torch.where(v == 0, torch.ones((), dtype=v.dtype), v).view(torch.uint16)
    x = x & 0x7F
    return torch.where(x == 0, 0x38, x).to(torch.uint8)


def stored_shape(fmt: str, rows: int, cols: int, packed_axis: int | None) -> tuple[int, int]:
    if fmt != "e2m1" or packed_axis is None:
        return rows, cols
    return (rows // 2, cols) if packed_axis == 0 else (rows, cols // 2)


def scales(rows: int, k: int, g: torch.Generator, ct: torch.dtype) -> torch.Tensor:
    lo, hi = (118, 134) if ct == torch.bfloat16 else (122, 130)
    return torch.randint(lo, hi + 1, (rows, k // 32), generator=g, dtype=torch.int64).to(torch.uint8)


def as_dtype(bits: torch.Tensor, fmt: str) -> torch.Tensor:
    """The operand passed as its own dtype (tl.float8e4nv, tl.bfloat16, ...) instead of raw bits."""
    return bits.view(FP8[fmt]) if fmt in FP8 else bits.view(HALF[fmt]) if fmt in HALF else bits


def scaled_case(name: str, m: int, n: int, k: int, fa: str, fb: str, *, lhs_scale: bool, rhs_scale: bool,
                acc: bool = False, lkp: bool = True, rkp: bool = True, typed: bool = False, fast: bool = False,
                specials: bool = False) -> Case:
    g = gen(name)
    ct = compute_dtype(fa, fb)
    a = finite_bits(stored_shape(fa, m, k, 1 if lkp else 0), fa, g)
    b = finite_bits(stored_shape(fb, k, n, 0 if rkp else 1), fb, g)
    sa = scales(m, k, g, ct) if lhs_scale else None
    sb = scales(n, k, g, ct) if rhs_scale else None
    if specials:
        # positive operands: a group scaled by 255 gives +inf products, NaN only where masked
        a, b = positive(a, fa), positive(b, fb)
        assert sa is not None and sb is not None
        sa[0, 0], sa[1, -1], sa[2, 0] = 255, 0, 254  # NaN, 0.0 (as in Triton), 2^127
        sb[3, 0] = 255
    c = torch.randn((m, n), generator=g, dtype=torch.float32) if acc else None
    if typed:
        a, b = as_dtype(a, fa), as_dtype(b, fb)
    x, y = operands(a, sa, fa, b, sb, fb, lkp, rkp, fast)
    tol = tolerance(x, y)

    def ref(args: list) -> list[torch.Tensor]:
        want = x @ y
        if c is not None:
            want = want + c.double()
        return [want.float()]

    args = [a, sa, b, sb, c, poison((m, n), torch.float32)]
    meta = dict(M=m, N=n, K=k, FA=fa, FB=fb, LKP=lkp, RKP=rkp, FAST=fast)
    return Case(name, SRC, "dot_scaled_kernel", args, (1,), outputs=[5], meta=meta, tol=tol, reference=ref,
                reason=REASON)


# Every pair of formats Triton's software path takes (an fp4/fp8 side or two 16-bit sides).
FORMATS = ["e2m1", "e4m3", "e5m2", "bf16", "fp16"]
PAIRS = [p for p in itertools.product(FORMATS, repeat=2) if set(p) != {"bf16", "fp16"}]
SHAPES = [(16, 16, 32), (32, 64, 64), (64, 32, 128), (16, 64, 128), (64, 64, 32)]


def pair_cases() -> list[Case]:
    out = []
    for i, (fa, fb) in enumerate(PAIRS):
        m, n, k = SHAPES[i % len(SHAPES)]
        # the scales: both sides, one side, or none, in turn
        ls, rs = [(True, True), (True, False), (False, True), (False, False)][i % 4]
        acc = i % 3 == 0
        name = f"dot_scaled_{fa}_{fb}_{m}x{n}x{k}{'_sa' if ls else ''}{'_sb' if rs else ''}{'_acc' if acc else ''}"
        out.append(scaled_case(name, m, n, k, fa, fb, lhs_scale=ls, rhs_scale=rs, acc=acc))
    return out


def shape_cases() -> list[Case]:
    """The common pairs at every shape, scaled on both sides, with an accumulator."""
    out = []
    for fa, fb in [("e2m1", "e2m1"), ("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "bf16"), ("bf16", "e4m3")]:
        for m, n, k in SHAPES:
            name = f"dot_scaled_shape_{fa}_{fb}_{m}x{n}x{k}"
            out.append(scaled_case(name, m, n, k, fa, fb, lhs_scale=True, rhs_scale=True, acc=True))
    return out


def variant_cases() -> list[Case]:
    out = [
        scaled_case("dot_scaled_e2m1_mpacked_nopacked", 32, 32, 64, "e2m1", "e2m1", lhs_scale=True, rhs_scale=True,
                    lkp=False, rkp=False),
        scaled_case("dot_scaled_e2m1_mpacked_e4m3", 64, 16, 64, "e2m1", "e4m3", lhs_scale=True, rhs_scale=False,
                    lkp=False, acc=True),
        scaled_case("dot_scaled_bf16_e2m1_npacked", 16, 64, 32, "bf16", "e2m1", lhs_scale=False, rhs_scale=True,
                    rkp=False),
        scaled_case("dot_scaled_typed_e4m3_e5m2", 32, 32, 64, "e4m3", "e5m2", lhs_scale=True, rhs_scale=True,
                    typed=True),
        scaled_case("dot_scaled_typed_bf16_e4m3", 32, 16, 64, "bf16", "e4m3", lhs_scale=False, rhs_scale=True,
                    typed=True, acc=True),
        scaled_case("dot_scaled_typed_fp16_e2m1", 16, 32, 64, "fp16", "e2m1", lhs_scale=False, rhs_scale=True,
                    typed=True),
        scaled_case("dot_scaled_specials_nan", 16, 16, 64, "e4m3", "e2m1", lhs_scale=True, rhs_scale=True,
                    specials=True),
        scaled_case("dot_scaled_specials_fast_math", 16, 16, 64, "e4m3", "e2m1", lhs_scale=True, rhs_scale=True,
                    fast=True, specials=True),
        scaled_case("dot_scaled_specials_fp16", 16, 16, 64, "fp16", "e5m2", lhs_scale=True, rhs_scale=True,
                    specials=True),
    ]
    return out


def loop_case() -> Case:
    name = "dot_scaled_k_loop"
    g = gen(name)
    m, n, k, bk = 32, 32, 256, 64
    a = finite_bits((m, k // 2), "e2m1", g)
    b = finite_bits((k, n), "e4m3", g)
    sa, sb = scales(m, k, g, torch.bfloat16), scales(n, k, g, torch.bfloat16)
    x, y = operands(a, sa, "e2m1", b, sb, "e4m3")

    def ref(args: list) -> list[torch.Tensor]:
        return [(x @ y).float()]

    return Case(name, SRC, "dot_scaled_loop", [a, sa, b, sb, poison((m, n), torch.float32), k], (1,), outputs=[4],
                meta=dict(M=m, N=n, BK=bk), tol=tolerance(x, y), reference=ref, reason=REASON)


def batched_case() -> Case:
    name = "dot_scaled_batched"
    g = gen(name)
    bt, m, n, k = 2, 16, 32, 64
    a = finite_bits((bt, m, k), "e4m3", g)
    b = finite_bits((bt, k // 2, n), "e2m1", g)
    sb = torch.randint(118, 135, (bt, n, k // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    x, y = operands(a, None, "e4m3", b, sb, "e2m1")

    def ref(args: list) -> list[torch.Tensor]:
        return [(x @ y).float()]

    return Case(name, SRC, "dot_scaled_batched", [a, b, sb, poison((bt, m, n), torch.float32)], (1,), outputs=[3],
                meta=dict(B=bt, M=m, N=n, K=k), tol=tolerance(x, y), reference=ref, reason=REASON)


CASES = register(pair_cases() + shape_cases() + variant_cases() + [loop_case(), batched_case()])


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_dot_scaled(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)


def test_reference_decodes_fp4_and_e8m0() -> None:
    """The reference itself: fp4 codes 0..15 in order, low nibble first; e8m0 127 is 1.0, 128 is 2.0,
    0 is 0.0 and 255 NaN (fast_math: infinity)."""
    codes = torch.tensor([[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]], dtype=torch.uint8)
    assert upcast(codes, "e2m1", 1, torch.bfloat16).double().flatten().tolist() == FP4.tolist()
    s = torch.tensor([[127, 128, 0, 255]], dtype=torch.uint8)
    v = scale_values(s, torch.bfloat16, False)[0, ::32].double().tolist()
    assert v[:3] == [1.0, 2.0, 0.0] and v[3] != v[3]
    assert scale_values(s, torch.bfloat16, True)[0, 96].item() == float("inf")
