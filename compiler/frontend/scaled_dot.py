"""tl.dot_scaled: a matrix product of microscaled (OCP MX) operands, as a decomposition into
operations every backend already has.

Each operand is upcast to the compute type (bfloat16, or float16 when either format is "fp16",
as Triton's software path does), multiplied by its scales, and the two meet in an ordinary
tl.dot accumulating in float32:

- "e2m1" operands are uint8 bytes holding two fp4 values each, the first in the low four bits,
  packed along K (or along M / N when lhs_k_pack / rhs_k_pack is False); the nibbles are decoded
  with integer operations to float32 bits.
- "e4m3" / "e5m2" operands are uint8 bytes (or tl.float8e4nv / tl.float8e5) cast to float;
  "bf16" / "fp16" operands are those types (or uint16 bits).
- A scale is a uint8 e8m0 exponent per 32 elements along K: the float32 whose bits are s << 23
  (2^(s-127); s == 0 gives 0.0, as in Triton), rounded to the compute type. s == 255 is NaN
  unless fast_math=True, where it stays the infinity of its bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, ConstexprError, DtypeError, ShapeError
from ..ir import types as T
from ..language.core import Tensor, constexpr

if TYPE_CHECKING:
    from .semantic import Semantic

__all__ = ["FORMATS", "dot_scaled", "scaled_format"]

FORMATS: dict[str, str] = {
    "e2m1": "fp4, two values per uint8 byte (first in the low 4 bits)",
    "e4m3": "fp8 e4m3fn, uint8 bytes or tl.float8e4nv",
    "e5m2": "fp8 e5m2, uint8 bytes or tl.float8e5",
    "bf16": "tl.bfloat16 (or its uint16 bits)",
    "fp16": "tl.float16 (or its uint16 bits)",
}

# What each format's operand may be stored as: the float type itself, or raw unsigned bits.
_STORAGE: dict[str, tuple[T.ScalarType, ...]] = {
    "e2m1": (T.u8,), "e4m3": (T.fp8e4nv, T.u8), "e5m2": (T.fp8e5, T.u8),
    "bf16": (T.bf16, T.u16), "fp16": (T.fp16, T.u16),
}
_FLOAT: dict[str, T.ScalarType] = {"e4m3": T.fp8e4nv, "e5m2": T.fp8e5, "bf16": T.bf16, "fp16": T.fp16}

# Names of the same formats elsewhere (torch, Triton dtypes, the MX spec's element names).
_ALIASES: dict[str, str] = {
    "fp4": "e2m1", "mxfp4": "e2m1", "float4_e2m1fn_x2": "e2m1", "e4m3fn": "e4m3", "fp8e4nv": "e4m3",
    "float8e4nv": "e4m3", "float8_e4m3fn": "e4m3", "mxfp8": "e4m3", "fp8": "e4m3", "fp8e5": "e5m2",
    "float8e5": "e5m2", "float8_e5m2": "e5m2", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
}

GROUP = 32  # elements along K that share one e8m0 scale
_SHOWN = 60  # characters of a rejected format string quoted back


def scaled_format(which: str, value: Any) -> str:
    """A format argument (`which`: "lhs_format" or "rhs_format"), checked: one of FORMATS."""
    if isinstance(value, str) and value in FORMATS:
        return value
    choices = ", ".join(repr(k) for k in FORMATS)
    if isinstance(value, str):
        shown = repr(value[:_SHOWN]) + (f"... ({len(value):,} characters)" if len(value) > _SHOWN else "")
        key = value.strip().lower() if len(value) <= _SHOWN else ""
        fix = key if key in FORMATS else _ALIASES.get(key.replace("tl.", "").replace("torch.", ""), "")
        hint = f"did you mean {fix!r}?" if fix else "; ".join(f"{k!r}: {v}" for k, v in FORMATS.items())
    else:
        shown = f"<{type(value).__name__}>" if not isinstance(value, (int, float)) else repr(value)
        hint = (f"{which} is a compile-time string naming the operand's element format (a literal or "
                f"a tl.constexpr), such as 'e2m1' or 'e4m3'")
    raise ArgumentError(f"tl.dot_scaled {which}={shown} is not supported: use one of {choices}", hint=hint)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, Tensor):
        raise ConstexprError(f"tl.dot_scaled {name} must be a compile-time bool, got a runtime tensor",
                             hint=f"pass {name}=True or {name}=False (a literal or a tl.constexpr)")
    if not isinstance(value, (bool, int)):
        raise ArgumentError(f"tl.dot_scaled {name} must be True or False, got <{type(value).__name__}>")
    return bool(value)


def _operand(sem: Semantic, which: str, x: Any, fmt: str) -> Tensor:
    t = sem.to_tensor(x)
    allowed = _STORAGE[fmt]
    names = " or ".join(f"tl.{_py_name(a)}" for a in allowed)
    if len(t.shape) not in (2, 3):
        raise ShapeError(f"tl.dot_scaled {which} must be a 2-D tile (or 3-D, batched), got shape {list(t.shape)}",
                         hint=f"load a [rows, K] tile of {names}")
    if t.ir_elem not in allowed:
        e = t.ir_elem
        hint = f"{fmt}: {FORMATS[fmt]}"
        other = [f for f, st in _STORAGE.items() if st[0] == e]
        if other:
            hint = f"a tile of {e} is format {other[0]!r}: pass {which}_format={other[0]!r}"
        elif isinstance(e, T.ScalarType) and e.is_int and e.bits == allowed[-1].bits:
            hint += f"; reinterpret the bits with x.to(tl.{_py_name(allowed[-1])}, bitcast=True)"
        raise DtypeError(f"tl.dot_scaled {which} in format {fmt!r} must be {names}, got {e}", hint=hint)
    return t


def _py_name(t: T.ScalarType) -> str:
    return {"u8": "uint8", "u16": "uint16", "fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "bf16": "bfloat16",
            "fp16": "float16"}[str(t)]


def _fp4_to_f32(sem: Semantic, nib: Tensor) -> Tensor:
    """fp4 e2m1 codes (0..15, uint8) -> float32: sign bit 3, exponent bits 2..1 (bias 1), mantissa
    bit 0; exponent 0 is the subnormal 0.5 (code 1) or zero."""
    n = sem.cast(nib, T.u32)
    em = sem.bitwise("and", n, sem.constant(7, T.u32))
    sign = sem.bitwise("shl", sem.bitwise("and", n, sem.constant(8, T.u32)), sem.constant(28, T.u32))
    # em = (e << 1) | m with e >= 1: 2^(e-1) * (1 + m/2) = float32 bits (em << 22) + (126 << 23).
    normal = sem.add(sem.bitwise("shl", em, sem.constant(22, T.u32)), sem.constant(126 << 23, T.u32))
    half = sem.constant(0x3F000000, T.u32)
    zero = sem.constant(0, T.u32)
    mag = sem.where(sem.compare("ge", em, sem.constant(2, T.u32)), normal,
                    sem.where(sem.compare("eq", em, sem.constant(1, T.u32)), sem.splat(half, em.shape),
                              sem.splat(zero, em.shape)))
    return sem.cast(sem.bitwise("or", sign, mag), T.fp32, bitcast=True)


def _unpack_fp4(sem: Semantic, x: Tensor, axis: int) -> Tensor:
    """Bytes of two fp4 values (the first in the low bits) -> float32, doubling `axis`: each byte is
    repeated twice along `axis` (broadcast and reshape) and shifted right by 0 or 4 by position."""
    shape = list(x.shape)
    wide = sem.expand_dims(x, axis + 1)
    wide = sem.broadcast_to(wide, [*shape[:axis + 1], 2, *shape[axis + 1:]])
    shape[axis] *= 2
    wide = sem.reshape(wide, shape)
    pos = sem.arange(0, shape[axis])
    shift = sem.cast(sem.bitwise("shl", sem.bitwise("and", pos, 1), 2), T.u8)
    if axis != len(shape) - 1:
        shift = sem.expand_dims(shift, 1)
    nib = sem.bitwise("and", sem.bitwise("shr", wide, shift), sem.constant(15, T.u8))
    return _fp4_to_f32(sem, nib)


def _upcast(sem: Semantic, x: Tensor, fmt: str, packed_axis: int, compute: T.ScalarType) -> Tensor:
    if fmt == "e2m1":
        return sem.cast(_unpack_fp4(sem, x, packed_axis), compute)
    f = _FLOAT[fmt]
    if x.ir_elem != f:
        x = sem.cast(x, f, bitcast=True)
    if f.is_fp8:
        x = sem.cast(x, T.fp32)
    return sem.cast(x, compute)


def _scale(sem: Semantic, which: str, s: Any, lead: tuple[int, ...], rows: int, k: int, row_name: str,
           compute: T.ScalarType, fast_math: bool) -> Tensor:
    """The e8m0 scales of one operand, [*lead, rows, k // 32] uint8 -> [*lead, rows, k] in `compute`."""
    want = [*lead, rows, k // GROUP]
    shape_text = f"[{', '.join([*('B' for _ in lead), row_name, 'K // 32'])}]"
    if not isinstance(s, Tensor):
        raise ArgumentError(f"tl.dot_scaled {which} must be a uint8 tile of e8m0 scales {shape_text} or None, "
                            f"got <{type(s).__name__}>", hint=f"load it as a {want} tile of tl.uint8, or pass None")
    if s.ir_elem != T.u8:
        hint = "the scales are e8m0 exponents (2^(s-127)), one byte each: load them as tl.uint8"
        if s.ir_elem == T.fp8e4nv:
            hint = "e4m3 scales (nvfp4, one per 16 elements) are not supported; " + hint
        elif s.ir_elem == T.i8:
            hint += " (x.to(tl.uint8, bitcast=True))"
        raise DtypeError(f"tl.dot_scaled {which} must be uint8 (e8m0), got {s.ir_elem}", hint=hint)
    if k % GROUP:
        raise ShapeError(f"tl.dot_scaled {which} needs K to be a multiple of {GROUP}, got K={k}",
                         hint=f"one scale covers {GROUP} elements along K: pad K, or pass {which}=None")
    if list(s.shape) != want:
        raise ShapeError(f"tl.dot_scaled {which} must have shape {shape_text} = {want}, got {list(s.shape)}",
                         hint=f"one uint8 scale per {GROUP} elements along K, for each of the {rows} "
                              f"{'rows' if row_name == 'M' else 'columns'}" +
                              (" (rhs_scale is [N, K // 32]: do not transpose it)" if row_name == "N" else ""))
    f = sem.cast(sem.bitwise("shl", sem.cast(s, T.u32), sem.constant(23, T.u32)), T.fp32, bitcast=True)
    f = sem.cast(f, compute)
    if not fast_math:
        f = sem.where(sem.compare("eq", s, sem.constant(255, T.u8)), float("nan"), f)
    g = sem.broadcast_to(sem.expand_dims(f, len(want)), [*want, GROUP])
    return sem.reshape(g, [*lead, rows, k])


def dot_scaled(sem: Semantic, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any,
               rhs_format: Any, acc: Any, fast_math: Any, lhs_k_pack: Any, rhs_k_pack: Any) -> Tensor:
    """lhs @ rhs (+ acc) in float32, each operand upcast from its format and scaled (module doc)."""
    lhs_scale, rhs_scale, acc, lhs_format, rhs_format, fast_math, lhs_k_pack, rhs_k_pack = (
        v.value if isinstance(v, constexpr) else v
        for v in (lhs_scale, rhs_scale, acc, lhs_format, rhs_format, fast_math, lhs_k_pack, rhs_k_pack))
    lf = scaled_format("lhs_format", lhs_format)
    rf = scaled_format("rhs_format", rhs_format)
    fast = _flag("fast_math", fast_math)
    lkp, rkp = _flag("lhs_k_pack", lhs_k_pack), _flag("rhs_k_pack", rhs_k_pack)
    for name, kp, fmt in (("lhs_k_pack", lkp, lf), ("rhs_k_pack", rkp, rf)):
        if not kp and fmt != "e2m1":
            raise ArgumentError(f"tl.dot_scaled {name}=False needs format 'e2m1', got {fmt!r}",
                                hint="only fp4 bytes can be packed along M or N: drop the argument")
    a = _operand(sem, "lhs", lhs, lf)
    b = _operand(sem, "rhs", rhs, rf)
    if len(a.shape) != len(b.shape) or a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"tl.dot_scaled operands must both be 2-D (or 3-D with the same batch), got "
                         f"{list(a.shape)} and {list(b.shape)}")
    rank = len(a.shape)
    lead = a.shape[:-2]
    m = a.shape[-2] * (2 if lf == "e2m1" and not lkp else 1)
    k_a = a.shape[-1] * (2 if lf == "e2m1" and lkp else 1)
    k_b = b.shape[-2] * (2 if rf == "e2m1" and rkp else 1)
    n = b.shape[-1] * (2 if rf == "e2m1" and not rkp else 1)
    if k_a != k_b:
        raise ShapeError(f"tl.dot_scaled operands hold different K: lhs {list(a.shape)} ({lf}) has K={k_a}, "
                         f"rhs {list(b.shape)} ({rf}) has K={k_b}",
                         hint="an e2m1 operand packed along K holds two values per byte: its K side is K // 2")
    k = k_a
    compute = T.fp16 if "fp16" in (lf, rf) else T.bf16
    acc_t = None
    if acc is not None:
        acc_t = sem.to_tensor(acc)
        if list(acc_t.shape) != [*lead, m, n]:
            raise ShapeError(f"tl.dot_scaled acc must have the result's shape {[*lead, m, n]}, got "
                             f"{list(acc_t.shape)}", hint="acc = tl.zeros((M, N), dtype=tl.float32)")
        if acc_t.ir_elem != T.fp32:
            raise DtypeError(f"tl.dot_scaled acc must be float32, got {acc_t.ir_elem}",
                             hint="dot_scaled accumulates in float32: acc = tl.zeros((M, N), dtype=tl.float32)")
    x = _upcast(sem, a, lf, rank - (1 if lkp else 2), compute)
    y = _upcast(sem, b, rf, rank - (2 if rkp else 1), compute)
    if lhs_scale is not None:
        x = sem.mul(x, _scale(sem, "lhs_scale", lhs_scale, lead, m, k, "M", compute, fast))
    if rhs_scale is not None:
        sb = _scale(sem, "rhs_scale", rhs_scale, lead, n, k, "N", compute, fast)
        y = sem.mul(y, sem.permute(sb, [*range(rank - 2), rank - 1, rank - 2]))
    return sem.dot(x, y, acc_t, "ieee", T.fp32)
