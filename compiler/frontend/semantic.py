"""Semantic checks and IR construction for the language's operations.

Promotion, broadcasting and casting follow Triton's rules so that kernels compute the same
types. Errors raised here carry no location: the code generator adds the node's location.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import knobs
from ..errors import ArgumentError, DtypeError, ShapeError
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Value
from ..ir.ops import DOT_PRECISIONS, MEMORY_ORDERS, SCOPES
from ..language.core import Tensor
from . import scaled_dot

__all__ = ["Semantic", "Operand"]

Operand = Tensor | int | float | bool

_MAX_NUMEL = 1 << 20


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float, bool))


# The cache hints tl.load / tl.store accept, as in Triton (lowered for NVIDIA in backends/nvidia/cache_hints.py);
# "" is the default.
_LOAD_CACHE = {".ca": "cache in L1 and L2 (the default)", ".cg": "cache in L2 only, not in L1",
               ".cv": "read memory each time, as volatile=True"}
_STORE_CACHE = {".wb": "write back (the default)", ".cg": "cache in L2 only, not in L1",
                ".cs": "streaming: the data is likely written once", ".wt": "write through to memory"}
_EVICTION = {"evict_first": "evicted first (read once)", "evict_last": "kept in cache longest (reused)"}


def _hint_choice(what: str, value: Any, allowed: dict[str, str], elsewhere: str = "",
                 elsewhere_allowed: tuple[str, ...] = ()) -> str:
    """`value` ("" or None: the default) when it is one of `allowed`, else an ArgumentError that
    names the value, the choices and what they do; `elsewhere`: the op that takes the values in
    `elsewhere_allowed` (tl.store's modifiers in a tl.load, say)."""
    if value is None or (isinstance(value, str) and value in ("", *allowed)):
        return value or ""
    arg = what.split()[-1]
    choices = ", ".join(repr(k) for k in allowed)
    text = value if isinstance(value, str) else ""  # a runtime tensor is never compared
    fixes = [f for f in ("." + text, "evict_" + text) if text and f in allowed]
    if fixes:
        hint = f"did you mean {fixes[0]!r}?"
    elif text == "evict_normal":
        hint = f"the normal policy is the default: leave {arg} out (or pass '')"
    else:
        hint = "; ".join(f"{k!r}: {v}" for k, v in allowed.items())
        if text in elsewhere_allowed:
            hint = f"{text!r} applies to {elsewhere} only. " + hint
        hint += f"; leave {arg} out (or pass '') for the default"
    if not isinstance(value, str):
        hint = f"{arg} is a compile-time string (a literal or a tl.constexpr). " + hint
    shown = repr(value) if isinstance(value, (str, int, float)) else f"<{type(value).__name__}>"
    raise ArgumentError(f"{what}={shown} is not supported: use one of {choices}", hint=hint)


_PRECISION = {"tf32": "float32 inputs rounded to tf32 on NVIDIA tensor cores (Triton's default)",
              "tf32x3": "three tf32 products per float32 product (Anvil computes these as 'ieee')",
              "ieee": "full float32 products"}
_ORDERS = {"acq_rel": "acquire and release (the default)", "acquire": "later accesses stay after it",
           "release": "earlier accesses stay before it", "relaxed": "atomic, with no ordering of other accesses"}
_SCOPES = {"gpu": "with every program on the device (the default)", "cta": "with the threads of this program",
           "sys": "with the host and other devices too"}
assert tuple(_PRECISION) == DOT_PRECISIONS and tuple(_ORDERS) == MEMORY_ORDERS and tuple(_SCOPES) == SCOPES


def atomic_order(what: str, sem: Any, scope: Any) -> tuple[str, str]:
    """An atomic's `sem` and `scope`, checked (None or "": the defaults, acq_rel and gpu)."""
    order = _hint_choice(f"{what} sem", sem, _ORDERS) or "acq_rel"
    return order, _hint_choice(f"{what} scope", scope, _SCOPES) or "gpu"


def dot_precision(value: Any) -> str:
    """tl.dot's input_precision, checked; unset: TRITON_F32_DEFAULT's, else "tf32"."""
    if value is None or value == "":
        default = knobs.f32_default()
        if default not in _PRECISION:
            raise ArgumentError(f"TRITON_F32_DEFAULT={default!r} is not supported: use one of "
                                f"{', '.join(repr(k) for k in _PRECISION)}",
                                hint="it sets the input precision of float32 tl.dot calls that name none; "
                                     "unset it for 'tf32'")
        return default
    return _hint_choice("tl.dot input_precision", value, _PRECISION)


def load_cache_modifier(value: Any) -> str:
    """tl.load's cache_modifier, checked: "", ".ca", ".cg" or ".cv"."""
    return _hint_choice("tl.load cache_modifier", value, _LOAD_CACHE, "tl.store", tuple(_STORE_CACHE))


def store_cache_modifier(value: Any) -> str:
    """tl.store's cache_modifier, checked: "", ".wb", ".cg", ".cs" or ".wt"."""
    return _hint_choice("tl.store cache_modifier", value, _STORE_CACHE, "tl.load", tuple(_LOAD_CACHE))


def eviction_policy(op: str, value: Any) -> str:
    """The eviction_policy of tl.load / tl.store (`op`), checked: "", "evict_first" or "evict_last"."""
    return _hint_choice(f"{op} eviction_policy", value, _EVICTION)


class Semantic:
    """Builds typed IR for each language operation through `builder`."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder

    # ----------------------------------------------------------------- constants
    def constant(self, value: Any, ty: T.ScalarType) -> Tensor:
        if ty.is_float:
            value = float(value)
        elif ty.is_bool:
            value = bool(value)
        else:
            value = int(value)
            if ty.is_unsigned:
                value &= (1 << ty.bits) - 1
            elif value > ty.int_max:
                value -= 1 << ty.bits
        return Tensor(self.b.value("constant", [], ty, value=value))

    def to_tensor(self, x: Any) -> Tensor:
        if isinstance(x, Tensor):
            return x
        if isinstance(x, bool):
            return self.constant(x, T.i1)
        if isinstance(x, int):
            if -(2**31) <= x < 2**31:
                return self.constant(x, T.i32)
            if 2**31 <= x < 2**32:
                return self.constant(x, T.u32)
            if -(2**63) <= x < 2**63:
                return self.constant(x, T.i64)
            if 2**63 <= x < 2**64:
                return self.constant(x, T.u64)
            raise DtypeError(f"integer {x} does not fit in 64 bits")
        if isinstance(x, float):
            ax = abs(x)
            fits = ax == float("inf") or ax == 0.0 or x != x or 2**-126 <= ax <= (2 - 2**-23) * 2**127
            return self.constant(x, T.fp32 if fits else T.fp64)
        raise DtypeError(f"cannot use a value of type {type(x).__name__} ({x!r}) as a tensor",
                         hint="kernels operate on tensors, numbers and booleans")

    # ----------------------------------------------------------------- shapes
    def splat(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        if x.is_tile():
            return self.broadcast_to(x, shape)
        return Tensor(self.b.value("splat", [x.handle], T.TileType(tuple(shape), x.ir_elem)))

    def expand_dims(self, x: Tensor, axis: int) -> Tensor:
        shape = list(x.shape)
        if axis < 0:
            axis += len(shape) + 1
        if not 0 <= axis <= len(shape):
            raise ShapeError(f"expand_dims axis {axis} out of range for a tensor of rank {len(shape)}")
        if not x.is_tile():
            return self.splat(x, [1])
        shape.insert(axis, 1)
        return Tensor(self.b.value("expand_dims", [x.handle], T.TileType(tuple(shape), x.ir_elem), axis=axis))

    def broadcast_to(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        shape = tuple(int(s) for s in shape)
        if not x.is_tile():
            return self.splat(x, shape) if shape else x
        if x.shape == shape:
            return x
        src = x
        while len(src.shape) < len(shape):
            src = self.expand_dims(src, 0)
        if len(src.shape) != len(shape):
            raise ShapeError(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
        for a, b in zip(src.shape, shape, strict=True):
            if a != b and a != 1:
                raise ShapeError(f"cannot broadcast shape {list(x.shape)} to {list(shape)}",
                                 hint="a dimension can only broadcast from size 1")
        if src.shape == shape:
            return src
        return Tensor(self.b.value("broadcast", [src.handle], T.TileType(shape, src.ir_elem)))

    def broadcast_pair(self, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        if a.shape == b.shape:
            return a, b
        if not a.is_tile():
            return self.splat(a, b.shape), b
        if not b.is_tile():
            return a, self.splat(b, a.shape)
        sa, sb = list(a.shape), list(b.shape)
        sa = [1] * (len(sb) - len(sa)) + sa
        sb = [1] * (len(sa) - len(sb)) + sb
        out = []
        for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
            if x == y or y == 1:
                out.append(x)
            elif x == 1:
                out.append(y)
            else:
                raise ShapeError(
                    f"incompatible shapes {list(a.shape)} and {list(b.shape)} (dimension {i}: {x} vs {y})",
                    hint="broadcasting needs equal sizes or size 1; use x[:, None] / x[None, :] to add axes")
        return self.broadcast_to(a, out), self.broadcast_to(b, out)

    # ----------------------------------------------------------------- casts
    def cast(self, x: Tensor, dst: T.ElemType, bitcast: bool = False,
             fp_downcast_rounding: str | None = None) -> Tensor:
        src = x.ir_elem
        if src == dst:
            return x
        rty = T.with_elem(x.type, dst)
        if bitcast:
            sb = 64 if isinstance(src, T.PointerType) else src.bits
            db = 64 if isinstance(dst, T.PointerType) else dst.bits
            if sb != db:
                raise DtypeError(f"cannot bitcast {src} ({sb} bits) to {dst} ({db} bits)",
                                 hint="bitcast needs types of the same width")
            return Tensor(self.b.value("bitcast", [x.handle], rty))
        if fp_downcast_rounding is not None and not (
                isinstance(src, T.ScalarType) and isinstance(dst, T.ScalarType) and src.is_float
                and dst.is_float and dst.bits < src.bits):
            raise DtypeError(f"fp_downcast_rounding applies only to float downcasts, not {src} -> {dst}",
                             hint="drop fp_downcast_rounding for this conversion")
        if isinstance(dst, T.ScalarType) and dst.is_bool and isinstance(src, T.ScalarType):
            return self.compare("ne", x, self.constant(0, src) if not x.is_tile() else
                                self.splat(self.constant(0, src), x.shape))
        if isinstance(src, T.PointerType) and isinstance(dst, T.ScalarType) and dst.is_bool:
            return self.compare("ne", self.cast(x, T.i64), self.to_tensor(0))
        attrs: dict[str, Any] = {}
        if fp_downcast_rounding is not None:
            attrs["rounding"] = fp_downcast_rounding
        return Tensor(self.b.value("cast", [x.handle], rty, **attrs))

    # ----------------------------------------------------------------- promotion
    def computation_type(self, a: T.ScalarType, a_scalar: bool, b: T.ScalarType, b_scalar: bool,
                         div_or_mod: bool) -> T.ScalarType:
        if a_scalar != b_scalar:
            s, t = (a, b) if a_scalar else (b, a)
            if s.kind_rank <= t.kind_rank:
                if div_or_mod and t in (T.fp16, T.bf16):
                    return T.fp32
                return t
        if T.fp64 in (a, b):
            return T.fp64
        if T.fp32 in (a, b):
            return T.fp32
        if T.fp16 in (a, b):
            return T.fp32 if div_or_mod else T.fp16
        if a == T.bf16 and b == T.bf16:
            return T.fp32 if div_or_mod else T.bf16
        if T.bf16 in (a, b):
            return T.fp32
        if a.is_fp8 and b.is_fp8:
            return a if a == b else T.fp16
        if not a.is_int or not b.is_int:
            raise DtypeError(f"unexpected operand types {a} and {b}")
        if div_or_mod and a.is_signed != b.is_signed:
            raise DtypeError(
                f"Cannot use /, //, or % with {a} and {b} because they have different signedness",
                hint="cast both operands to the same signedness")
        return self.integer_promote(a, b)

    @staticmethod
    def integer_promote(a: T.ScalarType, b: T.ScalarType) -> T.ScalarType:
        if a.is_unsigned == b.is_unsigned:
            return a if a.bits > b.bits else b
        if a.is_unsigned:
            return a if a.bits >= b.bits else b
        return b if b.bits >= a.bits else a

    def binary_operands(self, lhs: Operand, rhs: Operand, allow_lhs_ptr: bool = False,
                        allow_rhs_ptr: bool = False, arithmetic: bool = True,
                        div_or_mod: bool = False) -> tuple[Tensor, Tensor]:
        ls, rs = _is_num(lhs), _is_num(rhs)
        lt, rt = self.to_tensor(lhs), self.to_tensor(rhs)
        le, re = lt.ir_elem, rt.ir_elem
        for x, y, allow in ((le, re, allow_lhs_ptr), (re, le, allow_rhs_ptr)):
            if isinstance(x, T.PointerType) and (not allow or (isinstance(y, T.PointerType) and x != y) or (
                    isinstance(y, T.ScalarType) and y.is_float)):
                raise DtypeError(f"incompatible operand types {le} and {re}",
                                 hint="pointers combine only with integer offsets")
        if arithmetic and isinstance(le, T.ScalarType) and isinstance(re, T.ScalarType):
            ty = self.computation_type(le, ls, re, rs, div_or_mod)
            for is_s, v in ((ls, lhs), (rs, rhs)):
                if not is_s:
                    continue
                assert not isinstance(v, Tensor)
                if is_s and ty.is_unsigned and not ty.is_bool and v < 0:
                    raise DtypeError("cannot combine an unsigned tensor with a negative number",
                                     hint="cast one of them explicitly")
                if is_s and ty.is_int and not isinstance(v, float) and not ty.int_min <= v <= ty.int_max:
                    raise DtypeError(f"number {v} is out of range for {ty}")
            lt = self.constant(lhs, ty) if ls else self.cast(lt, ty)
            rt = self.constant(rhs, ty) if rs else self.cast(rt, ty)
        return self.broadcast_pair(lt, rt)

    def _bin(self, opcode: str, a: Tensor, b: Tensor) -> Tensor:
        return Tensor(self.b.value(opcode, [a.handle, b.handle], a.type))

    # ----------------------------------------------------------------- arithmetic
    def add(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y, True, True)
        if isinstance(a.ir_elem, T.PointerType) and isinstance(b.ir_elem, T.PointerType):
            raise DtypeError("cannot add two pointers")
        if isinstance(b.ir_elem, T.PointerType):
            a, b = b, a
        if isinstance(a.ir_elem, T.PointerType):
            return self.addptr(a, b)
        return self._bin("add", a, b)

    def addptr(self, p: Tensor, off: Tensor) -> Tensor:
        oe = off.ir_elem
        if not (isinstance(oe, T.ScalarType) and oe.is_int):
            raise DtypeError(f"pointer offsets must be integers, got {oe}")
        if oe.is_unsigned and oe.bits < 64:
            off = self.cast(off, T.i64)
        p, off = self.broadcast_pair(p, off)
        return Tensor(self.b.value("addptr", [p.handle, off.handle], p.type))

    def sub(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y, True, False)
        if isinstance(a.ir_elem, T.PointerType):
            return self.addptr(a, self.minus(b))
        return self._bin("sub", a, b)

    def mul(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y)
        return self._bin("mul", a, b)

    def truediv(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y, div_or_mod=True)
        ae, be = a.ir_elem, b.ir_elem
        assert isinstance(ae, T.ScalarType) and isinstance(be, T.ScalarType)
        if ae.is_float and be.is_int:
            b = self.cast(b, ae)
        elif ae.is_int and be.is_float:
            a = self.cast(a, be)
        elif ae.is_int and be.is_int:
            a, b = self.cast(a, T.fp32), self.cast(b, T.fp32)
        elif ae.man_bits > be.man_bits:
            b = self.cast(b, ae)
        else:
            a = self.cast(a, be)
        return self._bin("div", a, b)

    def floordiv(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y, div_or_mod=True)
        ae, be = a.ir_elem, b.ir_elem
        assert isinstance(ae, T.ScalarType) and isinstance(be, T.ScalarType)
        if not (ae.is_int and be.is_int):
            raise DtypeError(f"// needs integer operands, got {ae} and {be}",
                             hint="use / for floating point, or tl.floor(a / b)")
        ty = self.integer_promote(ae, be)
        return self._bin("div", self.cast(a, ty), self.cast(b, ty))

    def fdiv(self, x: Tensor, y: Tensor, ieee_rounding: bool = False) -> Tensor:
        if not (x.dtype.is_floating() and y.dtype.is_floating()):
            raise DtypeError("both operands of fdiv must be floating point")
        a, b = self.binary_operands(x, y, arithmetic=False)
        return self._bin("div", a, b)

    def mod(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y, div_or_mod=True)
        return self._bin("rem", a, b)

    def minus(self, x: Operand) -> Tensor:
        t = self.to_tensor(x)
        if isinstance(t.ir_elem, T.PointerType):
            raise DtypeError("cannot negate a pointer")
        if t.dtype.is_floating():
            return self.math("neg", t)  # not 0 - x, which turns -0.0 into +0.0
        zero = self.constant(0, t.ir_elem)
        return self.sub(self.splat(zero, t.shape) if t.is_tile() else zero, t)

    def invert(self, x: Operand) -> Tensor:
        t = self.to_tensor(x)
        e = t.ir_elem
        if not (isinstance(e, T.ScalarType) and e.is_int):
            raise DtypeError(f"~ needs an integer operand, got {e}")
        ones = self.constant(-1 if e.is_signed else (1 << e.bits) - 1, e)
        return self._bin("xor", t, self.splat(ones, t.shape) if t.is_tile() else ones)

    def not_(self, x: Operand) -> Tensor:
        t = self.to_tensor(x)
        if t.ir_elem != T.i1:
            t = self.cast(t, T.i1)
        return self.invert(t)

    def bitwise(self, opcode: str, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y)
        ae, be = a.ir_elem, b.ir_elem
        if not (isinstance(ae, T.ScalarType) and ae.is_int and isinstance(be, T.ScalarType) and be.is_int):
            raise DtypeError(f"invalid operands of type {ae} and {be}: bitwise operations need integers")
        ty = self.integer_promote(ae, be)
        lhs = x.ir_elem if isinstance(x, Tensor) else None
        if opcode == "shr" and isinstance(lhs, T.ScalarType) and lhs.is_signed and ty.is_unsigned:
            # Triton picks the shift by the left operand's own signedness: int8 >> uint8 is an
            # arithmetic shift of the uint8 bits. Shift as the signed type of the same width.
            sty = T.scalar(f"i{ty.bits}")
            r = self._bin(opcode, self.cast(self.cast(a, ty), sty), self.cast(self.cast(b, ty), sty))
            return self.cast(r, ty)
        return self._bin(opcode, self.cast(a, ty), self.cast(b, ty))

    def logical(self, opcode: str, x: Operand, y: Operand) -> Tensor:
        a, b = self.to_tensor(x), self.to_tensor(y)
        if a.ir_elem != T.i1:
            a = self.cast(a, T.i1)
        if b.ir_elem != T.i1:
            b = self.cast(b, T.i1)
        return self.bitwise(opcode, a, b)

    def minmax(self, opcode: str, x: Operand, y: Operand, propagate_nan: str = "none") -> Tensor:
        a, b = self.binary_operands(x, y)
        return Tensor(self.b.value(opcode, [a.handle, b.handle], a.type, propagate_nan=propagate_nan)) \
            if a.dtype.is_floating() else self._bin(opcode, a, b)

    def umulhi(self, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y)
        if not a.dtype.is_int():
            raise DtypeError(f"umulhi needs integer operands, got {a.ir_elem}")
        return self._bin("umulhi", a, b)

    def compare(self, pred: str, x: Operand, y: Operand) -> Tensor:
        a, b = self.binary_operands(x, y)
        return Tensor(self.b.value("cmp", [a.handle, b.handle], T.with_elem(a.type, T.i1), pred=pred))

    def where(self, cond: Operand, x: Operand, y: Operand) -> Tensor:
        c = self.to_tensor(cond)
        if c.ir_elem != T.i1:
            c = self.cast(c, T.i1)
        xt, yt = self.binary_operands(x, y, True, True)
        c, xt = self.broadcast_pair(c, xt)
        c, yt = self.broadcast_pair(c, yt)
        xt, yt = self.broadcast_pair(xt, yt)
        c, xt = self.broadcast_pair(c, xt)
        return Tensor(self.b.value("select", [c.handle, xt.handle, yt.handle], xt.type))

    def math(self, fn: str, *xs: Tensor, result: T.ElemType | None = None) -> Tensor:
        t = xs[0]
        return Tensor(self.b.value("math", [x.handle for x in xs],
                                   T.with_elem(t.type, result) if result else t.type, fn=fn))

    def float_math(self, fn: str, x: Operand) -> Tensor:
        t = self.to_tensor(x)
        e = t.ir_elem
        if not (isinstance(e, T.ScalarType) and e.is_float):
            raise DtypeError(f"tl.{fn} expects a floating-point tensor, got {e}",
                             hint=f"cast first, e.g. tl.{fn}(x.to(tl.float32))")
        return self.math(fn, t)

    # ----------------------------------------------------------------- creation
    def program_id(self, axis: int) -> Tensor:
        if axis not in (0, 1, 2):
            raise ArgumentError(f"program_id axis must be 0, 1, or 2 but got {axis}")
        return Tensor(self.b.value("program_id", [], T.i32, axis=axis))

    def num_programs(self, axis: int) -> Tensor:
        if axis not in (0, 1, 2):
            raise ArgumentError(f"num_programs axis must be 0, 1, or 2 but got {axis}")
        return Tensor(self.b.value("num_programs", [], T.i32, axis=axis))

    def arange(self, start: int, end: int) -> Tensor:
        if not isinstance(start, int) or not isinstance(end, int):
            raise ArgumentError("arange's start and end must be compile-time integers (tl.constexpr)")
        n = end - start
        if n <= 0:
            raise ShapeError(f"arange({start}, {end}) is empty", hint="end must be greater than start")
        if n & (n - 1):
            raise ShapeError(f"arange({start}, {end}) has {n} elements, not a power of two",
                             hint=f"use a power-of-two range such as {1 << n.bit_length()} and mask the rest")
        if n > _MAX_NUMEL:
            raise ShapeError(f"arange of {n} elements exceeds the limit of {_MAX_NUMEL}")
        return Tensor(self.b.value("make_range", [], T.TileType((n,), T.i32), start=start, end=end))

    def full(self, shape: Sequence[int], value: Operand, ty: T.ScalarType) -> Tensor:
        for d in shape:
            if not isinstance(d, int) or d <= 0 or d & (d - 1):
                raise ShapeError(f"tile shape {list(shape)} must be positive powers of two")
        v = self.constant(value, ty) if _is_num(value) else self.cast(self.to_tensor(value), ty)
        return self.splat(v, shape) if shape else v

    # ----------------------------------------------------------------- memory
    def load(self, ptr: Tensor, mask: Operand | None, other: Operand | None, cache: str = "",
             eviction: str = "", volatile: bool = False) -> Tensor:
        cache, eviction = load_cache_modifier(cache), eviction_policy("tl.load", eviction)
        if cache == ".cv":  # one attribute for every pass and backend: read memory each time
            cache, volatile = "", True
        pe = ptr.ir_elem
        if not isinstance(pe, T.PointerType):
            raise DtypeError(f"tl.load needs a pointer, got {pe}",
                             hint="pass a tensor argument (a pointer) plus offsets")
        if mask is None and other is not None:
            raise ArgumentError("`other` needs a `mask`")
        m = o = None
        if mask is not None:
            m = self.to_tensor(mask)
            if m.ir_elem != T.i1:
                m = self.cast(m, T.i1)
            if not ptr.is_tile() and m.is_tile():
                raise ShapeError("a scalar load cannot have a tile mask")
            ptr, m = self.broadcast_pair(ptr, m)
        elem = pe.elem
        is_bool = elem == T.i1
        if is_bool:
            elem = T.i8
            ptr = self.cast(ptr, T.PointerType(T.i8, pe.addrspace))
        if other is not None:
            o = self.to_tensor(other) if not _is_num(other) else self.constant(other, elem)  # type: ignore[arg-type]
            o = self.cast(o, elem)
            ptr, o = self.broadcast_pair(ptr, o)
            if m is not None:
                m = self.broadcast_to(m, ptr.shape)
        ops: list[Value] = [ptr.handle]
        if m is not None:
            ops.append(m.handle)
        if o is not None:
            ops.append(o.handle)
        r = Tensor(self.b.value("load", ops, T.with_elem(ptr.type, elem), has_mask=m is not None,
                                has_other=o is not None, cache=cache or None, eviction=eviction or None,
                                volatile=volatile or None))
        return self.cast(r, T.i1) if is_bool else r

    def store(self, ptr: Tensor, value: Operand, mask: Operand | None, cache: str = "",
              eviction: str = "") -> None:
        cache, eviction = store_cache_modifier(cache), eviction_policy("tl.store", eviction)
        pe = ptr.ir_elem
        if not isinstance(pe, T.PointerType):
            raise DtypeError(f"tl.store needs a pointer, got {pe}")
        v = self.to_tensor(value)
        if not ptr.is_tile() and v.is_tile():
            raise ShapeError(f"cannot store a tile of shape {list(v.shape)} through a scalar pointer")
        pshape = ptr.shape
        ptr, v = self.broadcast_pair(ptr, v)
        m = None
        if mask is not None:
            m = self.to_tensor(mask)
            if m.ir_elem != T.i1:
                m = self.cast(m, T.i1)
            ptr, m = self.broadcast_pair(ptr, m)
            v = self.broadcast_to(v, ptr.shape)
        if ptr.is_tile() and pshape and ptr.shape != pshape:
            raise ShapeError(f"the value's shape {list(v.shape)} does not fit the pointer's {list(pshape)}")
        elem = pe.elem
        if elem == T.i1:
            elem = T.i8
            ptr = self.cast(ptr, T.PointerType(T.i8, pe.addrspace))
        v = self.cast(v, elem)
        ops = [ptr.handle, v.handle] + ([m.handle] if m is not None else [])
        self.b.create("store", ops, [], dict(has_mask=m is not None, cache=cache or None,
                                              eviction=eviction or None))

    def atomic(self, kind: str, ptr: Tensor, val: Operand, mask: Operand | None, sem: str | None,
               scope: str | None) -> Tensor:
        sem, scope = atomic_order(f"tl.atomic_{kind}", sem, scope)
        pe = ptr.ir_elem
        if not isinstance(pe, T.PointerType):
            raise DtypeError(f"atomic_{kind} needs a pointer, got {pe}")
        elem = pe.elem
        assert isinstance(elem, T.ScalarType)
        if elem.is_int and elem.bits < 32:
            raise DtypeError(f"atomic_{kind} does not support {elem}",
                             hint="GPUs have atomics on 32- and 64-bit integers only; use an int32 tensor")
        v = self.cast(self.to_tensor(val) if not _is_num(val) else self.constant(val, elem), elem)
        ptr, v = self.broadcast_pair(ptr, v)
        ops = [ptr.handle, v.handle]
        if mask is not None:
            m = self.to_tensor(mask)
            if m.ir_elem != T.i1:
                m = self.cast(m, T.i1)
            ptr, m = self.broadcast_pair(ptr, m)
            v = self.broadcast_to(v, ptr.shape)
            ops = [ptr.handle, v.handle, m.handle]
        if kind in ("add", "max", "min") and elem.is_float:
            if elem not in (T.fp16, T.bf16, T.fp32, T.fp64):
                raise DtypeError(f"atomic_{kind} does not support {elem}")
            kind = "f" + kind
        elif kind in ("max", "min") and elem.is_unsigned:
            kind = "u" + kind
        elif kind in ("and", "or", "xor") and not elem.is_int:
            raise DtypeError(f"atomic_{kind} needs an integer pointer, got {elem}")
        return Tensor(self.b.value("atomic_rmw", ops, T.with_elem(ptr.type, elem), kind=kind,
                                   sem=sem, scope=scope, has_mask=len(ops) == 3))

    def atomic_cas(self, ptr: Tensor, cmp: Operand, val: Operand, sem: str | None,
                   scope: str | None) -> Tensor:
        pe = ptr.ir_elem
        if not isinstance(pe, T.PointerType):
            raise DtypeError(f"atomic_cas needs a pointer, got {pe}")
        elem = pe.elem
        assert isinstance(elem, T.ScalarType)
        if elem.is_int and elem.bits < 16:
            raise DtypeError(f"atomic_cas does not support {elem}", hint="use a 16-, 32- or 64-bit type")
        c = self.cast(self.to_tensor(cmp) if not _is_num(cmp) else self.constant(cmp, elem), elem)
        v = self.cast(self.to_tensor(val) if not _is_num(val) else self.constant(val, elem), elem)
        ptr, c = self.broadcast_pair(ptr, c)
        ptr, v = self.broadcast_pair(ptr, v)
        sem, scope = atomic_order("tl.atomic_cas", sem, scope)
        return Tensor(self.b.value("atomic_cas", [ptr.handle, c.handle, v.handle], T.with_elem(ptr.type, elem),
                                   sem=sem, scope=scope))

    # ----------------------------------------------------------------- shape ops
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        shape = tuple(int(s) for s in shape)
        n = 1
        for d in shape:
            n *= d
        if n != x.numel:
            raise ShapeError(f"cannot reshape {list(x.shape)} ({x.numel} elements) to {list(shape)} ({n})")
        if not x.is_tile():
            return self.splat(x, shape)
        if shape == x.shape:
            return x
        return Tensor(self.b.value("reshape", [x.handle], T.TileType(shape, x.ir_elem)))

    def permute(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(x.shape))):
            raise ShapeError(f"permutation {list(perm)} does not fit a tensor of rank {len(x.shape)}")
        if perm == tuple(range(len(perm))):
            return x
        shape = tuple(x.shape[p] for p in perm)
        return Tensor(self.b.value("trans", [x.handle], T.TileType(shape, x.ir_elem), perm=perm))

    def join(self, a: Tensor, b: Tensor) -> Tensor:
        a, b = self.broadcast_pair(a, b)
        if a.ir_elem != b.ir_elem:
            raise DtypeError(f"join needs equal dtypes, got {a.ir_elem} and {b.ir_elem}")
        shape = (*a.shape, 2)
        return Tensor(self.b.value("join", [a.handle, b.handle], T.TileType(shape, a.ir_elem)))

    def split(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if not x.shape or x.shape[-1] != 2:
            raise ShapeError(f"split needs a last dimension of size 2, got shape {list(x.shape)}")
        rt = T.TileType(x.shape[:-1], x.ir_elem) if len(x.shape) > 1 else x.ir_elem
        op = self.b.create("split", [x.handle], [rt, rt])
        return Tensor(op.results[0]), Tensor(op.results[1])

    def cat(self, a: Tensor, b: Tensor) -> Tensor:
        if a.ir_elem != b.ir_elem or a.shape[1:] != b.shape[1:]:
            raise ShapeError(f"cannot concatenate {a.type} and {b.type}")
        shape = (a.shape[0] + b.shape[0], *a.shape[1:])
        return Tensor(self.b.value("cat", [a.handle, b.handle], T.TileType(shape, a.ir_elem)))

    def dot(self, a: Tensor, b: Tensor, acc: Tensor | None, input_precision: str | None,
            out_dtype: T.ScalarType) -> Tensor:
        if len(a.shape) < 2 or len(b.shape) != len(a.shape):
            raise ShapeError(f"dot needs two 2-D (or batched N-D) tiles of the same rank, got {list(a.shape)} "
                             f"and {list(b.shape)}")
        if a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
            raise ShapeError(f"dot shapes do not match: {list(a.shape)} @ {list(b.shape)}",
                             hint="the inner dimensions (K) must be equal")
        if len(a.shape) > 3:
            # Several batch dimensions: one batched (3-D) dot over their product.
            batch = a.shape[:-2]
            nb = 1
            for d in batch:
                nb *= d
            a3 = self.reshape(a, [nb, *a.shape[-2:]])
            b3 = self.reshape(b, [nb, *b.shape[-2:]])
            acc3 = self.reshape(acc, [nb, *acc.shape[-2:]]) if acc is not None else None
            r = self.dot(a3, b3, acc3, input_precision, out_dtype)
            return self.reshape(r, [*batch, *r.shape[-2:]])
        # Triton's rule on GPUs: K at least 16 (tensor cores pad small M and N); fp64 dots never
        # use tensor cores, so they may be of any size; the CPU has no minimum (as triton-cpu).
        gen = getattr(self, "gen", None)
        on_gpu = gen is not None and gen.options.target != "cpu"
        if on_gpu and a.ir_elem != T.fp64 and a.shape[-1] < 16:
            raise ShapeError(f"dot needs an inner dimension (K) of at least 16, got {list(a.shape)} @ "
                             f"{list(b.shape)}", hint="pad K to 16 and mask the loads")
        ae, be = a.ir_elem, b.ir_elem
        if not (isinstance(ae, T.ScalarType) and isinstance(be, T.ScalarType)):
            raise DtypeError(f"dot multiplies tiles of numbers, got {a.type} @ {b.type}",
                             hint="load the values first: tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))")
        if ae.is_int != be.is_int:
            raise DtypeError(f"dot operands must both be integer or both float, got {ae} and {be}")
        if ae.is_float and ae != be and not (ae.is_fp8 and be.is_fp8):
            raise DtypeError(f"dot operands differ in dtype: {ae} and {be}", hint="cast one to the other's dtype")
        if ae.is_int:
            out_dtype = T.i32
        elif out_dtype == T.bf16:
            raise DtypeError("dot's out_dtype=bfloat16 is unsupported",
                             hint="use out_dtype=tl.float32 (or tl.float16) and cast with .to(tl.bfloat16)")
        elif ae in (T.fp32, T.bf16):
            out_dtype = T.fp32  # as in Triton, out_dtype only chooses between fp16 and fp32 for fp16/fp8
        elif ae == T.fp64:
            out_dtype = T.fp64
        shape = (*a.shape[:-1], b.shape[-1])
        rty = T.TileType(shape, out_dtype)
        if acc is None:
            acc = self.full(list(shape), 0, out_dtype)
        else:
            if acc.shape != shape:
                raise ShapeError(f"dot accumulator shape {list(acc.shape)} != result shape {list(shape)}")
            if acc.ir_elem != out_dtype:
                out_dtype = acc.ir_elem  # type: ignore[assignment]
                rty = acc.type  # type: ignore[assignment]
        return Tensor(self.b.value("dot", [a.handle, b.handle, acc.handle], rty,
                                   input_precision=dot_precision(input_precision)))

    def dot_scaled(self, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any, rhs_format: Any,
                   acc: Any, fast_math: Any, lhs_k_pack: Any, rhs_k_pack: Any) -> Tensor:
        """tl.dot_scaled, decomposed into upcasts, scaling and tl.dot (frontend/scaled_dot.py)."""
        return scaled_dot.dot_scaled(self, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc, fast_math,
                                     lhs_k_pack, rhs_k_pack)
