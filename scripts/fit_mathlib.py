"""Fit the polynomials of the CPU math library (compiler/backends/cpu/mathlib/).

    python scripts/fit_mathlib.py            # every fit, its coefficients and its error
    python scripts/fit_mathlib.py erf_small  # one

Each fit is a near-minimax polynomial found by Lawson's iteratively reweighted least squares on a
dense Chebyshev-distributed grid, with the error measured against mpmath at 50 digits. The error
is relative unless a fit says absolute. Coefficients meant for float32 arithmetic are rounded to
float32 and the fit is redone for the remaining ones after each rounding (the rounding of a
leading coefficient would otherwise dominate the error).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import mpmath
import numpy as np

mpmath.mp.dps = 50


@dataclass
class Fit:
    """p(t) = sum(c_k t^(first + k step)) on [lo, hi], approximating target(t) (an mpmath function)."""

    name: str
    target: Callable[[mpmath.mpf], mpmath.mpf]
    lo: float
    hi: float
    terms: int
    first: int = 0
    step: int = 1
    f32: bool = False
    absolute: bool = False
    fixed: dict[int, float] = field(default_factory=dict)  # term index -> a value kept as is
    denom: Callable[[mpmath.mpf], mpmath.mpf] | None = None  # relative to this, not to target


def _grid(lo: float, hi: float, n: int = 3000) -> np.ndarray:
    k = np.arange(n)
    return np.sort((lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n))


def fit(f: Fit, iters: int = 60) -> tuple[list[float], float]:
    t = _grid(f.lo, f.hi)
    y = np.array([float(f.target(mpmath.mpf(float(v)))) for v in t])
    d = y if f.denom is None else np.array([float(f.denom(mpmath.mpf(float(v)))) for v in t])
    w_err = np.ones_like(y) if f.absolute else 1.0 / np.abs(d)
    powers = [f.first + k * f.step for k in range(f.terms)]
    scale = max(abs(f.lo), abs(f.hi))
    basis = np.stack([(t / scale) ** p for p in powers], axis=1)
    fixed = dict(f.fixed)
    coeffs: list[float] = []
    for _ in range(f.terms - len(fixed) if f.f32 else 1):
        free = [k for k in range(f.terms) if k not in fixed]
        rhs = y - sum((basis[:, k] * fixed[k] * scale ** powers[k] for k in fixed), np.zeros_like(y))
        a = basis[:, free] * w_err[:, None]
        r = rhs * w_err
        lw = np.ones_like(y) / len(y)
        for _ in range(iters):
            sw = np.sqrt(lw)
            c, *_ = np.linalg.lstsq(a * sw[:, None], r * sw, rcond=None)
            e = np.abs(a @ c - r)
            lw = lw * e
            lw /= lw.sum()
        full = {k: v for k, v in fixed.items()}
        for k, v in zip(free, c, strict=True):
            full[k] = v / scale ** powers[k]
        coeffs = [float(full[k]) for k in range(f.terms)]
        if not f.f32:
            break
        # round the lowest-order free coefficient (usually the largest term) to float32, refit the rest
        k0 = free[0]
        fixed[k0] = float(np.float32(full[k0]))
    if f.f32:
        coeffs = [float(np.float32(c)) for c in coeffs]
    return coeffs, max_error(f, coeffs)


def max_error(f: Fit, coeffs: list[float], n: int = 20000) -> float:
    t = _grid(f.lo, f.hi, n)
    worst = mpmath.mpf(0)
    for v in t:
        x = mpmath.mpf(float(v))
        p = sum(mpmath.mpf(c) * x ** (f.first + k * f.step) for k, c in enumerate(coeffs))
        want = f.target(x)
        err = abs(p - want) if f.absolute else abs((p - want) / (want if f.denom is None else f.denom(x)))
        worst = max(worst, err)
    return float(worst)


def _sinc_odd(fn: Callable[[mpmath.mpf], mpmath.mpf]) -> Callable[[mpmath.mpf], mpmath.mpf]:
    """g(z) with fn(x) = x g(x^2) (fn odd), continuous at 0."""
    return lambda z: fn(mpmath.sqrt(z)) / mpmath.sqrt(z) if z > 0 else mpmath.diff(fn, 0)


FITS: dict[str, Fit] = {}


def register(f: Fit) -> None:
    FITS[f.name] = f


def main(names: list[str]) -> None:
    for name in names or list(FITS):
        f = FITS[name]
        coeffs, err = fit(f)
        kind = "abs" if f.absolute else "rel"
        print(f"{name}: [{f.lo}, {f.hi}] powers {f.first}+{f.step}k, {f.terms} terms, {kind} error {err:.3e}")
        print("    (" + ", ".join(repr(c) for c in coeffs) + ")")



def _erf_fits() -> None:
    erf_x = _sinc_odd(mpmath.erf)
    c_hi = float(np.float32(float(2 / mpmath.sqrt(mpmath.pi))))

    def erfcx(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.erfc(x) * mpmath.exp(x * x)

    # erf(x) = x c_hi + x p(x^2) on [0, 1]: c_hi is 2/sqrt(pi) rounded to float32, p's constant term
    # carries the rest, so erf of tiny x is x (2/sqrt(pi)) rounded once.
    register(Fit("erf_small", lambda z: erf_x(z) - c_hi, 0.0, 1.0, 7, f32=True, denom=erf_x))
    # erfcx(a) on [1, 4] in u = a - 2.5, weighted by e^-a^2: the error of erfc = e^-a^2 erfcx, absolute.
    register(Fit("erf_tail", lambda u: erfcx(u + 2.5), -1.5, 1.5, 9, f32=True,
                 denom=lambda u: mpmath.exp((u + 2.5) ** 2)))
    register(Fit("erf_d", erf_x, 0.0, 1.0, 11))
    # erfcx(a) on [1, 10.06] in t = (a - 2) / (a + 2) (smooth up to a = inf, where t = 1)
    register(Fit("erfcx_d", lambda t: erfcx(2 * (1 + t) / (1 - t)), -1 / 3, 8.06 / 12.06, 12))


_erf_fits()



def _trig_fits() -> None:
    quarter = float(mpmath.pi / 4) * 1.02  # the reduction leaves |r| <= pi/4 (a little more: n is rounded)
    register(Fit("sin_d", _sinc_odd(mpmath.sin), 0.0, quarter**2, 5))
    register(Fit("cos_d", lambda z: mpmath.cos(mpmath.sqrt(z)), 0.0, quarter**2, 6))
    register(Fit("atan_d", _sinc_odd(mpmath.atan), 0.0, float(mpmath.tan(mpmath.pi / 8)) ** 2 * 1.01, 9))
    register(Fit("asin_d", _sinc_odd(mpmath.asin), 0.0, 0.25, 10))


_trig_fits()



def _tanh_fits() -> None:
    # tanh(x) = x + x^3 q(x^2) for |x| < 0.55, float32; relative to tanh
    def q(z: mpmath.mpf) -> mpmath.mpf:
        return (mpmath.tanh(mpmath.sqrt(z)) - mpmath.sqrt(z)) / z ** 1.5 if z > 0 else mpmath.mpf(-1) / 3

    register(Fit("tanh_small", q, 0.0, 0.3025, 5, f32=True,
                 denom=lambda z: mpmath.tanh(mpmath.sqrt(z)) / z if z > 0 else mpmath.mpf(1e300)))


_tanh_fits()



def _gamma_fits() -> None:
    # lgamma(u) = (u - 1)(u - 2) r(u) on [1, 2] (float64): relative accuracy at both zeros
    def r(u: mpmath.mpf) -> mpmath.mpf:
        return mpmath.loggamma(u) / ((u - 1) * (u - 2))

    register(Fit("lgamma_12", lambda t: r(t + 1.5), -0.5, 0.5, 15))


_gamma_fits()



def _bessel_fits() -> None:
    # |x| <= 8: entire functions of z = x^2 in w = z/32 - 1, absolute error
    def x_of(w: mpmath.mpf) -> mpmath.mpf:
        return mpmath.sqrt(32 * (w + 1))

    def j1_over_x(w: mpmath.mpf) -> mpmath.mpf:
        x = x_of(w)
        return mpmath.besselj(1, x) / x if x != 0 else mpmath.mpf(0.5)

    def y0_rest(w: mpmath.mpf) -> mpmath.mpf:
        x = x_of(w)
        return mpmath.bessely(0, x) - 2 / mpmath.pi * mpmath.log(x) * mpmath.besselj(0, x)

    def y1_rest(w: mpmath.mpf) -> mpmath.mpf:
        x = x_of(w)
        return (mpmath.bessely(1, x) - 2 / mpmath.pi * (mpmath.log(x) * mpmath.besselj(1, x) - 1 / x)) / x

    register(Fit("bessel_A0", lambda w: mpmath.besselj(0, x_of(w)), -1.0, 1.0, 24, absolute=True))
    register(Fit("bessel_A1", j1_over_x, -1.0, 1.0, 24, absolute=True))
    register(Fit("bessel_B0", y0_rest, -1.0, 1.0, 24, absolute=True))
    register(Fit("bessel_B1", y1_rest, -1.0, 1.0, 24, absolute=True))

    # |x| > 8, t = 64/x^2: the modulus sqrt(pi x/2 (J^2 + Y^2)) and x times the phase's departure
    # from x - (2n + 1) pi/4
    def modulus(n: int) -> Callable[[mpmath.mpf], mpmath.mpf]:
        def f(t: mpmath.mpf) -> mpmath.mpf:
            x = 8 / mpmath.sqrt(t)
            return mpmath.sqrt(mpmath.pi * x / 2 * (mpmath.besselj(n, x) ** 2 + mpmath.bessely(n, x) ** 2))

        return f

    def phase(n: int) -> Callable[[mpmath.mpf], mpmath.mpf]:
        def f(t: mpmath.mpf) -> mpmath.mpf:
            x = 8 / mpmath.sqrt(t)
            phi = mpmath.atan2(mpmath.bessely(n, x), mpmath.besselj(n, x)) - (x - (2 * n + 1) * mpmath.pi / 4)
            return x * (phi - 2 * mpmath.pi * mpmath.nint(phi / (2 * mpmath.pi)))

        return f

    for n in (0, 1):
        register(Fit(f"bessel_M{n}", modulus(n), 0.0, 1.0, 10))
        register(Fit(f"bessel_F{n}", phase(n), 0.0, 1.0, 10))


_bessel_fits()


if __name__ == "__main__":
    main(sys.argv[1:])
