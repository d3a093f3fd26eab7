"""FP8 formats on the CPU: values travel as their 8 bits; conversions are branch-free IR.

Decoding is a 256-entry table per format. Encoding rounds to nearest even and saturates to
the largest finite value (PTX `cvt.rn.satfinite` semantics); NaN stays NaN.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import cache

from llvmlite import ir

from ...ir import types as T

__all__ = ["fp8_to_f32", "f32_to_fp8", "fp8_bits", "fp8_value", "FORMATS"]

I8, I32, F32 = ir.IntType(8), ir.IntType(32), ir.FloatType()


@dataclass(frozen=True)
class Fp8Format:
    man: int
    bias: int
    max_code: int
    nan_code: int
    fnuz: bool
    has_inf: bool

    @property
    def emin(self) -> int:
        return 1 - self.bias


FORMATS = {
    "fp8e4nv": Fp8Format(3, 7, 0x7E, 0x7F, False, False),
    "fp8e5": Fp8Format(2, 15, 0x7B, 0x7F, False, True),
    "fp8e4b8": Fp8Format(3, 8, 0x7F, 0x80, True, False),
    "fp8e5b16": Fp8Format(2, 16, 0x7F, 0x80, True, False),
}


def fp8_value(code: int, t: T.ScalarType) -> float:
    """The real value of an fp8 code."""
    f = FORMATS[t.name]
    if f.fnuz and code == 0x80:
        return float("nan")
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> f.man) & ((1 << (7 - f.man)) - 1)
    m = code & ((1 << f.man) - 1)
    if not f.fnuz:
        if f.has_inf and e == (1 << (7 - f.man)) - 1:
            return sign * float("inf") if m == 0 else float("nan")
        if not f.has_inf and (code & 0x7F) == 0x7F:
            return float("nan")
    if e == 0:
        return sign * m * 2.0 ** (f.emin - f.man)
    return sign * (1 + m / (1 << f.man)) * 2.0 ** (e - f.bias)


def fp8_bits(v: float, t: T.ScalarType) -> int:
    """Round-to-nearest-even, saturating encoding of `v` (the same algorithm as the IR)."""
    f = FORMATS[t.name]
    if math.isnan(v):
        return f.nan_code
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = min(abs(v), 3.0e38)
    bits = struct.unpack("<I", struct.pack("<f", a))[0] if a < 3.4e38 else 0x7F7FFFFF
    e = max(((bits >> 23) & 0xFF) - 127, f.emin)
    q = round(a * 2.0 ** (f.man - e))
    code = min(((e + f.bias) << f.man) + q - (1 << f.man), f.max_code)
    if f.fnuz and code == 0:
        return 0
    return code | sign


@cache
def _table_values(name: str) -> tuple[float, ...]:
    return tuple(fp8_value(c, T.SCALARS[name]) for c in range(256))


def _table(b: ir.IRBuilder, t: T.ScalarType) -> ir.GlobalVariable:
    m = b.module
    gname = f"__anvil_{t.name}_table"
    g = m.globals.get(gname)
    if g is None:
        aty = ir.ArrayType(F32, 256)
        g = ir.GlobalVariable(m, aty, gname)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(aty, list(_table_values(t.name)))
    return g


def fp8_to_f32(b: ir.IRBuilder, t: T.ScalarType, x: ir.Value) -> ir.Value:
    g = _table(b, t)
    idx = b.zext(x, ir.IntType(64))
    p = b.gep(g, [ir.Constant(ir.IntType(64), 0), idx], inbounds=True, source_etype=g.value_type)
    return b.load(p, typ=F32)


def f32_to_fp8(b: ir.IRBuilder, t: T.ScalarType, x: ir.Value, rounding: str = "rtne") -> ir.Value:
    f = FORMATS[t.name]
    bits = b.bitcast(x, I32)
    sign = b.trunc(b.lshr(bits, ir.Constant(I32, 24)), I8)
    sign = b.and_(sign, ir.Constant(I8, 0x80))
    absbits = b.and_(bits, ir.Constant(I32, 0x7FFFFFFF))
    a = b.bitcast(absbits, F32)
    isnan = b.fcmp_unordered("uno", x, x)
    e = b.sub(b.lshr(absbits, ir.Constant(I32, 23)), ir.Constant(I32, 127))
    e = b.select(b.icmp_signed("<", e, ir.Constant(I32, f.emin)), ir.Constant(I32, f.emin), e)
    e = b.select(b.icmp_signed(">", e, ir.Constant(I32, 127)), ir.Constant(I32, 127), e)
    # scale = 2^(man - e), built from its exponent bits (man - e lies within the normal range).
    sc_bits = b.shl(b.add(b.sub(ir.Constant(I32, f.man + 127), e), ir.Constant(I32, 0)), ir.Constant(I32, 23))
    scaled = b.fmul(a, b.bitcast(sc_bits, F32))
    fn = "llvm.rint.f32" if rounding == "rtne" else "llvm.trunc.f32"
    rint = b.module.globals.get(fn) or ir.Function(b.module, ir.FunctionType(F32, [F32]), fn)
    qf = b.call(rint, [scaled])
    sat = b.module.globals.get("llvm.fptosi.sat.i32.f32") or ir.Function(
        b.module, ir.FunctionType(I32, [F32]), "llvm.fptosi.sat.i32.f32")
    q = b.call(sat, [qf])
    code = b.add(b.shl(b.add(e, ir.Constant(I32, f.bias)), ir.Constant(I32, f.man)), q)
    code = b.sub(code, ir.Constant(I32, 1 << f.man))
    code = b.select(b.icmp_signed(">", code, ir.Constant(I32, f.max_code)), ir.Constant(I32, f.max_code), code)
    c8 = b.trunc(code, I8)
    if f.fnuz:
        signed = b.select(b.icmp_unsigned("==", c8, ir.Constant(I8, 0)), c8, b.or_(c8, sign))
    else:
        signed = b.or_(c8, sign)
    return b.select(isnan, ir.Constant(I8, f.nan_code), signed)
