"""The error function family: erf (float32 arithmetic), erfc (float64 arithmetic), erfinv."""

from __future__ import annotations

from llvmlite import ir

from .core import (
    F32,
    F64,
    INF,
    NAN,
    B,
    V,
    call,
    clamp,
    copysign,
    eq,
    ext,
    f32,
    f64,
    fabs,
    fma,
    horner,
    lib_call,
    lt,
    narrow,
    sqrt,
    where,
)
from .explog import exp_d, exp_f32, log_f32

# scripts/fit_mathlib.py erf_small: erf(a) = a C_HI + a p(a^2) on [0, 1], relative error 1.3e-9.
# C_HI is 2/sqrt(pi) rounded to float32 and p(0) the rest of it, so erf of a tiny a is a 2/sqrt(pi)
# rounded once (a single float32 constant would be off by 0.9 ulp there).
_C_HI = 1.128379225730896
_ERF_SMALL = (-6.00042042719906e-08, -0.3761262595653534, 0.11283586919307709, -0.026853887364268303,
              0.005188468843698502, -0.0008011404424905777, 7.857759192120284e-05)
# erf_tail: erfcx(a) = e^(a^2) erfc(a) on [1, 4] in u = a - 2.5; e^-a^2 times its error, the error
# of erfc, is below 2.5e-9 absolute (0.04 ulp of erf there).
_ERF_TAIL = (0.21080760657787323, -0.07434218376874924, 0.02491462230682373, -0.0081322705373168,
             0.0023024866823107004, -0.000661112368106842, 0.0005433406913653016, 0.00022507445828523487,
             0.00010684542212402448)
# erf_d: erf(a) / a in a^2 on [0, 1] (float64), relative error 5e-15.
_ERF_D = (1.1283791670955097, -0.3761263890317323, 0.11283791670469853, -0.02686617056456911,
          0.005223976974043098, -0.0008548297150470486, 0.00012054490373124802, -1.4910447002533735e-05,
          1.6285141228252953e-06, -1.5066465302364155e-07, 9.18061409359065e-09)
# erfcx_d: erfcx(a) on [1, 10.06] in t = (a - 2) / (a + 2) (float64), relative error 4.3e-12.
_ERFCX_D = (0.2553956763095215, -0.4271858474004394, 0.24165819451463758, -0.07897858280858193,
            0.003732881417449202, 0.006997528088612703, -0.0008470253305275631, -0.000982929148151065,
            4.367247843609921e-05, 0.00017965453952325494, 2.165623047465166e-05, -3.5133835363765985e-05)


def erf_f32(b: B, x: V) -> V:
    """|x| < 1: the odd polynomial. 1 <= |x|: 1 - e^-x^2 erfcx(|x|), where x^2 = hi + lo exactly
    (with FMA; else lo = 0 and the error grows by < 0.2 ulp) and e^-x^2 = e^-hi (1 - lo); erfc <=
    0.16 there, so the ~2 ulp of exp cost < 0.4 ulp of erf. |x| is clamped to 4, where erfc < 2^-26
    and erf rounds to 1."""

    def body(fb: B, x: V) -> V:
        a = fabs(fb, x)
        small = fma(fb, a, f32(_C_HI), fb.fmul(a, horner(fb, fb.fmul(a, a), _ERF_SMALL)))
        t = clamp(fb, a, 1.0, 4.0)
        hi = fb.fmul(t, t)
        lo = fma(fb, t, t, fb.fneg(hi))
        e = fb.fmul(exp_f32(fb, fb.fneg(hi)), fb.fsub(f32(1.0), lo))
        big = fb.fsub(f32(1.0), fb.fmul(e, horner(fb, fb.fsub(t, f32(2.5)), _ERF_TAIL)))
        return copysign(fb, where(fb, lt(fb, a, 1.0), small, big), x)

    return lib_call(b, "anvil.erf.f32", [x], body)


def erfc_d(b: B, a: V) -> V:
    """erfc(a) for float64 a >= 0 (clamped to 10.06, where float32 erfc underflows to 0),
    relative error < 1e-11: 1 - erf(a) below 1 (erfc > 0.15: no cancellation to speak of);
    e^-a^2 erfcx(a) above, with a^2 exact (a is a float32)."""
    t = clamp(b, a, 1.0, 10.06)
    z = b.fdiv(b.fsub(t, f64(2.0)), b.fadd(t, f64(2.0)))
    tail = b.fmul(exp_d(b, b.fneg(b.fmul(t, t))), horner(b, z, _ERFCX_D))
    head = b.fsub(f64(1.0), b.fmul(a, horner(b, b.fmul(a, a), _ERF_D)))
    return where(b, lt(b, a, 1.0), head, tail)


def erfc_f32(b: B, x: V) -> V:
    """erfc(x) = 2 - erfc(-x) for x < 0 (>= 1: no cancellation)."""

    def body(fb: B, x: V) -> V:
        r = erfc_d(fb, ext(fb, fabs(fb, x)))
        r = where(fb, lt(fb, x, 0.0), fb.fsub(f64(2.0), r), r)
        return narrow(fb, r)

    return lib_call(b, "anvil.erfc.f32", [x], body)


def erfinv(b: B, x: V) -> V:
    """Inverse error function: Giles' single-precision approximation for float32 and float16;
    float64 refines it by three Newton steps on libm's erf (scalar calls: float64 keeps libm)."""
    if isinstance(x.type, ir.DoubleType):
        return _erfinv_f64(b, x)
    return _erfinv_f32(b, x)


def _erfinv_f64(b: B, y: V) -> V:
    """Newton on erf(x) = y from the float32 estimate clamped to |x| <= 5.9 (past erfinv(1 - 2^-53)):
    erf is concave there, so the steps approach the root from below after the first."""
    est = b.fpext(_erfinv_f32(b, b.fptrunc(y, F32)), F64)
    x = clamp(b, est, -5.9, 5.9)
    for _ in range(3):
        err = b.fsub(call(b, "erf", [x]), y)
        x = b.fsub(x, b.fmul(b.fmul(err, f64(0.886226925452758)), call(b, "exp", [b.fmul(x, x)])))
    a = fabs(b, y)
    x = where(b, eq(b, a, 1.0), copysign(b, f64(INF), y), x)
    return where(b, b.fcmp_unordered(">", a, f64(1.0)), f64(NAN), x)


def _erfinv_f32(b: B, x: V) -> V:
    ty = x.type
    if not isinstance(ty, ir.FloatType):
        x = b.fpext(x, F32) if isinstance(ty, ir.HalfType) else b.fptrunc(x, F32)
    w = b.fneg(log_f32(b, b.fmul(b.fsub(f32(1.0), x), b.fadd(f32(1.0), x))))
    lt5 = lt(b, w, 5.0)
    w1 = b.fsub(w, f32(2.5))
    p1 = horner(b, w1, (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087, -4.39150654e-06,
                        -3.5233877e-06, 3.43273939e-07, 2.81022636e-08))
    w2 = b.fsub(sqrt(b, w), f32(3.0))
    p2 = horner(b, w2, (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844,
                        0.00134934322, 0.000100950558, -0.000200214257))
    r = b.fmul(b.select(lt5, p1, p2), x)
    a = fabs(b, x)
    r = where(b, eq(b, a, 1.0), copysign(b, f32(INF), x), r)
    r = where(b, b.fcmp_unordered(">", a, f32(1.0)), f32(NAN), r)
    if not isinstance(ty, ir.FloatType):
        r = b.fptrunc(r, ty) if isinstance(ty, ir.HalfType) else b.fpext(r, ty)
    return r

