"""bfloat16 on the CPU: llvmlite has no bfloat type, so bf16 values travel as their 16 bits
(like fp8) and every operation on them runs in fp32 and rounds back to nearest even.

Rounding an fp32 result of one + - * / sqrt of bf16 operands to bf16 equals rounding the
exact result (fp32's 24 bits are more than the 2 * 8 + 2 that make double rounding harmless).
Conversions from fp64 (and from integers, through fp64) round to odd in fp32 first, so they
too round once.
"""

from __future__ import annotations

import math
import struct

from llvmlite import ir

__all__ = ["bf16_bits", "to_f32", "from_f32", "from_f64", "f64_to_f32_odd"]

I1, I16, I32, F32, F64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.FloatType(), ir.DoubleType()


def bf16_bits(v: float) -> int:
    """The bits of `v` rounded to nearest even bf16 (for constants)."""
    if v != v:
        return 0x7FC0
    sign = 0x8000 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a == math.inf or a == 0.0:
        return sign | (0x7F80 if a else 0)
    exp = math.frexp(a)[1] - 1
    quantum = 2.0 ** (max(exp, -126) - 7)
    r = round(a / quantum) * quantum  # round() ties to even
    if r >= 2.0**128:
        return sign | 0x7F80
    return sign | (struct.unpack("<I", struct.pack("<f", r))[0] >> 16)


def to_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Exact: bf16 is the top half of an fp32."""
    return b.bitcast(b.shl(b.zext(x, I32), ir.Constant(I32, 16)), F32)


def from_f32(b: ir.IRBuilder, f: ir.Value, rounding: str | None = None) -> ir.Value:
    """Round an fp32 to bf16 bits: to nearest even, or toward zero for rounding="rtz"; NaN stays NaN."""
    u = b.bitcast(f, I32)
    hi = b.lshr(u, ir.Constant(I32, 16))
    if rounding == "rtz":
        r = hi
    else:
        lsb = b.and_(hi, ir.Constant(I32, 1))
        r = b.lshr(b.add(u, b.add(ir.Constant(I32, 0x7FFF), lsb)), ir.Constant(I32, 16))
    nan = b.fcmp_unordered("uno", f, f)
    r = b.select(nan, b.or_(hi, ir.Constant(I32, 0x40)), r)
    return b.trunc(r, I16)


def f64_to_f32_odd(b: ir.IRBuilder, d: ir.Value, rounding: str | None = None) -> ir.Value:
    """fp64 -> fp32 rounded to odd (toward zero, last bit set when inexact), so that rounding the
    result again to a type of at most 22 bits rounds the fp64 value once; toward zero for "rtz".
    Also how fp64 -> fp16 avoids __truncdfhf2, a libcall the JIT does not link."""
    t = b.fptrunc(d, F32)
    back = b.fpext(t, F64)
    inexact = b.fcmp_ordered("!=", back, d)
    neg = b.fcmp_ordered("<", d, ir.Constant(F64, 0.0))
    away = b.select(neg, b.fcmp_ordered("<", back, d), b.fcmp_ordered(">", back, d))
    u = b.sub(b.bitcast(t, I32), b.zext(b.and_(inexact, away), I32))  # now truncated toward zero
    if rounding != "rtz":
        u = b.or_(u, b.zext(inexact, I32))
    return b.bitcast(u, F32)


def from_f64(b: ir.IRBuilder, d: ir.Value, rounding: str | None = None) -> ir.Value:
    """Round an fp64 to bf16 bits once (through fp32 rounded to odd)."""
    return from_f32(b, f64_to_f32_odd(b, d, rounding), rounding)
