"""cbrt, hypot, fmod, remainder (float32, evaluated in float64) and the exact bit-level
functions nextafter, fdim, ilogb (float32 and float64)."""

from __future__ import annotations

from llvmlite import ir

from .core import (
    F32,
    I32,
    I64,
    INF,
    NAN,
    B,
    V,
    c,
    copysign,
    eq,
    ext,
    f32,
    f64,
    fabs,
    gt,
    i32,
    i64,
    isnan,
    lib_call,
    lt,
    narrow,
    pow2_f64,
    sqrt,
    trunc,
    where,
)


def cbrt_f32(b: B, x: V) -> V:
    """A first guess from the float32's bits (exponent / 3: within 10%), then two Halley steps in
    float64 (cubic: 1e-1 -> 1e-3 -> 1e-9 relative), then one rounding."""

    def body(fb: B, x: V) -> V:
        a = fabs(fb, x)
        sub = lt(fb, a, 1.1754943508222875e-38)
        scaled = where(fb, sub, fb.fmul(a, f32(16777216.0)), a)  # 2^24: cbrt scales by 2^8
        guess = fb.bitcast(fb.add(fb.udiv(fb.bitcast(scaled, I32), i32(3)), i32(0x2A555555)), F32)
        y = ext(fb, fb.fmul(guess, where(fb, sub, f32(2.0**-8), 1.0)))
        ad = ext(fb, a)
        for _ in range(2):
            y3 = fb.fmul(fb.fmul(y, y), y)
            y = fb.fmul(y, fb.fdiv(fb.fadd(y3, fb.fadd(ad, ad)), fb.fadd(fb.fadd(y3, y3), ad)))
        r = narrow(fb, y)
        r = where(fb, fb.or_(eq(fb, a, 0.0), fb.or_(eq(fb, a, INF), isnan(fb, a))), a, r)
        return copysign(fb, r, x)

    return lib_call(b, "anvil.cbrt.f32", [x], body)


def hypot_f32(b: B, x: V, y: V) -> V:
    """sqrt(x^2 + y^2) in float64: the squares are exact and cannot overflow; hypot(inf, NaN) = inf."""

    def body(fb: B, x: V, y: V) -> V:
        xd, yd = ext(fb, x), ext(fb, y)
        r = narrow(fb, sqrt(fb, fb.fadd(fb.fmul(xd, xd), fb.fmul(yd, yd))))
        return where(fb, fb.or_(eq(fb, fabs(fb, x), INF), eq(fb, fabs(fb, y), INF)), INF, r)

    return lib_call(b, "anvil.hypot.f32", [x, y], body)


def ldexp_f32(b: B, x: V, n: V) -> V:
    """x 2^n: exact in float64 for n clamped to [-400, 400] (beyond, float32 overflows or
    underflows anyway), then one rounding (subnormal results rounded once)."""

    def body(fb: B, x: V, n: V) -> V:
        lo, hi = i32(-400), i32(400)
        n = fb.select(fb.icmp_signed("<", n, lo), lo, fb.select(fb.icmp_signed(">", n, hi), hi, n))
        return narrow(fb, fb.fmul(ext(fb, x), pow2_f64(fb, fb.sext(n, I64))))

    return lib_call(b, "anvil.ldexp.f32", [x, n], body)


def _exponent_d(b: B, v: V) -> V:
    """The unbiased exponent of a positive normal float64, as i64."""
    return b.sub(b.lshr(b.bitcast(v, I64), i64(52)), i64(1023))


# float32 exponents span 2^-149 .. 2^128: a quotient of up to 2^277, removed 28 bits a step.
_FMOD_STEPS = 11


def _fmod_abs(b: B, ax: V, ay: V) -> V:
    """fmod(ax, ay) for float64 ax >= 0, ay > 0 finite, both float32 values (or 2 of one): exact.

    Step i removes a quotient q < 2^29 of Y = ay 2^s, s = max(E - 28 (i + 1), 0) with 2^E <= ax/ay:
    q Y is exact (24 + 29 bits), r - q Y has at most 25 significant bits (r is a multiple of Y's
    last bit), so every step is exact; q comes from r (1/ay), off by at most one, which one compare
    each way fixes. Each step leaves r < Y, so the next quotient is below 2^28."""
    inv = b.fdiv(f64(1.0), ay)
    t = b.fmul(ax, inv)
    e = _exponent_d(b, where(b, gt(b, t, f64(1.0)), t, 1.0))
    r = ax
    for i in range(_FMOD_STEPS):
        s = b.sub(e, i64(28 * (i + 1)))
        s = b.select(b.icmp_signed(">", s, i64(0)), s, i64(0))
        yy = b.fmul(ay, pow2_f64(b, s))
        q = trunc(b, b.fmul(b.fmul(r, inv), pow2_f64(b, b.neg(s))))
        r = b.fsub(r, b.fmul(q, yy))
        r = where(b, lt(b, r, 0.0), b.fadd(r, yy), r)
        r = where(b, b.fcmp_ordered(">=", r, yy), b.fsub(r, yy), r)
    return r


def _fmod_specials(b: B, x: V, y: V, r: V) -> V:
    """C's special cases of fmod and remainder: y = 0, x = inf or NaN -> NaN; y = inf -> x."""
    r = where(b, eq(b, fabs(b, y), INF), x, r)
    bad = b.or_(b.or_(eq(b, y, 0.0), eq(b, fabs(b, x), INF)), b.or_(isnan(b, x), isnan(b, y)))
    return where(b, bad, NAN, r)


def _finite_pair(b: B, x: V, y: V) -> tuple[V, V]:
    ax, ay = ext(b, fabs(b, x)), ext(b, fabs(b, y))
    ok = b.and_(lt(b, ax, INF), b.and_(lt(b, ay, INF), gt(b, ay, 0.0)))
    return where(b, ok, ax, 0.0), where(b, ok, ay, 1.0)


def fmod_f32(b: B, x: V, y: V) -> V:
    def body(fb: B, x: V, y: V) -> V:
        ax, ay = _finite_pair(fb, x, y)
        r = copysign(fb, narrow(fb, _fmod_abs(fb, ax, ay)), x)
        return _fmod_specials(fb, x, y, r)

    return lib_call(b, "anvil.fmod.f32", [x, y], body)


def remainder_f32(b: B, x: V, y: V) -> V:
    """x - n y with n = x/y rounded to nearest, ties to even: r = fmod(|x|, 2|y|) gives the
    quotient's parity (r >= |y|), then r is moved to the nearest multiple."""

    def body(fb: B, x: V, y: V) -> V:
        ax, ay = _finite_pair(fb, x, y)
        r = _fmod_abs(fb, ax, fb.fadd(ay, ay))
        odd = fb.fcmp_ordered(">=", r, ay)
        r = where(fb, odd, fb.fsub(r, ay), r)
        half = fb.fmul(ay, f64(0.5))
        up = fb.or_(gt(fb, r, half), fb.and_(eq(fb, r, half), odd))
        r = where(fb, up, fb.fsub(r, ay), r)
        return _fmod_specials(fb, x, y, _signed(fb, narrow(fb, r), x))

    return lib_call(b, "anvil.remainder.f32", [x, y], body)


def _signed(b: B, r: V, x: V) -> V:
    """r for x >= 0, -r for x < 0 (remainder(-x, y) = -remainder(x, y); a zero keeps x's sign)."""
    neg = b.icmp_signed("<", b.bitcast(x, I32), i32(0))
    r = b.select(neg, b.fneg(r), r)
    return where(b, eq(b, r, 0.0), copysign(b, f32(0.0), x), r)


def _int_of(ty: ir.Type) -> ir.IntType:
    return I64 if isinstance(ty, ir.DoubleType) else ir.IntType(16) if isinstance(ty, ir.HalfType) else I32


def nextafter(b: B, x: V, y: V) -> V:
    """The float next to x toward y: one step of x's bit pattern (exact, float16/32/64)."""
    ty, it = x.type, _int_of(x.type)
    bits = b.bitcast(x, it)
    away = b.xor(gt(b, y, x), lt(b, x, 0.0))  # moving away from zero: the magnitude's bits grow
    stepped = b.bitcast(b.select(away, b.add(bits, c(it, 1)), b.sub(bits, c(it, 1))), ty)
    tiny = b.bitcast(c(it, 1), ty)
    r = where(b, eq(b, x, 0.0), copysign(b, tiny, y), stepped)
    r = where(b, eq(b, x, y), y, r)
    return where(b, b.or_(isnan(b, x), isnan(b, y)), c(ty, NAN), r)


def fdim(b: B, x: V, y: V) -> V:
    """x - y where x > y, else +0; NaN if either is NaN."""
    r = where(b, gt(b, x, y), b.fsub(x, y), c(x.type, 0.0))
    return where(b, b.or_(isnan(b, x), isnan(b, y)), c(x.type, NAN), r)


def ilogb(b: B, x: V) -> V:
    """The unbiased exponent of x as i32 (subnormals normalized); glibc's values for 0 and NaN
    (INT_MIN) and infinities (INT_MAX)."""
    ty = x.type
    wide = isinstance(ty, ir.DoubleType)
    it = _int_of(ty)
    mbits, bias = (52, 1023) if wide else (23, 127)
    a = fabs(b, x)
    sub = lt(b, a, 2.2250738585072014e-308 if wide else 1.1754943508222875e-38)
    scaled = where(b, sub, b.fmul(a, c(ty, 2.0**64)), a)
    e = b.sub(b.lshr(b.bitcast(scaled, it), c(it, mbits)), c(it, bias))
    e = b.select(sub, b.sub(e, c(it, 64)), e)
    e32 = b.trunc(e, I32) if wide else e
    e32 = b.select(b.or_(eq(b, a, 0.0), isnan(b, a)), i32(-(1 << 31)), e32)
    return b.select(eq(b, a, INF), i32((1 << 31) - 1), e32)

