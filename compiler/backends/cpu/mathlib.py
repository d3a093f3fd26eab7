"""Vectorizable float32 exp/exp2/log/log2 in LLVM IR (range reduction + minimax polynomials).

libm calls stop LLVM from vectorizing loops; these stay within ~2 ulp (GPUs' ex2.approx and
lg2.approx are approximate too) and handle NaN, infinities, zero and subnormals.
"""

from __future__ import annotations

from llvmlite import ir

__all__ = ["exp_f32", "exp2_f32", "log_f32", "log2_f32", "erfinv"]

F32, I32 = ir.FloatType(), ir.IntType(32)
LOG2E = 1.4426950408889634
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4


def _f(v: float) -> ir.Constant:
    return ir.Constant(F32, v)


def _call(b: ir.IRBuilder, name: str, args: list[ir.Value], ret: ir.Type = F32) -> ir.Value:
    fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def _clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    # Ordered compares keep NaN as NaN (minnum/maxnum would replace it).
    x = b.select(b.fcmp_ordered(">", x, _f(hi)), _f(hi), x)
    return b.select(b.fcmp_ordered("<", x, _f(lo)), _f(lo), x)


def _pow2i(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    """2^n for n in [-126, 127] as a float built from bits."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x y + z, fused where the host has FMA (llvm.fmuladd: a multiply and an add elsewhere,
    never a library call)."""
    return _call(b, "llvm.fmuladd.f32", [x, y, z])


def _exp_poly(b: ir.IRBuilder, r: ir.Value) -> ir.Value:
    p = _f(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = _fma(b, p, r, _f(c))
    return b.fadd(_fma(b, p, b.fmul(r, r), r), _f(1.0))


def _to_int(b: ir.IRBuilder, nf: ir.Value) -> ir.Value:
    """The integer nf (|nf| <= 151 after the callers' clamps; NaN as 0, the polynomial keeps the
    NaN): a plain conversion, where the saturating one cost x86 three times the whole exp."""
    return b.fptosi(b.select(b.fcmp_unordered("uno", nf, nf), _f(0.0), nf), I32)


def _scale(b: ir.IRBuilder, p: ir.Value, n: ir.Value) -> ir.Value:
    n1 = b.ashr(n, ir.Constant(I32, 1))
    n2 = b.sub(n, n1)
    return b.fmul(b.fmul(p, _pow2i(b, n1)), _pow2i(b, n2))


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    x = _clamp(b, x, -104.0, 89.0)
    nf = _call(b, "llvm.rint.f32", [b.fmul(x, _f(LOG2E))])
    r = b.fsub(b.fsub(x, b.fmul(nf, _f(LN2_HI))), b.fmul(nf, _f(LN2_LO)))
    n = _to_int(b, nf)
    return _scale(b, _exp_poly(b, r), n)


def exp2_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    x = _clamp(b, x, -150.0, 129.0)
    nf = _call(b, "llvm.rint.f32", [x])
    r = b.fmul(b.fsub(x, nf), _f(0.6931471805599453))
    n = _to_int(b, nf)
    return _scale(b, _exp_poly(b, r), n)


def log_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    bits = b.bitcast(x, I32)
    sub = b.fcmp_ordered("<", x, _f(1.1754943508222875e-38))
    xs = b.select(sub, b.fmul(x, _f(8388608.0)), x)
    bits = b.bitcast(xs, I32)
    e = b.sub(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 126))
    e = b.select(sub, b.sub(e, ir.Constant(I32, 23)), e)
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, 0x007FFFFF)), ir.Constant(I32, 0x3F000000)), F32)
    small = b.fcmp_ordered("<", m, _f(0.707106781186547524))
    e = b.select(small, b.sub(e, ir.Constant(I32, 1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), _f(1.0)), b.fsub(m, _f(1.0)))
    ef = b.sitofp(e, F32)
    z = b.fmul(m, m)
    p = _f(7.0376836292e-2)
    for c in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
              2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
        p = b.fadd(b.fmul(p, m), _f(c))
    y = b.fmul(b.fmul(p, m), z)
    y = b.fadd(y, b.fmul(ef, _f(LN2_LO)))
    y = b.fsub(y, b.fmul(z, _f(0.5)))
    r = b.fadd(b.fadd(m, y), b.fmul(ef, _f(LN2_HI)))
    # Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, log(NaN) = NaN.
    r = b.select(b.fcmp_ordered("==", x, _f(0.0)), _f(float("-inf")), r)
    r = b.select(b.fcmp_ordered("==", x, _f(float("inf"))), _f(float("inf")), r)
    r = b.select(b.fcmp_unordered("<", x, _f(0.0)), _f(float("nan")), r)
    return r


def log2_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fmul(log_f32(b, x), _f(LOG2E))


def erfinv(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Inverse error function (Giles' single-precision approximation), any float type via f32."""
    ty = x.type
    if not isinstance(ty, ir.FloatType):
        x = b.fpext(x, F32) if isinstance(ty, ir.HalfType) else b.fptrunc(x, F32)
    w = b.fneg(log_f32(b, b.fmul(b.fsub(_f(1.0), x), b.fadd(_f(1.0), x))))
    lt = b.fcmp_ordered("<", w, _f(5.0))
    w1 = b.fsub(w, _f(2.5))
    p1 = _f(2.81022636e-08)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p1 = b.fadd(b.fmul(p1, w1), _f(c))
    w2 = b.fsub(_call(b, "llvm.sqrt.f32", [w]), _f(3.0))
    p2 = _f(-0.000200214257)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p2 = b.fadd(b.fmul(p2, w2), _f(c))
    r = b.fmul(b.select(lt, p1, p2), x)
    if not isinstance(ty, ir.FloatType):
        r = b.fptrunc(r, ty) if isinstance(ty, ir.HalfType) else b.fpext(r, ty)
    return r
