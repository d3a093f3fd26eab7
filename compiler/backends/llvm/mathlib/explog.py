"""Exponentials and logarithms.

float32 exp/exp2/log/log2 are float32 arithmetic (range reduction + polynomial; over every float32:
exp 1.01 ulp, exp2 1.02, log 0.83, log2 1.06): they are the most used, and float32 is twice the
lanes of float64. The others evaluate in float64 from the float32 argument: the float64 cores
below are accurate to ~1e-14 relative, so the one rounding to float32 at the end dominates and
the results are within 0.5 ulp plus a hair (bounds in tests/compiler/test_cpu_mathlib.py).
"""

from __future__ import annotations

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
    clamp,
    eq,
    ext,
    f32,
    f64,
    fabs,
    fma,
    gt,
    horner,
    i32,
    i64,
    isnan,
    lib_call,
    lt,
    narrow,
    pow2_f32,
    pow2_f64,
    rint,
    to_int,
    where,
)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# log2(e) = _LOG2E_HI + _LOG2E_LO, the first rounded to float32
_LOG2E_HI = 1.4426950216293335
_LOG2E_LO = 1.92596298909109e-08
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
# ln 2 in two float64 parts, the first of 40 bits: n LN2_HI_D is exact for |n| < 2^13.
LN2_HI_D = 0.6931471805598903
LN2_LO_D = 5.497923018708371e-14


# ------------------------------------------------------------------------- float32 exp/log
def _exp_poly(b: B, r: V) -> V:
    p = horner(b, r, (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3,
                      1.9875691500e-4))
    return b.fadd(fma(b, p, b.fmul(r, r), r), f32(1.0))


def _scale_f32(b: B, p: V, n: V) -> V:
    """p 2^n for n in [-252, 254] in two exact steps (one rounding, at the end, for subnormals)."""
    n1 = b.ashr(n, i32(1))
    return b.fmul(b.fmul(p, pow2_f32(b, n1)), pow2_f32(b, b.sub(n, n1)))


def exp_f32(b: B, x: V) -> V:
    x = clamp(b, x, -104.0, 89.0)
    nf = rint(b, b.fmul(x, f32(LOG2E)))
    r = b.fsub(b.fsub(x, b.fmul(nf, f32(LN2_HI))), b.fmul(nf, f32(LN2_LO)))
    return _scale_f32(b, _exp_poly(b, r), to_int(b, nf, I32))


def exp2_f32(b: B, x: V) -> V:
    x = clamp(b, x, -150.0, 129.0)
    nf = rint(b, x)
    r = b.fmul(b.fsub(x, nf), f32(LN2))
    return _scale_f32(b, _exp_poly(b, r), to_int(b, nf, I32))


def _log_parts(b: B, x: V) -> tuple[V, V, V, V]:
    """(e, m, y, z) with ln x = e ln2 + m - z/2 + y: e an integer (float32), m in [sqrt2/2 - 1,
    sqrt2 - 1) exact, z = m^2, y the small rest."""
    sub = lt(b, x, 1.1754943508222875e-38)
    xs = b.select(sub, b.fmul(x, f32(8388608.0)), x)
    bits = b.bitcast(xs, I32)
    e = b.sub(b.lshr(bits, i32(23)), i32(126))
    e = b.select(sub, b.sub(e, i32(23)), e)
    m = b.bitcast(b.or_(b.and_(bits, i32(0x007FFFFF)), i32(0x3F000000)), F32)
    small = lt(b, m, 0.707106781186547524)
    e = b.select(small, b.sub(e, i32(1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), f32(1.0)), b.fsub(m, f32(1.0)))
    z = b.fmul(m, m)
    p: V = f32(7.0376836292e-2)
    for k in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
              2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
        p = b.fadd(b.fmul(p, m), f32(k))
    return b.sitofp(e, F32), m, b.fmul(b.fmul(p, m), z), z


def log_f32(b: B, x: V) -> V:
    ef, m, y, z = _log_parts(b, x)
    y = b.fsub(b.fadd(y, b.fmul(ef, f32(LN2_LO))), b.fmul(z, f32(0.5)))
    r = b.fadd(b.fadd(m, y), b.fmul(ef, f32(LN2_HI)))
    return log_specials(b, x, r)


def log2_f32(b: B, x: V) -> V:
    """e + (m + y) log2(e), with m log2(e) carried in two parts: one rounding of the sum where e is
    0, where log2 x is small and its ulp too."""
    ef, m, y, z = _log_parts(b, x)
    y = fma(b, z, f32(-0.5), y)
    t = fma(b, m, f32(_LOG2E_HI), fma(b, y, f32(LOG2E), b.fmul(m, f32(_LOG2E_LO))))
    return log_specials(b, x, b.fadd(ef, t))


def log_specials(b: B, x: V, r: V) -> V:
    """r with log's special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN."""
    r = where(b, eq(b, x, 0.0), -INF, r)
    r = where(b, eq(b, x, INF), INF, r)
    return where(b, b.fcmp_unordered("<", x, ir.Constant(x.type, 0.0)), NAN, r)


# ------------------------------------------------------------------------- float64 cores
# (expm1(r) - r) / r^2 on |r| <= ln2/2: relative error 8e-15 (scripts/fit_mathlib.py expm1_d).
_EXPM1_Q = (0.499999999999999, 0.16666666666648453, 0.041666666666924104, 0.008333333353653287,
            0.001388888879354442, 0.0001984120881472636, 2.4801685507540606e-05, 2.762509479740225e-06,
            2.7551981842322636e-07)
# atanh(s) / s as a polynomial in s^2 for |s| <= (sqrt2 - 1) / (sqrt2 + 1): relative error 3e-14.
_ATANH_S = (0.9999999999999727, 0.33333333339903487, 0.19999997412634815, 0.14286086478501323,
            0.11086982603849502, 0.09806122739336234)


def expm1_small_d(b: B, r: V) -> V:
    """expm1(r) for |r| <= ln2/2 (float64), relative error < 1e-14."""
    return fma(b, b.fmul(r, r), horner(b, r, _EXPM1_Q), r)


def _reduce_ln2_d(b: B, x: V, lo: float, hi: float) -> tuple[V, V]:
    """x = n ln2 + r with |r| <= ln2/2 (x clamped to [lo, hi], |hi|, |lo| < 2^13 ln 2); r exact
    to 2^-90 absolute. Returns (n as i64, r)."""
    x = clamp(b, x, lo, hi)
    nf = rint(b, b.fmul(x, f64(LOG2E)))
    r = b.fsub(b.fsub(x, b.fmul(nf, f64(LN2_HI_D))), b.fmul(nf, f64(LN2_LO_D)))
    return to_int(b, nf, I64), r


def _scale_d(b: B, p: V, n: V) -> V:
    """p 2^n (float64), n in [-2000, 2000]: two exact steps while p 2^n is a normal float64."""
    n1 = b.ashr(n, i64(1))
    return b.fmul(b.fmul(p, pow2_f64(b, n1)), pow2_f64(b, b.sub(n, n1)))


def exp_d(b: B, x: V) -> V:
    """e^x for float64 x, meant for float32 results: x clamped to [-200, 200] (e^+-200 is far
    outside float32 and inside float64), relative error < 2e-14; NaN stays NaN."""
    n, r = _reduce_ln2_d(b, x, -200.0, 200.0)
    return _scale_d(b, b.fadd(expm1_small_d(b, r), f64(1.0)), n)


def exp2_d(b: B, t: V) -> V:
    """2^t for float64 t, meant for float32 results (t clamped to [-300, 300])."""
    t = clamp(b, t, -300.0, 300.0)
    nf = rint(b, t)
    r = b.fmul(b.fsub(t, nf), f64(LN2))
    return _scale_d(b, b.fadd(expm1_small_d(b, r), f64(1.0)), to_int(b, nf, I64))


def expm1_d(b: B, x: V) -> V:
    """e^x - 1 for float64 x, relative error < 3e-14 (2^n expm1(r) + (2^n - 1): for n = 0 the
    polynomial alone; otherwise |result| >= 0.29 and the two terms barely cancel)."""
    n, r = _reduce_ln2_d(b, x, -60.0, 200.0)
    t = _scale_d(b, f64(1.0), n)
    return fma(b, t, expm1_small_d(b, r), b.fsub(t, f64(1.0)))


def _split_d(b: B, u: V) -> tuple[V, V]:
    """u = 2^k m with m in [sqrt2/2, sqrt2), for finite positive normal float64 u."""
    bits = b.bitcast(u, I64)
    k = b.ashr(b.sub(bits, i64(0x3FE6A09E667F3BCD)), i64(52))
    m = b.bitcast(b.sub(bits, b.shl(k, i64(52))), F64)
    return k, m


def _log1p_small_d(b: B, f: V) -> V:
    """log(1 + f) for f in [sqrt2/2 - 1, sqrt2 - 1]: 2 atanh(f / (2 + f)), relative error 3e-14."""
    s = b.fdiv(f, b.fadd(f64(2.0), f))
    return b.fmul(b.fadd(s, s), horner(b, b.fmul(s, s), _ATANH_S))


def log_d(b: B, u: V) -> V:
    """ln u for finite positive normal float64 u, relative error < 1e-13 (k ln2 + log(m): where
    k != 0, |ln u| >= ln2 / 2 and the two terms cancel by at most half)."""
    k, m = _split_d(b, u)
    return fma(b, b.sitofp(k, F64), f64(LN2), _log1p_small_d(b, b.fsub(m, f64(1.0))))


def log2_d(b: B, u: V) -> V:
    k, m = _split_d(b, u)
    return fma(b, _log1p_small_d(b, b.fsub(m, f64(1.0))), f64(LOG2E), b.sitofp(k, F64))


# ------------------------------------------------------------------------- float32 functions
def _float32_log(b: B, x: V, scale: float, name: str) -> V:
    def body(fb: B, x: V) -> V:
        # every positive float32 is a normal float64; 0, negatives, inf and NaN are replaced after
        u = ext(fb, where(fb, fb.and_(gt(fb, x, 0.0), lt(fb, x, INF)), x, 1.0))
        r = narrow(fb, fb.fmul(log_d(fb, u), f64(scale)))
        return log_specials(fb, x, r)

    return lib_call(b, name, [x], body)


def log10_f32(b: B, x: V) -> V:
    return _float32_log(b, x, 0.4342944819032518, "anvil.log10.f32")


def exp10_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        return narrow(fb, exp2_d(fb, fb.fmul(ext(fb, x), f64(3.321928094887362))))

    return lib_call(b, "anvil.exp10.f32", [x], body)


def expm1_f32(b: B, x: V) -> V:
    return lib_call(b, "anvil.expm1.f32", [x], lambda fb, x: narrow(fb, expm1_d(fb, ext(fb, x))))


def log1p_f32(b: B, x: V) -> V:
    """log(1 + x): 1 + x is exact in float64 wherever it leaves [sqrt2/2, sqrt2) (x >= 0.41 or
    x <= -0.29); inside, log(1 + f) is evaluated on f = x itself."""

    def body(fb: B, x: V) -> V:
        xd = ext(fb, x)
        ok = fb.and_(fb.fcmp_ordered(">", x, f32(-1.0)), lt(fb, x, INF))
        u = where(fb, ok, fb.fadd(xd, f64(1.0)), 1.0)
        k, m = _split_d(fb, u)
        f = where(fb, fb.icmp_signed("==", k, i64(0)), xd, fb.fsub(m, f64(1.0)))
        r = fma(fb, fb.sitofp(k, F64), f64(LN2), _log1p_small_d(fb, f))
        r32 = where(fb, eq(fb, x, 0.0), x, narrow(fb, r))  # -0 stays -0
        r32 = where(fb, eq(fb, x, -1.0), -INF, r32)
        r32 = where(fb, eq(fb, x, INF), INF, r32)
        return where(fb, fb.fcmp_unordered("<", x, f32(-1.0)), NAN, r32)

    return lib_call(b, "anvil.log1p.f32", [x], body)


def pow_f32(b: B, x: V, y: V) -> V:
    """x^y = 2^(y log2|x|) in float64 (the product's error, < 2^-45 absolute, moves the result by
    < 1e-13 relative), then C99's special cases and the sign for negative x."""

    def body(fb: B, x: V, y: V) -> V:
        ax = fabs(fb, x)
        finite_pos = fb.and_(fb.fcmp_ordered(">", ax, f32(0.0)), lt(fb, ax, INF))
        l = log2_d(fb, ext(fb, where(fb, finite_pos, ax, 1.0)))
        l = where(fb, eq(fb, ax, 0.0), -INF, where(fb, eq(fb, ax, INF), INF, l))
        l = where(fb, isnan(fb, ax), NAN, l)
        r = narrow(fb, exp2_d(fb, fb.fmul(ext(fb, y), l)))
        r = where(fb, eq(fb, ax, 1.0), 1.0, r)
        y_int = eq(fb, rint(fb, y), y)
        small_y = lt(fb, fabs(fb, y), 16777216.0)
        yi = fb.fptosi(where(fb, small_y, y, 0.0), I32)
        y_odd = fb.and_(fb.and_(y_int, small_y), fb.trunc(yi, ir.IntType(1)))
        neg_x = fb.icmp_signed("<", fb.bitcast(x, I32), i32(0))
        r = fb.select(fb.and_(neg_x, y_odd), fb.fneg(r), r)
        # (-inf)^y is +-0 or +-inf for every y; other negative x need an integral y
        r = where(fb, fb.and_(fb.and_(lt(fb, x, 0.0), gt(fb, x, -INF)), fb.not_(y_int)), NAN, r)
        return where(fb, eq(fb, y, 0.0), 1.0, r)

    return lib_call(b, "anvil.pow.f32", [x, y], body)


