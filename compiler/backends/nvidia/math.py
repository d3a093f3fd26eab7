"""Elementwise math on NVIDIA GPUs: the fast approximate instructions Triton uses for fp32
(ex2.approx, lg2.approx, rsqrt.approx, sin/cos.approx), generic LLVM intrinsics elsewhere; and the
hardware fp32 -> bf16 conversion (cvt.rn/rz.bf16.f32, sm_80+)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...errors import UnsupportedError
from ...ir import types as T
from ..llvm import scalar as S

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["emit_gpu_math", "emit_gpu_cast", "pack_pair"]

F32 = S.F32
I32 = S.I32
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_GENERIC = {"neg", "not", "abs", "fma", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "isnan", "isinf",
            "isfinite", "signbit", "popc", "clz", "ffs", "brev", "sqrt_rn", "div_rn", "fast_dividef", "saturate"}


def emit_gpu_math(lw: NvLowering, fn: str, t: T.ScalarType, args: list[ir.Value]) -> ir.Value:
    b = lw.b
    if fn in _GENERIC:
        return S.emit_math(b, fn, t, args, fast=False)
    x = args[0]
    if t != T.fp32:
        if t in (T.fp16, T.bf16):  # computed in fp32, rounded back (bf16 values are i16 bit patterns)
            r = emit_gpu_math(lw, fn, T.fp32, [S.emit_cast(b, t, T.fp32, a) if a.type != S.I32 else a for a in args])
            return r if fn == "ilogb" else S.emit_cast(b, T.fp32, t, r)
        if fn == "sqrt" and t == T.fp64:
            return S.emit_math(b, "sqrt_rn", t, args)
        if t == T.fp64 and fn in LIBDEVICE_UNARY | LIBDEVICE_BINARY | _FP64_LIBDEVICE:
            return libdevice_call(lw, fn, t, args)
        raise UnsupportedError(f"tl.{fn} on {t} is not supported by the NVIDIA backend",
                               hint="cast to tl.float32 first")
    ex2 = lambda v, ftz=False: lw.intrinsic(  # noqa: E731
        f"llvm.nvvm.ex2.approx{'.ftz' if ftz else ''}.f32", F32, [v])

    def mul(v: ir.Value, c: float) -> ir.Value:  # with the kernel's flags: contractable, no .rn
        r = b.fmul(v, ir.Constant(F32, c))
        r.flags.extend(lw.fmf)
        return r

    lg2 = lambda v: lw.intrinsic("llvm.nvvm.lg2.approx.f", F32, [v])  # noqa: E731
    if fn in ("exp", "fast_expf"):
        return ex2(mul(x, _LOG2E))
    if fn == "exp2":  # flushing subnormals as Triton does: one MUFU, no range fix-up around it
        return ex2(x, ftz=True)
    if fn in ("log", "fast_logf"):
        return mul(lg2(x), _LN2)
    if fn == "log2":
        return lg2(x)
    if fn == "sqrt":
        return lw.intrinsic("llvm.nvvm.sqrt.approx.ftz.f", F32, [x])
    if fn == "rsqrt":
        return lw.intrinsic("llvm.nvvm.rsqrt.approx.ftz.f", F32, [x])
    if fn == "sin":
        return lw.intrinsic("llvm.nvvm.sin.approx.f", F32, [x])
    if fn == "cos":
        return lw.intrinsic("llvm.nvvm.cos.approx.f", F32, [x])
    if fn == "sigmoid":
        one = ir.Constant(F32, 1.0)
        e = ex2(mul(x, -_LOG2E))
        return lw.intrinsic("llvm.nvvm.div.full", F32, [one, b.fadd(one, e)])
    if fn in LIBDEVICE_UNARY or fn in LIBDEVICE_BINARY:
        return libdevice_call(lw, fn, t, args)
    raise UnsupportedError(f"tl.{fn} is not supported by the NVIDIA backend",
                           hint="run on CPU tensors (the CPU backend supports it)")


# Precise math from libdevice (NVIDIA's math library, linked into the module when used): the
# functions without a one-instruction form. fp32 names end in "f" (__nv_tanhf), fp64 ones do not.
LIBDEVICE_UNARY = frozenset({"tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                             "erf", "erfc", "erfinv", "cbrt", "log1p", "expm1", "lgamma", "tgamma", "j0", "j1", "y0",
                             "y1", "exp10", "log10", "ilogb"})
LIBDEVICE_BINARY = frozenset({"pow", "atan2", "hypot", "fmod", "remainder", "nextafter", "fdim", "ldexp"})
_FP64_LIBDEVICE = frozenset({"exp", "exp2", "log", "log2", "sin", "cos", "rsqrt", "sigmoid", "fast_expf",
                             "fast_logf"})


def libdevice_call(lw: NvLowering, fn: str, t: T.ScalarType, args: list[ir.Value]) -> ir.Value:
    """`fn` on fp32/fp64 values through libdevice's __nv_ functions."""
    b = lw.b
    if t in (T.fp16, T.bf16):  # computed in fp32, rounded back
        wide = [S.emit_cast(b, t, T.fp32, a) if a.type != S.I32 else a for a in args]
        r = libdevice_call(lw, fn, T.fp32, wide)
        return r if fn == "ilogb" else S.emit_cast(b, T.fp32, t, r)
    fty = args[0].type
    if fn == "sigmoid":  # fp64: 1 / (1 + exp(-x))
        one = ir.Constant(fty, 1.0)
        return b.fdiv(one, b.fadd(one, libdevice_call(lw, "exp", t, [b.fneg(args[0])])))
    name = {"fast_expf": "exp", "fast_logf": "log"}.get(fn, fn)
    name = f"__nv_{name}{'f' if t == T.fp32 else ''}"
    ret = S.I32 if fn == "ilogb" else fty
    lw.uses_libdevice = True
    return lw.intrinsic(name, ret, list(args))


_BF16_ROUNDING = {None: "rn", "rtne": "rn", "rtz": "rz"}


def emit_gpu_cast(lw: NvLowering, src: T.ElemType, dst: T.ElemType, x: ir.Value,
                  rounding: str | None) -> ir.Value | None:
    """A cast with a one-instruction hardware form, or None for the generic (CPU-shared) lowering.

    fp32 -> bf16 (bf16 values are their 16-bit patterns, an i16) is cvt.rn.bf16.f32 (cvt.rz for
    rounding="rtz"): one instruction, where the generic integer rounding sequence is about seven
    per element. NaN becomes the canonical bf16 NaN (0x7fff) instead of the quieted input."""
    mode = _BF16_ROUNDING.get(rounding, "")
    if src == T.fp32 and dst == T.bf16 and mode:
        fty = ir.FunctionType(ir.IntType(16), [F32])
        return lw.b.asm(fty, f"cvt.{mode}.bf16.f32 $0, $1;", "=h,f", [x], side_effect=False)
    return None


def _rounded_from_f32(v: ir.Value) -> tuple[str, ir.Value] | None:
    """('f16', x) for `fptrunc float x to half`, ('bf16', x) for the cvt.rn.bf16.f32 of x."""
    if isinstance(v, ir.CastInstr) and v.opname == "fptrunc" and v.type == ir.HalfType() \
            and v.operands[0].type == F32:
        return "f16", v.operands[0]
    if isinstance(v, ir.CallInstr) and isinstance(v.callee, ir.InlineAsm) \
            and v.callee.asm.startswith("cvt.rn.bf16.f32 "):
        return "bf16", v.args[0]
    return None


def pack_pair(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two 16-bit values as one i32 (lo in bits 0-15). Two fp32 -> fp16/bf16 roundings become one
    cvt.rn.{f16,bf16}x2.f32, which rounds both and packs them (the scalar ones are then dead)."""
    rl, rh = _rounded_from_f32(lo), _rounded_from_f32(hi)
    if rl is not None and rh is not None and rl[0] == rh[0]:
        if rl[0] == "bf16":
            fty = ir.FunctionType(I32, [F32, F32])
            return b.asm(fty, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [rh[1], rl[1]], side_effect=False)
        v2 = ir.VectorType(F32, 2)
        pair = b.insert_element(b.insert_element(ir.Constant(v2, ir.Undefined), rl[1], ir.Constant(I32, 0)),
                                rh[1], ir.Constant(I32, 1))
        return b.bitcast(b.fptrunc(pair, ir.VectorType(ir.HalfType(), 2)), I32)
    i16 = ir.IntType(16)
    lo, hi = (b.bitcast(v, i16) if v.type != i16 else v for v in (lo, hi))
    return b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), ir.Constant(I32, 16)))
