"""lgamma and tgamma for float32, evaluated in float64.

x >= 3: Stirling's series for ln Gamma(y), y = x or x + 5 >= 8 (then less ln of the five factors
x (x+1)..(x+4)); the series' first omitted term is < 2e-13. Below 3 the zeros of lgamma at 1 and
2 need relative accuracy: lgamma(u) = (u - 1)(u - 2) r(u) on [1, 2] with a fitted r, and
lgamma(x) = lgamma(x + 1) - ln x below 1, lgamma(x - 1) + ln(x - 1) above 2 (neither cancels
much: the ln term and the result have the same sign or the result is the larger). Negative x by
reflection, Gamma(x) Gamma(1 - x) = pi / sin(pi x), with sin(pi x) from the exact x - round(x).
tgamma = e^lgamma (its relative error is lgamma's absolute error).
"""

from __future__ import annotations

import math

from llvmlite import ir

from .core import (
    INF,
    NAN,
    B,
    V,
    call,
    eq,
    ext,
    f64,
    fabs,
    horner,
    lib_call,
    lt,
    narrow,
    rint,
    where,
)
from .explog import exp_d, log_d
from .trig import _COS_D, _SIN_D

# scripts/fit_mathlib.py lgamma_12: lgamma(u) / ((u - 1)(u - 2)) in u - 1.5 on [1, 2] (relative 4e-13).
_LGAMMA_12 = (0.4831289505409483, -0.1459598959199131, 0.06291140109057858, -0.031308486670948515,
              0.016797097308796922, -0.009425657902625931, 0.0054464993888569254, -0.0032114091994909955,
              0.001922277407369239, -0.0011707675975734235, 0.0007168174731213929, -0.00040596570778870156,
              0.0002473243242875546, -0.00024807650050872655, 0.00015985091046793562)
# Stirling: ln Gamma(y) - ((y - 1/2) ln y - y + ln(2 pi)/2) = sum B_2k / (2k (2k - 1) y^(2k - 1))
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
_HALF_LN_2PI = 0.9189385332046728


def _lgamma_pos(b: B, x: V) -> V:
    """ln Gamma(x) for float64 x > 0 (finite)."""
    one = f64(1.0)
    big = b.fcmp_ordered(">=", x, f64(3.0))
    shift = lt(b, x, 8.0)
    y = where(b, shift, b.fadd(x, f64(5.0)), x)
    prod = b.fmul(b.fmul(b.fmul(x, b.fadd(x, one)), b.fmul(b.fadd(x, f64(2.0)), b.fadd(x, f64(3.0)))),
                  b.fadd(x, f64(4.0)))
    t = b.fdiv(one, y)
    ln_y = log_d(b, y)
    stirling = b.fadd(b.fsub(b.fmul(b.fsub(y, f64(0.5)), ln_y), y),
                      b.fadd(f64(_HALF_LN_2PI), b.fmul(t, horner(b, b.fmul(t, t), _STIRLING))))
    # below 3: u in [1, 2] and the ln term; one ln serves both paths
    below1 = lt(b, x, 1.0)
    above2 = b.fcmp_ordered(">=", x, f64(2.0))
    u = where(b, below1, b.fadd(x, one), where(b, above2, b.fsub(x, one), x))
    arg = where(b, big, where(b, shift, prod, one), where(b, below1, x, where(b, above2, b.fsub(x, one), one)))
    ln_arg = log_d(b, arg)
    near = b.fmul(b.fmul(b.fsub(u, one), b.fsub(u, f64(2.0))), horner(b, b.fsub(u, f64(1.5)), _LGAMMA_12))
    small = where(b, below1, b.fsub(near, ln_arg), b.fadd(near, ln_arg))
    return where(b, big, b.fsub(stirling, ln_arg), small)


def _sinpi(b: B, x: V) -> V:
    """sin(pi x) for float64 x (exact reduction: x - round(x) is exact)."""
    n = rint(b, x)
    r = b.fsub(x, n)
    a = fabs(b, r)
    lo = b.fmul(a, f64(math.pi))
    hi = b.fmul(b.fsub(f64(0.5), a), f64(math.pi))
    s = where(b, b.fcmp_ordered("<=", a, f64(0.25)), b.fmul(lo, horner(b, b.fmul(lo, lo), _SIN_D)),
              horner(b, b.fmul(hi, hi), _COS_D))
    s = where(b, lt(b, r, 0.0), b.fneg(s), s)
    half = b.fmul(n, f64(0.5))
    odd = b.fcmp_ordered("!=", call(b, "llvm.floor.f64", [half]), half)  # (float: n may exceed any int)
    return where(b, odd, b.fneg(s), s)


def _prepare(b: B, x: V) -> tuple[V, V, V, V]:
    """(x as float64, x < 0, the positive argument t = x or 1 - x (1 where x is not finite or
    is a pole), and sin(pi x) for negative x)."""
    xd = ext(b, x)
    neg = lt(b, xd, 0.0)
    t = where(b, neg, b.fsub(f64(1.0), xd), xd)
    ok = b.and_(lt(b, fabs(b, xd), INF), b.fcmp_ordered("!=", xd, f64(0.0)))
    t = where(b, ok, t, 1.0)
    s = _sinpi(b, where(b, ok, xd, 0.5))
    return xd, neg, t, s


def _pole(b: B, xd: V, neg: V) -> V:
    """x is 0 or a negative integer (or -inf)."""
    return b.or_(eq(b, xd, 0.0), b.and_(neg, eq(b, rint(b, xd), xd)))


def lgamma_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        xd, neg, t, s = _prepare(fb, x)
        lg = _lgamma_pos(fb, t)
        refl = fb.fsub(log_d(fb, fb.fdiv(f64(math.pi), where(fb, neg, fabs(fb, s), 1.0))), lg)
        r = narrow(fb, where(fb, neg, refl, lg))
        r = where(fb, fb.or_(_pole(fb, xd, neg), eq(fb, fabs(fb, xd), INF)), INF, r)
        return where(fb, fb.fcmp_unordered("uno", xd, xd), x, r)

    return lib_call(b, "anvil.lgamma.f32", [x], body)


def tgamma_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        xd, neg, t, s = _prepare(fb, x)
        g = exp_d(fb, _lgamma_pos(fb, t))
        refl = fb.fdiv(f64(math.pi), fb.fmul(where(fb, neg, s, 1.0), g))
        r = narrow(fb, where(fb, neg, refl, g))
        r = where(fb, eq(fb, xd, 0.0), fb.fdiv(ir.Constant(x.type, 1.0), x), r)  # +-0 -> +-inf
        r = where(fb, fb.and_(neg, eq(fb, rint(fb, xd), xd)), NAN, r)  # negative integers, -inf
        r = where(fb, eq(fb, xd, INF), INF, r)
        return where(fb, fb.fcmp_unordered("uno", xd, xd), x, r)

    return lib_call(b, "anvil.tgamma.f32", [x], body)

