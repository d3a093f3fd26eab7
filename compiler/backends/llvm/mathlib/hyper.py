"""Hyperbolic functions and their inverses for float32, evaluated in float64 on the cores of
explog.py (relative errors ~1e-13 before the one rounding to float32)."""

from __future__ import annotations

from .core import (
    INF,
    NAN,
    B,
    V,
    clamp,
    copysign,
    eq,
    ext,
    f32,
    f64,
    fabs,
    fma,
    gt,
    horner,
    isnan,
    lib_call,
    lt,
    narrow,
    sqrt,
    where,
)
from .explog import exp_d, exp_f32, expm1_d, log_d

# Below 2^-7 the inverse functions are their Taylor polynomials: the first omitted term is
# < 2^-56 relative. Above, log(1 + d) with d >= 2^-7 loses at most 7 bits of float64's 53.
_SMALL = 2.0**-7


# scripts/fit_mathlib.py tanh_small: tanh(x) = x + x^3 q(x^2) for |x| < 0.55, relative error < 4e-9.
_TANH_SMALL = (-0.33333325386047363, 0.1333281695842743, -0.0538734532892704, 0.02114778570830822,
               -0.006368271075189114)


def tanh_f32(b: B, x: V) -> V:
    """float32 arithmetic (tanh is a common activation: twice as fast as the float64 way):
    the odd polynomial below 0.55; above, (1 - e)/(1 + e) with e = e^-2|x| <= 1/3, which passes
    exp's relative error on scaled by 2e/(1 - e^2) <= 0.75. |x| is clamped to 9.1, where e < 2^-26
    and tanh rounds to 1."""

    def body(fb: B, x: V) -> V:
        a = fabs(fb, x)
        z = fb.fmul(x, x)
        small = fma(fb, fb.fmul(x, z), horner(fb, z, _TANH_SMALL), x)
        e = exp_f32(fb, fb.fmul(clamp(fb, a, 0.0, 9.1), f32(-2.0)))
        big = copysign(fb, fb.fdiv(fb.fsub(f32(1.0), e), fb.fadd(f32(1.0), e)), x)
        return where(fb, lt(fb, a, 0.55), small, big)

    return lib_call(b, "anvil.tanh.f32", [x], body)


def sinh_f32(b: B, x: V) -> V:
    """sinh|x| = (e + e/(e + 1))/2 with e = expm1|x| (both terms positive)."""

    def body(fb: B, x: V) -> V:
        a = clamp(fb, ext(fb, fabs(fb, x)), 0.0, 100.0)
        e = expm1_d(fb, a)
        r = fb.fmul(fb.fadd(e, fb.fdiv(e, fb.fadd(e, f64(1.0)))), f64(0.5))
        return copysign(fb, narrow(fb, r), x)

    return lib_call(b, "anvil.sinh.f32", [x], body)


def cosh_f32(b: B, x: V) -> V:
    def body(fb: B, x: V) -> V:
        e = exp_d(fb, ext(fb, fabs(fb, x)))
        return narrow(fb, fb.fmul(fb.fadd(e, fb.fdiv(f64(1.0), e)), f64(0.5)))

    return lib_call(b, "anvil.cosh.f32", [x], body)


def _finite_log(b: B, u: V, a: V) -> V:
    """log_d(u) where a (the argument) is finite and not NaN; log of 1 elsewhere (replaced after)."""
    ok = lt(b, a, INF)
    return log_d(b, where(b, ok, u, 1.0))


def asinh_f32(b: B, x: V) -> V:
    """asinh|x| = log(|x| + sqrt(x^2 + 1)) (x^2 exact in float64, no overflow)."""

    def body(fb: B, x: V) -> V:
        a = ext(fb, fabs(fb, x))
        z = fb.fmul(a, a)
        small = fb.fmul(a, horner(fb, z, (1.0, -1 / 6, 3 / 40, -5 / 112)))
        big = _finite_log(fb, fb.fadd(a, sqrt(fb, fb.fadd(z, f64(1.0)))), a)
        r = where(fb, lt(fb, a, _SMALL), small, where(fb, eq(fb, a, INF), INF, big))
        return copysign(fb, narrow(fb, where(fb, isnan(fb, a), NAN, r)), x)

    return lib_call(b, "anvil.asinh.f32", [x], body)


def acosh_f32(b: B, x: V) -> V:
    """log(x + sqrt(x^2 - 1)) for x >= 1 (x^2 - 1 exact near 1, where acosh >= 2^-12)."""

    def body(fb: B, x: V) -> V:
        xd = ext(fb, x)
        ok = fb.fcmp_ordered(">=", xd, f64(1.0))
        a = where(fb, ok, xd, 1.0)
        r = _finite_log(fb, fb.fadd(a, sqrt(fb, fb.fsub(fb.fmul(a, a), f64(1.0)))), a)
        r = where(fb, eq(fb, xd, INF), INF, r)
        return narrow(fb, where(fb, ok, r, NAN))

    return lib_call(b, "anvil.acosh.f32", [x], body)


def atanh_f32(b: B, x: V) -> V:
    """atanh|x| = log((1 + |x|)/(1 - |x|))/2 (both exact in float64); 1 -> inf, > 1 -> NaN."""

    def body(fb: B, x: V) -> V:
        a = ext(fb, fabs(fb, x))
        z = fb.fmul(a, a)
        small = fb.fmul(a, horner(fb, z, (1.0, 1 / 3, 1 / 5, 1 / 7)))
        inside = lt(fb, a, 1.0)
        q = fb.fdiv(fb.fadd(f64(1.0), a), fb.fsub(f64(1.0), a))
        big = fb.fmul(log_d(fb, where(fb, inside, q, 1.0)), f64(0.5))
        r = where(fb, lt(fb, a, _SMALL), small, big)
        r = where(fb, eq(fb, a, 1.0), INF, r)
        r = where(fb, fb.or_(gt(fb, a, 1.0), isnan(fb, a)), NAN, r)
        return copysign(fb, narrow(fb, r), x)

    return lib_call(b, "anvil.atanh.f32", [x], body)
