"""Bessel functions of the first and second kind, orders 0 and 1 (j0, j1, y0, y1), for float32,
evaluated in float64.

|x| <= 8: J0 = A0(z), J1 = x A1(z), Y0 = (2/pi) ln(x) J0 + B0(z), Y1 = (2/pi)(ln(x) J1 - 1/x) +
x B1(z), with z = x^2 and A, B entire (fitted in w = z/32 - 1 on [-1, 1], absolute error ~2e-15;
their coefficients sum to at most 5, so Horner's rounding adds about as much). Near the zeros of
these functions that absolute error is what bounds the result, not a relative one.
|x| > 8: J_n = sqrt(2/(pi x)) M_n cos(theta), Y_n = ... sin(theta), theta = x - (2n + 1) pi/4 +
F_n / x, with the modulus M_n and the phase term F_n fitted in t = 64/x^2 on [0, 1] (relative
~4e-14). x's own multiple of pi/2 comes from the exact reduction of sin/cos (trig.py), so the phase
is right for every float32 and the result's error is relative there, zeros or not.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .core import INF, NAN, B, V, clamp, eq, ext, f64, fabs, horner, i32, lib_call, lt, narrow, sqrt, where
from .explog import log_d
from .trig import _COS_D, _SIN_D, reduce_half_pi

# scripts/fit_mathlib.py bessel_*: A0..B1 in w = x^2/32 - 1 (absolute), M and F in t = 64/x^2.
_A0 = (0.04582966485981312, 0.9303012472958547, -0.648469283087183, -0.8080888076695883, 1.0383794611438555,
       -0.507468045849889, 0.14598884856444821, -0.028472718576014012, 0.004058079020163827,
       -0.00044354615270247253, 3.847303369184521e-05, -2.716840018502286e-06, 1.6008018671521893e-07,
       -1.0201913851090458e-08, -6.93024443922605e-10, 3.748796880572809e-09, 1.2931572973914492e-09,
       -4.036670065098864e-09, -9.992832659330122e-10, 2.7263374634089397e-09, 4.341017393023785e-10,
       -1.0527926729075435e-09, -8.11506522243471e-11, 1.7737656091712292e-10)
_A1 = (-0.0581438279559897, 0.08105866038589968, 0.15151665143806906, -0.2595948652859832, 0.15858376432718457,
       -0.05474581821143352, 0.012456814392056672, -0.0020290395114998874, 0.00024949458589522823,
       -2.4045637980579157e-05, 1.868424835061707e-06, -1.2010910771389226e-07, 6.520369461609912e-09,
       8.143230348785521e-10, -1.593694241736211e-10, -1.8323511034147165e-09, 2.031032442934028e-10,
       1.9700026165732514e-09, -1.4679771583708331e-10, -1.3291614983870436e-09, 5.929091098840536e-11,
       5.111906872215054e-10, -1.0277345470143055e-11, -8.552848427171273e-11)
_B0 = (-0.3822506544594241, -0.8284358903604634, 1.6470964788745455, 0.14412632369301895, -1.0775477338216368,
       0.6721770783433577, -0.2189574709611008, 0.046367047679037855, -0.007025741062695651, 0.0008061586217064019,
       -7.27953942615696e-05, 5.321256948875082e-06, -3.2191272766072e-07, 1.6537817666174006e-08,
       -6.246177835142432e-10, -1.846023505372598e-10, -6.660557403202539e-11, 1.7677216041237836e-10,
       1.5159399167751977e-11, -7.394143714783092e-11, 8.833990353643864e-12, 7.008755707412534e-12,
       -4.473241764224312e-12, 3.0227148177579046e-12)
_B1 = (0.0707598588211805, -0.24337743079193128, 0.023367571720995104, 0.2350720920667084, -0.19639839859932995,
       0.07854786922211796, -0.01962875683282978, 0.0034224907439476056, -0.000443817344387691,
       4.467430260482118e-05, -3.6010020334764005e-06, 2.3816045372364345e-07, -1.3130022115700928e-08,
       3.332852439723341e-10, -9.678154561281136e-11, 4.716811951449135e-10, 1.1590403250356157e-10,
       -5.072058860392901e-10, -1.0539731797173666e-10, 3.421417285837915e-10, 5.122017799696953e-11,
       -1.312714192868451e-10, -1.0370423959940458e-11, 2.1853908646285866e-11)
_M0 = (0.9999999999999993, -0.0009765624998326772, 2.527236299570784e-05, -2.070704670201631e-06,
       3.4796776093920886e-07, -9.691638064800949e-08, 3.627304707803384e-08, -1.3818312042332715e-08,
       3.946185501171505e-09, -5.659783694372443e-10)
_F0 = (-0.12499999999999482, 0.0010172526031003467, -5.1164588985268137e-05, 6.248191570576513e-06,
       -1.3953448373188138e-06, 4.820200292750586e-07, -2.1200114128265746e-07, 9.114492274242476e-08,
       -2.8673628778139036e-08, 4.4715619287363235e-09)
_M1 = (0.9999999999999999, 0.0029296874996924344, -4.720686908506909e-05, 3.0718475480647435e-06,
       -4.6055084943335147e-07, 1.2054851939366892e-07, -4.358944538776413e-08, 1.634136121725787e-08,
       -4.650070282665896e-09, 6.699137245991362e-10)
_F1 = (0.3749999999999948, -0.002563476561276307, 9.05513326470512e-05, -9.03792340558127e-06,
       1.8208875866883202e-06, -5.946655360013123e-07, 2.5361549750424865e-07, -1.0731559158289058e-07,
       3.348779431879123e-08, -5.199409407820809e-09)
_TWO_OVER_PI = 2 / math.pi
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _w(b: B, a: V) -> V:
    """x^2/32 - 1 for float64 |x| (clamped to 8: the small-argument side of the select)."""
    t = clamp(b, a, 0.0, 8.0)
    return b.fsub(b.fmul(b.fmul(t, t), f64(1 / 32)), f64(1.0))


def _large(b: B, x: V, a: V, order: int) -> tuple[V, V]:
    """(J_n, Y_n) of |x| > 8 (float32 x, float64 a = |x|)."""
    t = b.fdiv(f64(64.0), b.fmul(a, a))
    amp = b.fmul(b.fdiv(f64(_SQRT_2_OVER_PI), sqrt(b, a)), horner(b, t, _M1 if order else _M0))
    phi = b.fdiv(horner(b, t, _F1 if order else _F0), a)
    q, r = reduce_half_pi(b, x)
    s = b.fadd(r, phi)
    z = b.fmul(s, s)
    sn, cs = b.fmul(s, horner(b, z, _SIN_D)), horner(b, z, _COS_D)
    half = f64(math.sqrt(0.5))
    cu, su = b.fmul(b.fadd(cs, sn), half), b.fmul(b.fsub(sn, cs), half)  # of u = s - pi/4
    quad = b.and_(b.sub(q, i32(order)), i32(3))  # theta = quad pi/2 + u
    odd = b.trunc(quad, ir.IntType(1))
    flip_c = b.icmp_unsigned("==", b.and_(b.add(quad, i32(1)), i32(2)), i32(2))  # quad 1, 2: cos < 0
    flip_s = b.icmp_unsigned(">=", quad, i32(2))
    c = b.select(odd, su, cu)
    c = b.select(flip_c, b.fneg(c), c)
    sv = b.select(odd, cu, su)
    sv = b.select(flip_s, b.fneg(sv), sv)
    return b.fmul(amp, c), b.fmul(amp, sv)


def _bessel(b: B, x: V, order: int, second: bool) -> V:
    a = ext(b, fabs(b, x))
    w = _w(b, a)
    at = clamp(b, a, 0.0, 8.0)
    j = horner(b, w, _A0) if order == 0 else b.fmul(at, horner(b, w, _A1))
    if second:
        ln = log_d(b, where(b, lt(b, f64(0.0), at), at, 1.0))
        if order == 0:
            small = b.fadd(b.fmul(b.fmul(f64(_TWO_OVER_PI), ln), j), horner(b, w, _B0))
        else:
            small = b.fadd(b.fmul(f64(_TWO_OVER_PI), b.fsub(b.fmul(ln, j), b.fdiv(f64(1.0), at))),
                           b.fmul(at, horner(b, w, _B1)))
    else:
        small = j
    jl, yl = _large(b, x, a, order)
    r = where(b, b.fcmp_ordered("<=", a, f64(8.0)), small, yl if second else jl)
    r = where(b, eq(b, a, INF), 0.0, r)
    out = narrow(b, r)
    if second:
        out = where(b, eq(b, x, 0.0), -INF, out)
        return where(b, b.fcmp_unordered("<", x, ir.Constant(x.type, 0.0)), NAN, out)
    if order == 1:  # J1 is odd
        out = b.select(b.icmp_signed("<", b.bitcast(x, ir.IntType(32)), i32(0)), b.fneg(out), out)
    return where(b, b.fcmp_unordered("uno", x, x), x, out)


def j0_f32(b: B, x: V) -> V:
    return lib_call(b, "anvil.j0.f32", [x], lambda fb, x: _bessel(fb, x, 0, False))


def j1_f32(b: B, x: V) -> V:
    return lib_call(b, "anvil.j1.f32", [x], lambda fb, x: _bessel(fb, x, 1, False))


def y0_f32(b: B, x: V) -> V:
    return lib_call(b, "anvil.y0.f32", [x], lambda fb, x: _bessel(fb, x, 0, True))


def y1_f32(b: B, x: V) -> V:
    return lib_call(b, "anvil.y1.f32", [x], lambda fb, x: _bessel(fb, x, 1, True))
