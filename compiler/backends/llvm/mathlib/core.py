"""Building blocks of the math library: constants, fused multiply-adds, polynomials, selects
and bit manipulation on scalar float32/float64 LLVM values.

Everything here is straight-line arithmetic and selects (no branches, no library calls), so the
loop vectorizer turns a loop over elements into vector code. Each library function is emitted
once per module as an internal always-inline function (`define_fn`): the kernel's IR stays small
(the optimizer's size heuristics read its line count) and LLVM inlines it before vectorizing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

from llvmlite import ir

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
B: TypeAlias = ir.IRBuilder
V: TypeAlias = ir.Value

INF = float("inf")
NAN = float("nan")


def c(ty: ir.Type, v: float) -> ir.Constant:
    return ir.Constant(ty, v)


def f32(v: float) -> ir.Constant:
    return ir.Constant(F32, v)


def f64(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def sfx(ty: ir.Type) -> str:
    return "f64" if isinstance(ty, ir.DoubleType) else "f16" if isinstance(ty, ir.HalfType) else "f32"


def call(b: B, name: str, args: Sequence[V], ret: ir.Type | None = None) -> V:
    m = b.module
    fn = m.globals.get(name)
    if fn is None:
        fn = ir.Function(m, ir.FunctionType(ret or args[0].type, [a.type for a in args]), name)
    return b.call(fn, list(args))


def fma(b: B, x: V, y: V, z: V) -> V:
    """x y + z, fused where the host has FMA (llvm.fmuladd: a multiply and an add elsewhere, never
    a library call). No algorithm here needs the fusion for its error bound."""
    return call(b, f"llvm.fmuladd.{sfx(x.type)}", [x, y, z])


def horner(b: B, x: V, coeffs: Sequence[float]) -> V:
    """coeffs[0] + coeffs[1] x + coeffs[2] x^2 + ... in x's type."""
    ty = x.type
    p: V = c(ty, coeffs[-1])
    for k in reversed(coeffs[:-1]):
        p = fma(b, p, x, c(ty, k))
    return p


def fabs(b: B, x: V) -> V:
    return call(b, f"llvm.fabs.{sfx(x.type)}", [x])


def copysign(b: B, mag: V, sign: V) -> V:
    return call(b, f"llvm.copysign.{sfx(mag.type)}", [mag, sign])


def rint(b: B, x: V) -> V:
    return call(b, f"llvm.rint.{sfx(x.type)}", [x])


def trunc(b: B, x: V) -> V:
    return call(b, f"llvm.trunc.{sfx(x.type)}", [x])


def sqrt(b: B, x: V) -> V:
    return call(b, f"llvm.sqrt.{sfx(x.type)}", [x])


def lt(b: B, x: V, y: V | float) -> V:
    """x < y, false for NaN."""
    return b.fcmp_ordered("<", x, y if isinstance(y, ir.Value) else c(x.type, y))


def gt(b: B, x: V, y: V | float) -> V:
    return b.fcmp_ordered(">", x, y if isinstance(y, ir.Value) else c(x.type, y))


def eq(b: B, x: V, y: V | float) -> V:
    return b.fcmp_ordered("==", x, y if isinstance(y, ir.Value) else c(x.type, y))


def isnan(b: B, x: V) -> V:
    return b.fcmp_unordered("uno", x, x)


def where(b: B, cond: V, x: V | float, y: V | float) -> V:
    ty = x.type if isinstance(x, ir.Value) else y.type  # type: ignore[union-attr]
    return b.select(cond, x if isinstance(x, ir.Value) else c(ty, x), y if isinstance(y, ir.Value) else c(ty, y))


def clamp(b: B, x: V, lo: float, hi: float) -> V:
    """x limited to [lo, hi]; NaN stays NaN (ordered compares; minnum/maxnum would replace it)."""
    x = b.select(gt(b, x, hi), c(x.type, hi), x)
    return b.select(lt(b, x, lo), c(x.type, lo), x)


def ext(b: B, x: V) -> V:
    return b.fpext(x, F64)


def narrow(b: B, x: V) -> V:
    """float64 -> float32, rounded to nearest (overflow to inf, subnormals rounded once)."""
    return b.fptrunc(x, F32)


def to_int(b: B, nf: V, ity: ir.IntType) -> V:
    """The integer value of nf, known to be integral and in range (NaN mapped to 0: a plain
    conversion of NaN is poison, the saturating one costs x86 several instructions)."""
    return b.fptosi(b.select(isnan(b, nf), c(nf.type, 0.0), nf), ity)


def pow2_f32(b: B, n: V) -> V:
    """2^n for i32 n in [-126, 127]."""
    return b.bitcast(b.shl(b.add(n, i32(127)), i32(23)), F32)


def pow2_f64(b: B, n: V) -> V:
    """2^n for i64 n in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(n, i64(1023)), i64(52)), F64)


def define_fn(b: B, name: str, ret: ir.Type, params: Sequence[ir.Type], body: Callable[..., V]) -> ir.Function:
    """The module's internal function `name`, built by body(builder, *args) on first use."""
    m = b.module
    fn = m.globals.get(name)
    if isinstance(fn, ir.Function):
        return fn
    fn = ir.Function(m, ir.FunctionType(ret, list(params)), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    fb.ret(body(fb, *fn.args))
    return fn


def lib_call(b: B, name: str, args: Sequence[V], body: Callable[..., V], ret: ir.Type | None = None) -> V:
    """A call of library function `name` (defined in the module by `body` the first time)."""
    fn = define_fn(b, name, ret or args[0].type, [a.type for a in args], body)
    return b.call(fn, list(args))
