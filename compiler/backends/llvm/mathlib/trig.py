"""Trigonometric functions and their inverses for float32, evaluated in float64.

sin, cos and tan reduce x = (n + f) pi/2 accurately for every float32 x, with no branch and no
table lookup (gathers made the loop vectorizer pick 4 lanes and cost 3x): a four-part Cody-Waite
reduction below 1.6e9 (f to 2^-97 absolute), a multi-word integer product with 2/pi's bits above
(f to 2^-61 absolute), reduce_half_pi. Then float64 polynomials and one rounding: over every
float32, sin and cos are within 0.5 ulp plus < 1e-4, so no float32 comes close enough to a
multiple of pi/2 for those absolute errors to show.
"""

from __future__ import annotations

from fractions import Fraction

from llvmlite import ir

from .core import (
    F32,
    F64,
    I32,
    I64,
    INF,
    NAN,
    B,
    V,
    copysign,
    eq,
    ext,
    f32,
    f64,
    fabs,
    gt,
    horner,
    i32,
    i64,
    isnan,
    lib_call,
    lt,
    narrow,
    rint,
    sqrt,
    to_int,
    where,
)

# 2/pi to 320 bits.
_TWO_OVER_PI = Fraction(0xA2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561B7246E3A424DD2E0, 1 << 320)
PI = 3.141592653589793
HALF_PI = 1.5707963267948966
QUARTER_PI = 0.7853981633974483
# scripts/fit_mathlib.py sin_d, cos_d: sin(r)/r and cos(r) in r^2 for |r| <= 1.02 pi/4 (relative 6e-12,
# 9e-14: far below float32's 6e-8, so each has the fewest terms that keep it there).
_SIN_D = (0.9999999999944459, -0.16666666624190288, 0.008333328102070495, -0.00019839005667034873,
          2.7155964255387104e-06)
_COS_D = (0.9999999999999144, -0.4999999999910584, 0.04166666651024982, -0.0013888878780403905,
          2.4798614314169143e-05, -2.7152062011102e-07)
# atan_d: atan(u)/u in u^2 for |u| <= 1.005 tan(pi/8) (relative 3e-14).
_ATAN_D = (0.9999999999999724, -0.33333333330702825, 0.19999999590245568, -0.1428568962888031, 0.1111036429270695,
           -0.09078102584051122, 0.07561495106031688, -0.05865823494465828, 0.030524959836961296)
# asin_d: asin(s)/s in s^2 for |s| <= 1/2 (relative 6e-14).
_ASIN_D = (0.9999999999999445, 0.16666666671088146, 0.07499999428288115, 0.044643143112994575, 0.030374711547018002,
           0.022476520536882483, 0.016446226361600993, 0.018743729063789925, -0.0030814582490586153,
           0.032144593749793865)
TAN_PI_8 = 0.41421356237309503


# 2/pi = sum L[i] 2^(-32 (i + 1)): its bits in 32-bit words.
_LIMBS = tuple(int(_TWO_OVER_PI * (1 << 32 * (i + 1))) % (1 << 32) for i in range(8))
# pi/2 in four parts, the first three of 23 bits: n P1, n P2, n P3 are exact for n < 2^30.
_HALF_PI_PARTS = (1.570796251296997, 7.549789415861596e-08, 5.390302529957765e-15, 3.2820035428735005e-22)
# Below this |x| (n < 2^30), pi/2 is represented to 2^-127, so x - n pi/2 is known to 2^-97 absolute.
CW_LIMIT = 1.6e9


def _reduce_huge(b: B, bits: V) -> tuple[V, V]:
    """(n, f) with |x| (2/pi) = n + f (mod 4), |f| <= 1/2, for float32 |x| >= 2^30 (these bits).

    |x| = M 2^k (M < 2^24 an integer, 7 <= k <= 104). Bits of 2/pi worth 4 or more after scaling
    by 2^k contribute multiples of 4 (M is an integer) and are skipped; the next 96 bits, three
    32-bit words cut from the limbs at a variable shift, times M, summed in 64-bit integers, give
    |x| (2/pi) mod 4 in fixed point with 62 fraction bits (what is cut off: < 2^-61). f's absolute
    error 2^-61 is 2^-29 relative for the float32 closest to a multiple of pi/2 (|f| > 2^-32)."""
    k = b.zext(b.sub(b.lshr(bits, i32(23)), i32(150)), I64)
    m = b.zext(b.or_(b.and_(bits, i32(0x7FFFFF)), i32(0x800000)), I64)
    pos = b.sub(k, i64(2))  # the first bit used, counted from 2/pi's first fraction bit
    a = b.lshr(pos, i64(5))
    sh = b.and_(pos, i64(31))
    # the 64-bit pairs (L[a + t], L[a + t + 1]) for a = 0..3: three selects each, then the word
    words = []
    for t in range(3):
        v: V = i64(_LIMBS[t] << 32 | _LIMBS[t + 1])
        for i in range(1, 4):
            v = b.select(b.icmp_unsigned("==", a, i64(i)), i64(_LIMBS[i + t] << 32 | _LIMBS[i + t + 1]), v)
        words.append(b.lshr(b.shl(v, sh), i64(32)))
    p0, p1, p2 = (b.mul(m, w) for w in words)
    fix = b.add(b.add(b.shl(p0, i64(32)), p1), b.lshr(p2, i64(32)))
    n = b.lshr(b.add(fix, i64(1 << 61)), i64(62))
    frac = b.sub(fix, b.shl(n, i64(62)))
    return b.sitofp(n, F64), b.fmul(b.sitofp(frac, F64), f64(2.0**-62))


def reduce_half_pi(b: B, x: V) -> tuple[V, V]:
    """|x| (float32, finite) = (n + f) pi/2: returns (n mod 4 as i32, f pi/2 in float64, |.| <=
    ~pi/4). Below CW_LIMIT a four-part Cody-Waite reduction, above it _reduce_huge; both are
    computed and one selected (no gathers, no branch)."""
    bits = b.and_(b.bitcast(x, I32), i32(0x7FFFFFFF))
    a = b.bitcast(bits, F32)
    ad = ext(b, a)
    n = rint(b, b.fmul(ad, f64(2 / PI)))
    r = ad
    for part in _HALF_PI_PARTS:
        r = b.fsub(r, b.fmul(n, f64(part)))
    huge = b.fcmp_ordered(">=", a, f32(CW_LIMIT))
    hn, hf = _reduce_huge(b, b.select(huge, bits, i32(0x4F000000)))
    n = b.select(huge, hn, n)
    r = b.select(huge, b.fmul(hf, f64(HALF_PI)), r)
    q = b.trunc(b.and_(to_int(b, n, I64), i64(3)), I32)
    return q, r


def _sin_cos_d(b: B, r: V) -> tuple[V, V]:
    z = b.fmul(r, r)
    return b.fmul(r, horner(b, z, _SIN_D)), horner(b, z, _COS_D)


def _finite_or_zero(b: B, x: V) -> V:
    return where(b, lt(b, fabs(b, x), INF), x, 0.0)


def sin_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        q, r = reduce_half_pi(fb, _finite_or_zero(fb, x))
        s, co = _sin_cos_d(fb, r)
        v = fb.select(fb.trunc(q, ir.IntType(1)), co, s)
        v = fb.select(fb.icmp_unsigned(">=", q, i32(2)), fb.fneg(v), v)
        v = narrow(fb, v)
        v = fb.select(fb.icmp_signed("<", fb.bitcast(x, I32), i32(0)), fb.fneg(v), v)  # sin(-x) = -sin x
        return where(fb, lt(fb, fabs(fb, x), INF), v, NAN)

    return lib_call(b, "anvil.sin.f32", [x], body)


def cos_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        q, r = reduce_half_pi(fb, _finite_or_zero(fb, x))
        s, co = _sin_cos_d(fb, r)
        v = fb.select(fb.trunc(q, ir.IntType(1)), fb.fneg(s), co)
        v = fb.select(fb.icmp_unsigned(">=", q, i32(2)), fb.fneg(v), v)
        return where(fb, lt(fb, fabs(fb, x), INF), narrow(fb, v), NAN)

    return lib_call(b, "anvil.cos.f32", [x], body)


def tan_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        q, r = reduce_half_pi(fb, _finite_or_zero(fb, x))
        s, co = _sin_cos_d(fb, r)
        odd = fb.trunc(q, ir.IntType(1))
        v = narrow(fb, fb.fdiv(fb.select(odd, fb.fneg(co), s), fb.select(odd, s, co)))
        v = fb.select(fb.icmp_signed("<", fb.bitcast(x, I32), i32(0)), fb.fneg(v), v)
        return where(fb, lt(fb, fabs(fb, x), INF), v, NAN)

    return lib_call(b, "anvil.tan.f32", [x], body)


def _atan_ratio(b: B, num: V, den: V) -> V:
    """atan(num / den) for float64 0 <= num <= den (not both 0, finite), relative error < 1e-13: one
    division, of u = num/den (<= tan(pi/8)) or (num - den)/(num + den) + pi/4 (both differences
    exact: num and den are float32 values within a factor 2.5 of each other there)."""
    big = gt(b, num, b.fmul(den, f64(TAN_PI_8)))
    u = b.fdiv(b.select(big, b.fsub(num, den), num), b.select(big, b.fadd(num, den), den))
    a = b.fmul(u, horner(b, b.fmul(u, u), _ATAN_D))
    return b.fadd(where(b, big, f64(QUARTER_PI), 0.0), a)


def atan_f32(b: B, x: V) -> V:
    """atan(|x|) = atan(min/max) or pi/2 - that, of |x| and 1."""

    def body(fb: B, x: V) -> V:
        a = ext(fb, fabs(fb, x))
        inv = gt(fb, a, f64(1.0))
        num = fb.select(inv, f64(1.0), a)
        den = fb.select(inv, a, f64(1.0))
        den = where(fb, eq(fb, a, INF), 1.0, den)  # atan(inf) = pi/2: 1/inf as 0/1
        num = where(fb, eq(fb, a, INF), 0.0, num)
        t = _atan_ratio(fb, num, den)
        t = fb.select(inv, fb.fsub(f64(HALF_PI), t), t)
        return copysign(fb, narrow(fb, t), x)

    return lib_call(b, "anvil.atan.f32", [x], body)


def atan2_f32(b: B, y: V, x: V) -> V:
    def body(fb: B, y: V, x: V) -> V:
        ax, ay = ext(fb, fabs(fb, x)), ext(fb, fabs(fb, y))
        swap = gt(fb, ay, ax)
        num, den = fb.select(swap, ax, ay), fb.select(swap, ay, ax)
        both_inf = fb.and_(eq(fb, ax, INF), eq(fb, ay, INF))
        num = where(fb, both_inf, 1.0, where(fb, eq(fb, den, INF), 0.0, num))
        den = where(fb, both_inf, 1.0, where(fb, eq(fb, den, INF), 1.0, where(fb, eq(fb, den, 0.0), 1.0, den)))
        t = _atan_ratio(fb, num, den)
        t = fb.select(swap, fb.fsub(f64(HALF_PI), t), t)
        neg_x = fb.icmp_signed("<", fb.bitcast(x, I32), i32(0))
        t = fb.select(neg_x, fb.fsub(f64(PI), t), t)
        r = copysign(fb, narrow(fb, t), y)
        return where(fb, fb.or_(isnan(fb, x), isnan(fb, y)), NAN, r)

    return lib_call(b, "anvil.atan2.f32", [y, x], body)


def _asin_parts(b: B, a: V) -> tuple[V, V]:
    """For float64 a = |x| <= 1: (asin(a) for a <= 1/2, else asin(sqrt((1 - a)/2))), and a > 1/2
    (asin a = pi/2 - 2 asin(sqrt((1 - a)/2)), 1 - a exact). a > 1 gives NaN (sqrt of a negative)."""
    hi = gt(b, a, f64(0.5))
    z = b.select(hi, b.fmul(b.fsub(f64(1.0), a), f64(0.5)), b.fmul(a, a))
    s = b.select(hi, sqrt(b, z), a)
    return b.fmul(s, horner(b, z, _ASIN_D)), hi


def asin_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        p, hi = _asin_parts(fb, ext(fb, fabs(fb, x)))
        r = fb.select(hi, fb.fsub(f64(HALF_PI), fb.fadd(p, p)), p)
        return copysign(fb, narrow(fb, r), x)

    return lib_call(b, "anvil.asin.f32", [x], body)


def acos_f32(b: B, x: V) -> V:
    """acos x = pi/2 - asin x for |x| <= 1/2; 2 asin(s) for x > 1/2, pi - 2 asin(s) below -1/2."""

    def body(fb: B, x: V) -> V:
        xd = ext(fb, x)
        p, hi = _asin_parts(fb, fabs(fb, xd))
        mid = fb.fsub(f64(HALF_PI), copysign(fb, p, xd))
        twice = fb.fadd(p, p)
        r = fb.select(hi, fb.select(lt(fb, xd, 0.0), fb.fsub(f64(PI), twice), twice), mid)
        return narrow(fb, r)

    return lib_call(b, "anvil.acos.f32", [x], body)

