"""Scalar semantics of Tile IR ops in LLVM IR: one small function per op, in tables.

Every elementwise op of a tile is lowered by applying these to one element at a time; the
loop nests around them are the lowering's business (lower.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any, TypeAlias

from llvmlite import ir

from ...ir import types as T
from . import bf16, mathlib
from .fp8 import f32_to_fp8, fp8_bits, fp8_to_f32
from .mathlib import erfinv, fmod_f32, ilogb, ldexp_f32

__all__ = ["llvm_type", "BINARY", "CMP", "emit_math", "emit_cast", "emit_bitcast", "const", "I1", "I8",
           "I32", "I64", "PTR", "F32"]

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
BF16 = ir.BFloatType() if hasattr(ir, "BFloatType") else None
PTR = ir.PointerType()
B: TypeAlias = ir.IRBuilder
V: TypeAlias = ir.Value


def llvm_type(t: T.Type) -> ir.Type:
    if isinstance(t, T.PointerType):
        return PTR
    if isinstance(t, T.TileType):
        return llvm_type(t.elem)
    if t.is_float:
        if t.bits == 8:
            return I8  # fp8 values travel as their bits
        if t.name == "bf16":
            return I16  # so do bf16 values (llvmlite has no bfloat type): bf16.py
        return {"fp16": F16, "fp32": F32, "fp64": F64}[t.name]
    return ir.IntType(t.bits)


def const(t: T.ScalarType, v: Any) -> ir.Constant:
    if t.is_float and t.bits == 8:
        return ir.Constant(I8, fp8_bits(float(v), t))
    if t == T.bf16:
        return ir.Constant(I16, bf16.bf16_bits(float(v)))
    if t == T.fp16:
        try:  # round to nearest even; beyond the largest half it is inf (llvmlite would raise)
            v = struct.unpack("e", struct.pack("e", float(v)))[0]
        except OverflowError:
            v = math.copysign(math.inf, float(v))
    if t.is_float:
        return ir.Constant(llvm_type(t), float(v))
    iv = int(v) & ((1 << t.bits) - 1)
    return ir.Constant(llvm_type(t), iv)


def _intrinsic(b: B, name: str, ret: ir.Type, args: list[V], types: list[ir.Type] | None = None) -> V:
    m = b.module
    fn = m.globals.get(name)
    if fn is None:
        fn = ir.Function(m, ir.FunctionType(ret, types or [a.type for a in args]), name)
    return b.call(fn, args)


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if BF16 is not None and isinstance(t, type(BF16)):
        return "bf16"
    return f"i{t.width}"


# ------------------------------------------------------------------------- binary ops
def _float_or_int(fop: str, sop: str, uop: str | None = None) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        if t.is_float:
            r = getattr(b, fop)(x, y)
            r.flags.extend(attrs.get("_fmf", ()))
            return r
        return getattr(b, uop if (uop and t.is_unsigned) else sop)(x, y)

    return f


def _minmax(kind: str) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        if t.is_float:
            nan_all = attrs.get("propagate_nan") == "all"
            base = ("maximum" if kind == "max" else "minimum") if nan_all else ("maxnum" if kind == "max" else "minnum")
            return _intrinsic(b, f"llvm.{base}.{_suffix(x.type)}", x.type, [x, y])
        pred = {"max": ">", "min": "<"}[kind]
        c = b.icmp_unsigned(pred, x, y) if t.is_unsigned else b.icmp_signed(pred, x, y)
        return b.select(c, x, y)

    return f


def _shift(kind: str) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        # Shifting by >= the width is poison in LLVM; PTX clamps. Mask the amount instead.
        if kind == "shl":
            return b.shl(x, y)
        return b.lshr(x, y) if t.is_unsigned else b.ashr(x, y)

    return f


def _umulhi(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
    wide = ir.IntType(t.bits * 2)
    ext = b.sext if t.is_signed else b.zext
    p = b.mul(ext(x, wide), ext(y, wide))
    return b.trunc(b.lshr(p, ir.Constant(wide, t.bits)), x.type)


def _intdiv(kind: str) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        if t.is_float:
            if kind == "div":
                return b.fdiv(x, y)
            if isinstance(x.type, (ir.FloatType, ir.HalfType)):  # frem is a call of fmodf on x86
                if isinstance(x.type, ir.HalfType):  # exact in float32, so exact in float16
                    return b.fptrunc(fmod_f32(b, b.fpext(x, F32), b.fpext(y, F32)), x.type)
                return fmod_f32(b, x, y)
            return b.frem(x, y)
        # Integer division by zero (and INT_MIN / -1) is undefined in LLVM; make it total by
        # dividing by 1 instead and returning 0 (GPUs return garbage, never trap).
        zero = ir.Constant(x.type, 0)
        safe_y = b.select(b.icmp_unsigned("==", y, zero), ir.Constant(x.type, 1), y)
        if t.is_signed:
            minv = ir.Constant(x.type, 1 << (t.bits - 1))
            ovf = b.and_(b.icmp_unsigned("==", x, minv), b.icmp_signed("==", y, ir.Constant(x.type, -1)))
            safe_y = b.select(ovf, ir.Constant(x.type, 1), safe_y)
            r = b.sdiv(x, safe_y) if kind == "div" else b.srem(x, safe_y)
            if kind == "rem":
                r = b.select(ovf, zero, r)
        else:
            r = b.udiv(x, safe_y) if kind == "div" else b.urem(x, safe_y)
        return b.select(b.icmp_unsigned("==", y, zero), zero, r)

    return f


def _fbin(name: str) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        if name == "copysign":
            return _intrinsic(b, f"llvm.{name}.{_suffix(x.type)}", x.type, [x, y])
        if name == "pow" and not isinstance(x.type, (ir.FloatType, ir.HalfType)):
            return _intrinsic(b, f"llvm.{name}.{_suffix(x.type)}", x.type, [x, y])
        return _libm(b, name, x.type, [x, y])

    return f


def _via_f32(fn: Callable[[B, T.ScalarType, V, V, dict], V]) -> Callable[[B, T.ScalarType, V, V, dict], V]:
    def f(b: B, t: T.ScalarType, x: V, y: V, attrs: dict) -> V:
        if t != T.bf16:
            return fn(b, t, x, y, attrs)
        return bf16.from_f32(b, fn(b, T.fp32, bf16.to_f32(b, x), bf16.to_f32(b, y), attrs))

    return f


BINARY: dict[str, Callable[[B, T.ScalarType, V, V, dict], V]] = {
    "add": _float_or_int("fadd", "add"),
    "sub": _float_or_int("fsub", "sub"),
    "mul": _float_or_int("fmul", "mul"),
    "div": _intdiv("div"),
    "rem": _intdiv("rem"),
    "and": lambda b, t, x, y, a: b.and_(x, y),
    "or": lambda b, t, x, y, a: b.or_(x, y),
    "xor": lambda b, t, x, y, a: b.xor(x, y),
    "shl": _shift("shl"),
    "shr": _shift("shr"),
    "max": _minmax("max"),
    "min": _minmax("min"),
    "umulhi": _umulhi,
    "pow": _fbin("pow"),
    "atan2": _fbin("atan2"),
    "copysign": _fbin("copysign"),
    "hypot": _fbin("hypot"),
}

BINARY = {k: _via_f32(f) for k, f in BINARY.items()}

_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _cmp(b: B, t: T.ElemType, pred: str, x: V, y: V) -> V:
    if t == T.bf16:
        t, x, y = T.fp32, bf16.to_f32(b, x), bf16.to_f32(b, y)
    if isinstance(t, T.ScalarType) and t.is_float:
        # Triton: ordered comparisons, except != which is unordered (true for NaN).
        if pred == "ne":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_ICMP[pred], x, y)
    if isinstance(t, T.PointerType):
        x, y = b.ptrtoint(x, I64), b.ptrtoint(y, I64)
        return b.icmp_unsigned(_ICMP[pred], x, y)
    if t.is_unsigned:
        return b.icmp_unsigned(_ICMP[pred], x, y)
    return b.icmp_signed(_ICMP[pred], x, y)


CMP = _cmp


# ------------------------------------------------------------------------- math
_LLVM_UNARY = {"sqrt", "sin", "cos", "exp", "exp2", "log", "log2", "log10", "floor", "ceil", "trunc",
               "round", "rint", "nearbyint", "fabs"}
_LIBM = {"tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
         "cbrt", "log1p", "expm1", "lgamma", "tgamma", "j0", "j1", "y0", "y1", "exp10", "fmod", "remainder",
         "nextafter", "fdim", "atan2", "hypot", "erfinv"}


def _libm(b: B, name: str, ty: ir.Type, args: list[V]) -> V:
    if len(args) == 2 and name in mathlib.ANY_BINARY and isinstance(ty, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        return mathlib.ANY_BINARY[name](b, args[0], args[1])
    if isinstance(ty, (ir.HalfType,)) or (BF16 is not None and isinstance(ty, type(BF16))):
        wide = [b.fpext(a, F32) for a in args]
        return b.fptrunc(_libm(b, name, F32, wide), ty)
    if name == "erfinv":
        return erfinv(b, args[0])
    if isinstance(ty, ir.FloatType):
        if len(args) == 1 and name in mathlib.F32_UNARY:
            return mathlib.F32_UNARY[name](b, args[0])
        if len(args) == 2 and name in mathlib.F32_BINARY:
            return mathlib.F32_BINARY[name](b, args[0], args[1])
    cname = name + ("f" if isinstance(ty, ir.FloatType) else "")
    return _intrinsic(b, cname, ty, args)


def emit_math(b: B, fn: str, t: T.ScalarType, args: list[V], fast: bool = True) -> V:
    if t == T.bf16:
        r = emit_math(b, fn, T.fp32, [bf16.to_f32(b, a) if a.type == I16 else a for a in args], fast)
        return bf16.from_f32(b, r) if r.type == F32 else r
    x = args[0]
    ty = x.type
    if fn == "neg":
        return b.fneg(x) if t.is_float else b.neg(x)
    if fn == "not":
        return b.not_(x)
    if fn == "abs":
        if t.is_float:
            return _intrinsic(b, f"llvm.fabs.{_suffix(ty)}", ty, [x])
        return _intrinsic(b, f"llvm.abs.{_suffix(ty)}", ty, [x, ir.Constant(I1, 0)])
    if fn == "fma":
        return _intrinsic(b, f"llvm.fma.{_suffix(ty)}", ty, args)
    if fn in ("popc", "clz", "ffs", "brev"):
        if fn == "popc":
            r = _intrinsic(b, f"llvm.ctpop.{_suffix(ty)}", ty, [x])
        elif fn == "clz":
            r = _intrinsic(b, f"llvm.ctlz.{_suffix(ty)}", ty, [x, ir.Constant(I1, 0)])
        elif fn == "brev":
            return _intrinsic(b, f"llvm.bitreverse.{_suffix(ty)}", ty, [x])
        else:
            tz = _intrinsic(b, f"llvm.cttz.{_suffix(ty)}", ty, [x, ir.Constant(I1, 0)])
            r = b.select(b.icmp_unsigned("==", x, ir.Constant(ty, 0)), ir.Constant(ty, 0),
                         b.add(tz, ir.Constant(ty, 1)))
        return b.trunc(r, I32) if ty.width > 32 else (b.zext(r, I32) if ty.width < 32 else r)
    if fn in ("isnan", "isinf", "isfinite", "signbit"):
        if fn == "isnan":
            return b.fcmp_unordered("uno", x, x)
        a = _intrinsic(b, f"llvm.fabs.{_suffix(ty)}", ty, [x])
        inf = ir.Constant(ty, float("inf"))
        if fn == "isinf":
            return b.fcmp_ordered("==", a, inf)
        if fn == "isfinite":
            return b.fcmp_ordered("<", a, inf)
        bits = ir.IntType(t.bits)
        return b.icmp_signed("<", b.bitcast(x, bits), ir.Constant(bits, 0))
    if fn == "sigmoid":
        # e^-|x| never overflows: 1/(1 + e) for x >= 0, e/(1 + e) below (down to the subnormals
        # 1/(1 + e^-x) would lose to e^-x's overflow at x < -88.7)
        one = ir.Constant(ty, 1.0)
        e = emit_math(b, "exp", t, [b.fneg(_intrinsic(b, f"llvm.fabs.{_suffix(ty)}", ty, [x]))], fast)
        num = b.select(b.fcmp_ordered("<", x, ir.Constant(ty, 0.0)), e, one)
        return b.fdiv(num, b.fadd(one, e))
    if fn in ("rsqrt",):
        one = ir.Constant(ty, 1.0)
        return b.fdiv(one, _intrinsic(b, f"llvm.sqrt.{_suffix(ty)}", ty, [x]))
    if fn in ("sqrt_rn",):
        return _intrinsic(b, f"llvm.sqrt.{_suffix(ty)}", ty, [x])
    if fn in ("div_rn", "fast_dividef"):
        return b.fdiv(args[0], args[1])
    if fn == "fast_expf":
        fn = "exp"
    if fn == "fast_logf":
        fn = "log"
    if fn == "saturate":
        z, o = ir.Constant(ty, 0.0), ir.Constant(ty, 1.0)
        return _intrinsic(b, f"llvm.minnum.{_suffix(ty)}", ty,
                          [_intrinsic(b, f"llvm.maxnum.{_suffix(ty)}", ty, [x, z]), o])
    if fn == "ldexp":
        if isinstance(ty, ir.HalfType):
            return b.fptrunc(emit_math(b, fn, T.fp32, [b.fpext(x, F32), args[1]], fast), ty)
        if isinstance(ty, ir.FloatType):
            return ldexp_f32(b, x, args[1])
        return _intrinsic(b, f"llvm.ldexp.{_suffix(ty)}.i32", ty, [x, args[1]])
    if fn == "ilogb":
        if isinstance(ty, (ir.HalfType,)):
            x = b.fpext(x, F32)
        return ilogb(b, x)
    if isinstance(ty, ir.FloatType) and fast and fn in mathlib.F32_UNARY:
        return mathlib.F32_UNARY[fn](b, x)
    if fn == "round":
        return _intrinsic(b, f"llvm.round.{_suffix(ty)}", ty, [x])
    if fn in _LLVM_UNARY:
        if isinstance(ty, ir.HalfType) or (BF16 is not None and isinstance(ty, type(BF16))):
            return b.fptrunc(emit_math(b, fn, T.fp32, [b.fpext(x, F32)], fast), ty)
        return _intrinsic(b, f"llvm.{fn}.{_suffix(ty)}", ty, [x])
    if fn in _LIBM:
        return _libm(b, fn, ty, args)
    raise NotImplementedError(f"math function {fn} on the CPU backend")


def loop_continues(b: B, ity: T.ScalarType, sign: int, iv: V, ub: V, step: V) -> V:
    """The condition of a `for` loop over [iv, ub) by step; `sign` is the step's sign if known."""
    cmp = b.icmp_unsigned if ity.is_unsigned else b.icmp_signed
    if sign > 0:
        return cmp("<", iv, ub)
    if sign < 0:
        return cmp(">", iv, ub)
    up = b.icmp_signed(">", step, ir.Constant(step.type, 0))
    return b.select(up, cmp("<", iv, ub), cmp(">", iv, ub))


# ------------------------------------------------------------------------- casts
def _is_fp8(t: T.ElemType) -> bool:
    return isinstance(t, T.ScalarType) and t.is_fp8


def emit_cast(b: B, src: T.ElemType, dst: T.ElemType, x: V, rounding: str | None = None) -> V:
    if src == dst:
        return x
    if isinstance(src, T.PointerType) or isinstance(dst, T.PointerType):
        if isinstance(src, T.PointerType) and isinstance(dst, T.PointerType):
            return x
        if isinstance(src, T.PointerType):
            return b.ptrtoint(x, llvm_type(dst))
        return b.inttoptr(x, PTR)
    if src == T.bf16:
        return emit_cast(b, T.fp32, dst, bf16.to_f32(b, x), rounding)
    if dst == T.bf16:
        if _is_fp8(src) or src == T.fp16:
            x, src = emit_cast(b, src, T.fp32, x), T.fp32
        if src == T.fp32:
            return bf16.from_f32(b, x, rounding)
        # fp64 and integers (exact in fp64 up to 53 bits) round once through fp64.
        return bf16.from_f64(b, emit_cast(b, src, T.fp64, x), rounding)
    if _is_fp8(src):
        f = fp8_to_f32(b, src, x)
        return emit_cast(b, T.fp32, dst, f)
    if _is_fp8(dst):
        if src.is_float:
            f = x if src == T.fp32 else (b.fpext(x, F32) if src.bits < 32 else b.fptrunc(x, F32))
        else:
            f = emit_cast(b, src, T.fp32, x)
        return f32_to_fp8(b, dst, f, rounding or "rtne")
    st, dt = llvm_type(src), llvm_type(dst)
    if src == T.fp64 and dst == T.fp16:
        # x86 has no f64 -> f16 instruction and the JIT does not link the __truncdfhf2 libcall
        # LLVM would call: round to odd into fp32, then once to fp16.
        return emit_cast(b, T.fp32, T.fp16, bf16.f64_to_f32_odd(b, x, rounding), rounding)
    if src.is_float and dst.is_float:
        if dst.bits > src.bits or (src == T.fp16 and dst == T.bf16) or (src == T.bf16 and dst == T.fp16):
            if {src.name, dst.name} == {"fp16", "bf16"}:
                return b.fptrunc(b.fpext(x, F32), dt)
            return b.fpext(x, dt)
        t = b.fptrunc(x, dt)
        if rounding == "rtz":
            # llvm.fptrunc.round cannot be selected on x86 (LLVM aborts): round to nearest, then
            # step one ulp toward zero where that rounded away from zero (inf -> the largest finite).
            back = b.fpext(t, st)
            neg = b.fcmp_ordered("<", x, ir.Constant(st, 0.0))
            away = b.select(neg, b.fcmp_ordered("<", back, x), b.fcmp_ordered(">", back, x))
            it = ir.IntType(dst.bits)
            t = b.bitcast(b.sub(b.bitcast(t, it), b.zext(away, it)), dt)
        return t
    if src.is_int and dst.is_int:
        if dst.bits == src.bits:
            return x
        if dst.bits < src.bits:
            return b.trunc(x, dt)
        return b.sext(x, dt) if src.is_signed else b.zext(x, dt)
    if src.is_int and dst.is_float:
        return b.sitofp(x, dt) if src.is_signed else b.uitofp(x, dt)
    # float -> int saturates (PTX cvt.rzi semantics; LLVM's plain fptosi would be poison).
    name = "fptosi" if dst.is_signed else "fptoui"
    return _intrinsic(b, f"llvm.{name}.sat.{_suffix(dt)}.{_suffix(st)}", dt, [x])


def emit_bitcast(b: B, src: T.ElemType, dst: T.ElemType, x: V) -> V:
    st, dt = llvm_type(src), llvm_type(dst)
    if st == dt:
        return x
    if isinstance(src, T.PointerType):
        return b.ptrtoint(x, dt)
    if isinstance(dst, T.PointerType):
        return b.inttoptr(x, PTR)
    return b.bitcast(x, dt)
