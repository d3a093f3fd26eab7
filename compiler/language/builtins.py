"""Builtin operations of the kernel language (Triton's names and signatures).

Each function runs at compile time inside a kernel, receiving the semantic builder as `_sem`.
Their docstrings are the language reference agents read.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..backends.registry import on_gpu
from ..errors import ArgumentError, ConstexprError, DtypeError, ShapeError
from ..ir import types as T
from ..ir.core import Block
from .core import PropagateNan, Tensor, block_type, builtin, dtype, to_dtype

__all__ = [
    "program_id", "num_programs", "arange", "zeros", "full", "load", "store", "where", "cast",
    "maximum", "minimum", "clamp", "fdiv", "div_rn", "umulhi", "fma", "exp", "exp2", "log", "log2",
    "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "abs", "erf", "floor", "ceil", "dot", "dot_scaled", "trans", "permute",
    "reshape", "view", "expand_dims", "broadcast", "broadcast_to", "join", "split", "cat", "reduce",
    "associative_scan", "histogram", "gather", "atomic_add", "atomic_max", "atomic_min", "atomic_and",
    "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "static_assert", "static_print",
    "device_assert", "device_print", "multiple_of", "max_contiguous", "max_constancy", "assume",
    "debug_barrier", "inline_asm_elementwise", "to", "make_block_ptr", "advance", "to_tensor", "item", "add",
    "make_tensor_descriptor", "load_tensor_descriptor", "store_tensor_descriptor",
    "sub", "mul", "sort",
]


def _tensor(_sem: Any, x: Any) -> Tensor:
    return _sem.to_tensor(x)


def _const_int(x: Any, what: str) -> int:
    if isinstance(x, Tensor):
        raise ConstexprError(f"{what} must be a compile-time constant, got a runtime tensor",
                             hint="annotate the parameter as tl.constexpr")
    return int(x)


def _dtype(x: Any, what: str = "dtype") -> T.ElemType:
    d = to_dtype(x)
    if d is None:
        raise DtypeError(f"{what} must be a dtype such as tl.float32, got {x!r}")
    return d.ir


def _scalar(x: Any) -> Any:
    """A cast's target: a block type casts to its element type, as in Triton (`x.to(p.dtype.element_ty)`
    with `p` a block pointer)."""
    return x.element_ty if isinstance(x, block_type) else x


def _shape(shape: Any) -> list[int]:
    if isinstance(shape, int):
        return [shape]
    out = []
    for s in shape:
        if isinstance(s, Tensor):
            raise ConstexprError("tile shapes must be compile-time constants",
                                 hint="use tl.constexpr parameters for block sizes")
        out.append(int(s))
    return out


# ------------------------------------------------------------------------- programs
@builtin
def program_id(axis: int, _sem: Any = None) -> Tensor:
    """The index of this program along grid axis 0, 1 or 2. `pid = tl.program_id(0)`."""
    return _sem.program_id(_const_int(axis, "axis"))


@builtin
def num_programs(axis: int, _sem: Any = None) -> Tensor:
    """The number of programs along grid axis 0, 1 or 2. `n = tl.num_programs(0)`."""
    return _sem.num_programs(_const_int(axis, "axis"))


# ------------------------------------------------------------------------- creation
@builtin
def arange(start: int, end: int, _sem: Any = None) -> Tensor:
    """A 1-D tile [start, end) of int32; the size must be a power of two. `tl.arange(0, BLOCK)`."""
    if isinstance(start, Tensor) or isinstance(end, Tensor):
        raise ConstexprError("arange bounds must be compile-time constants",
                             hint="annotate the block size parameter as tl.constexpr")
    return _sem.arange(int(start), int(end))


@builtin
def full(shape: Sequence[int], value: Any, dtype: Any, _sem: Any = None) -> Tensor:
    """A tile of `shape` filled with `value`. `tl.full((BLOCK,), -float('inf'), tl.float32)`."""
    return _sem.full(_shape(shape), value, _dtype(dtype))


@builtin
def zeros(shape: Sequence[int], dtype: Any, _sem: Any = None) -> Tensor:
    """A tile of zeros. `acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)`."""
    return _sem.full(_shape(shape), 0, _dtype(dtype))


# ------------------------------------------------------------------------- memory
@builtin
def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
         padding_option: str = "", cache_modifier: str = "", eviction_policy: str = "",
         volatile: bool = False, _sem: Any = None) -> Tensor:
    """Load a tile through a tile of pointers. Masked-off lanes read nothing and yield `other`.
    Cache hints as in Triton: cache_modifier '.ca' (default), '.cg' (L2 only) or '.cv' (read memory
    each time, as volatile=True); eviction_policy 'evict_first' or 'evict_last'.
    `x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)`."""
    if _sem.gen.is_block_ptr(pointer):
        return _sem.gen.block_ptr_load(pointer, boundary_check, padding_option, cache_modifier, eviction_policy,
                                       bool(volatile))
    if boundary_check or padding_option:
        raise ArgumentError("boundary_check and padding_option apply only to block pointers",
                            hint="use mask= with a tile of pointers")
    return _sem.load(_tensor(_sem, pointer), mask, other, cache_modifier, eviction_policy, bool(volatile))


@builtin
def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: str = "",
          eviction_policy: str = "", _sem: Any = None) -> None:
    """Store a tile through a tile of pointers; masked-off lanes write nothing. Cache hints as in
    Triton: cache_modifier '.wb' (default), '.cg' (L2 only), '.cs' (streaming) or '.wt' (write
    through); eviction_policy 'evict_first' or 'evict_last'. `tl.store(out_ptr + offs, y, mask=offs < n)`."""
    if _sem.gen.is_block_ptr(pointer):
        return _sem.gen.block_ptr_store(pointer, value, boundary_check, cache_modifier, eviction_policy)
    if boundary_check:
        raise ArgumentError("boundary_check applies only to block pointers", hint="use mask=")
    _sem.store(_tensor(_sem, pointer), value, mask, cache_modifier, eviction_policy)
    return None


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any,
                   _sem: Any = None) -> Any:
    """A pointer to a 2-D (or N-D) block of a strided tensor; load/store with boundary_check.
    `p = tl.make_block_ptr(a_ptr, (M, K), (sk_m, sk_k), (pid_m * BM, 0), (BM, BK), (1, 0))`."""
    return _sem.gen.make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base: Any, offsets: Any, _sem: Any = None) -> Any:
    """Move a block pointer by `offsets` elements per dimension. `p = tl.advance(p, (0, BK))`."""
    return _sem.gen.advance(base, offsets)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: str = "zero",
                           _sem: Any = None) -> Any:
    """A tiled view of a strided tensor, read and written block by block with bounds checks.
    `d = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN]); x = d.load([pid * BM, 0])`."""
    return _sem.gen.make_tensor_descriptor(base, shape, strides, block_shape, str(padding_option))


@builtin
def load_tensor_descriptor(desc: Any, offsets: Any, _sem: Any = None) -> Tensor:
    """The block of `desc` at element `offsets`; outside the tensor reads 0 (or NaN). `desc.load([i, 0])`."""
    return _sem.gen.load_tensor_descriptor(desc, offsets)


@builtin
def store_tensor_descriptor(desc: Any, offsets: Any, value: Any, _sem: Any = None) -> None:
    """Store a block through `desc` at `offsets`; nothing outside the tensor is written. `desc.store([i, 0], y)`."""
    _sem.gen.store_tensor_descriptor(desc, offsets, value)


@builtin
def atomic_tensor_descriptor(desc: Any, kind: str, offsets: Any, value: Any, _sem: Any = None) -> None:
    """An atomic (add, min, max, and, or, xor) of `value` into the block of `desc` at `offsets`; nothing
    outside the tensor is touched. `desc.atomic_add([i, 0], partial)`."""
    _sem.gen.atomic_tensor_descriptor(desc, str(kind), offsets, value)


# ------------------------------------------------------------------------- elementwise
@builtin
def to_tensor(x: Any, _sem: Any = None) -> Tensor:
    """A number as a 0-d tensor (int32/int64/float32 by value); a tensor unchanged."""
    return _tensor(_sem, x)


@builtin
def add(x: Any, y: Any, sanitize_overflow: bool = True, _sem: Any = None) -> Tensor:
    """x + y. `tl.add(a, b)`."""
    return _sem.add(x, y)


@builtin
def sub(x: Any, y: Any, sanitize_overflow: bool = True, _sem: Any = None) -> Tensor:
    """x - y. `tl.sub(a, b)`."""
    return _sem.sub(x, y)


@builtin
def mul(x: Any, y: Any, sanitize_overflow: bool = True, _sem: Any = None) -> Tensor:
    """x * y. `tl.mul(a, b)`."""
    return _sem.mul(x, y)


@builtin
def where(condition: Any, x: Any, y: Any, _sem: Any = None) -> Tensor:
    """Elementwise select: x where condition else y (both sides are evaluated).
    `tl.where(offs < n, x, 0.0)`."""
    return _sem.where(condition, x, y)


@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: str | None = None, bitcast: bool = False,
         _sem: Any = None) -> Tensor:
    """Convert to `dtype` (value conversion, or bit reinterpretation with bitcast=True).
    `tl.cast(x, tl.float16)`."""
    return _sem.cast(_tensor(_sem, input), _dtype(_scalar(dtype)), bool(bitcast), fp_downcast_rounding)


@builtin
def to(input: Any, dtype: Any, fp_downcast_rounding: str | None = None, bitcast: bool = False,
       _sem: Any = None) -> Tensor:
    """Method form of cast: `x.to(tl.float32)`."""
    return _sem.cast(_tensor(_sem, input), _dtype(_scalar(dtype)), bool(bitcast), fp_downcast_rounding)


@builtin
def maximum(x: Any, y: Any, propagate_nan: str = PropagateNan.NONE, _sem: Any = None) -> Tensor:
    """Elementwise maximum. `tl.maximum(x, 0.0)`."""
    return _sem.minmax("max", x, y, str(propagate_nan))


@builtin
def minimum(x: Any, y: Any, propagate_nan: str = PropagateNan.NONE, _sem: Any = None) -> Tensor:
    """Elementwise minimum. `tl.minimum(x, 1.0)`."""
    return _sem.minmax("min", x, y, str(propagate_nan))


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: str = PropagateNan.NONE, _sem: Any = None) -> Tensor:
    """Clamp floating-point x to [min, max]. `tl.clamp(x, -1.0, 1.0)`."""
    t = _tensor(_sem, x)
    if not t.dtype.is_floating():
        raise DtypeError(f"clamp supports floating point only, got {t.ir_elem}",
                         hint="use tl.minimum(tl.maximum(x, lo), hi) for integers")
    return _sem.minmax("min", _sem.minmax("max", t, min, str(propagate_nan)), max, str(propagate_nan))


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: bool = False, _sem: Any = None) -> Tensor:
    """Floating-point division (approximate unless ieee_rounding). `tl.fdiv(a, b)`."""
    return _sem.fdiv(_tensor(_sem, x), _tensor(_sem, y), bool(ieee_rounding))


@builtin
def div_rn(x: Any, y: Any, _sem: Any = None) -> Tensor:
    """IEEE round-to-nearest division. `tl.div_rn(a, b)`."""
    return _sem.truediv(x, y)


@builtin
def umulhi(x: Any, y: Any, _sem: Any = None) -> Tensor:
    """The high 32 bits of the 64-bit product of two 32-bit integers. `tl.umulhi(a, b)`."""
    return _sem.umulhi(x, y)


@builtin
def fma(x: Any, y: Any, z: Any, _sem: Any = None) -> Tensor:
    """Fused multiply-add x * y + z with one rounding. `tl.fma(a, b, c)`."""
    a, b = _sem.binary_operands(x, y)
    a, c = _sem.binary_operands(a, z)
    a, b = _sem.broadcast_pair(a, b)
    b, c = _sem.broadcast_pair(b, c)
    a, c = _sem.broadcast_pair(a, c)
    b = _sem.cast(b, a.ir_elem)
    return _sem.math("fma", a, b, c)


def _unary_float(fn: str, doc: str) -> Any:
    def impl(x: Any, _sem: Any = None) -> Tensor:
        return _sem.float_math(fn, x)

    impl.__name__ = impl.__qualname__ = fn
    impl.__doc__ = doc
    return builtin(impl)


exp = _unary_float("exp", "e**x, elementwise. `tl.exp(x - m)`.")
exp2 = _unary_float("exp2", "2**x, elementwise. `tl.exp2(x * 1.4426950408889634)`.")
log = _unary_float("log", "Natural logarithm. `tl.log(x)`.")
log2 = _unary_float("log2", "Base-2 logarithm. `tl.log2(x)`.")
sqrt = _unary_float("sqrt", "Square root (approximate on GPUs). `tl.sqrt(var + eps)`.")
sqrt_rn = _unary_float("sqrt_rn", "Correctly rounded square root. `tl.sqrt_rn(x)`.")
rsqrt = _unary_float("rsqrt", "1 / sqrt(x). `tl.rsqrt(var + eps)`.")
sin = _unary_float("sin", "Sine. `tl.sin(x)`.")
cos = _unary_float("cos", "Cosine. `tl.cos(x)`.")
erf = _unary_float("erf", "The error function. `tl.erf(x / 1.41421356)`.")
floor = _unary_float("floor", "Round down. `tl.floor(x)`.")
ceil = _unary_float("ceil", "Round up. `tl.ceil(x)`.")


@builtin
def abs(x: Any, _sem: Any = None) -> Tensor:
    """Absolute value (integers and floats). `tl.abs(x)`."""
    t = _tensor(_sem, x)
    if t.dtype.is_int_unsigned():
        return t
    return _sem.math("abs", t)


# ------------------------------------------------------------------------- shapes
@builtin
def trans(input: Any, *dims: Any, _sem: Any = None) -> Tensor:
    """Transpose: swap the last two axes (a batched 2-D transpose), or permute by `dims`.
    `tl.trans(b)`, `tl.trans(x, (2, 0, 1))`."""
    t = _tensor(_sem, input)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if not dims:
        n = len(t.shape)
        if n < 2:
            raise ShapeError(f"trans without dims needs a tile of rank 2 or more, got {list(t.shape)}")
        dims = (*range(n - 2), n - 1, n - 2)
    return _sem.permute(t, [int(d) for d in dims])


@builtin
def permute(input: Any, *dims: Any, _sem: Any = None) -> Tensor:
    """Reorder dimensions. `tl.permute(x, (2, 0, 1))`."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _sem.permute(_tensor(_sem, input), [int(d) for d in dims])


@builtin
def reshape(input: Any, *shape: Any, can_reorder: bool = False, _sem: Any = None) -> Tensor:
    """Reshape (same number of elements, row-major order). `tl.reshape(x, (M * N,))`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return _sem.reshape(_tensor(_sem, input), _shape(shape))


@builtin
def view(input: Any, *shape: Any, _sem: Any = None) -> Tensor:
    """Like reshape; the element order may change (here it never does). `x.view(M * N)`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return _sem.reshape(_tensor(_sem, input), _shape(shape))


@builtin
def expand_dims(input: Any, axis: Any, _sem: Any = None) -> Tensor:
    """Insert a size-1 axis (or several). `tl.expand_dims(x, 0)`."""
    t = _tensor(_sem, input)
    axes = [int(a) for a in axis] if isinstance(axis, (tuple, list)) else [int(axis)]
    rank = len(t.shape) + len(axes)
    norm = []
    for a in axes:
        if not -rank <= a < rank:
            raise ShapeError(f"invalid axis {a}. Expected {-rank} <= axis < {rank}")
        norm.append(a + rank if a < 0 else a)
    if len(set(norm)) != len(norm):
        raise ShapeError(f"expand_dims received duplicate axes, normalized axes = {norm}")
    for a in sorted(norm):
        t = _sem.expand_dims(t, a)
    return t


@builtin
def broadcast_to(input: Any, *shape: Any, _sem: Any = None) -> Tensor:
    """Broadcast to `shape`. `tl.broadcast_to(x[None, :], (M, N))`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return _sem.broadcast_to(_tensor(_sem, input), _shape(shape))


@builtin
def broadcast(input: Any, other: Any, _sem: Any = None) -> tuple[Tensor, Tensor]:
    """Broadcast two tiles to a common shape. `a, b = tl.broadcast(a, b)`."""
    return _sem.broadcast_pair(_tensor(_sem, input), _tensor(_sem, other))


@builtin
def join(a: Any, b: Any, _sem: Any = None) -> Tensor:
    """Stack two tiles along a new last axis of size 2. `tl.join(lo, hi)`."""
    return _sem.join(_tensor(_sem, a), _tensor(_sem, b))


@builtin
def split(a: Any, _sem: Any = None) -> tuple[Tensor, Tensor]:
    """Split a tile whose last axis has size 2 into two. `lo, hi = tl.split(x)`."""
    return _sem.split(_tensor(_sem, a))


@builtin
def cat(input: Any, other: Any, can_reorder: bool = False, dim: int = 0, _sem: Any = None) -> Tensor:
    """Concatenate along axis `dim` (default 0). `tl.cat(a, b, can_reorder=True)`."""
    a, b = _tensor(_sem, input), _tensor(_sem, other)
    rank = len(a.shape)
    d = _const_int(dim, "dim")
    d = d + rank if d < 0 else d
    if not 0 <= d < max(rank, 1):
        raise ShapeError(f"cat dim {dim} out of range for tiles of rank {rank}")
    if d == 0:
        return _sem.cat(a, b)
    perm = [d] + [i for i in range(rank) if i != d]
    inverse = [perm.index(i) for i in range(rank)]
    return _sem.permute(_sem.cat(_sem.permute(a, perm), _sem.permute(b, perm)), inverse)


@builtin
def dot(input: Any, other: Any, acc: Any = None, input_precision: str | None = None,
        allow_tf32: bool | None = None, max_num_imprecise_acc: int | None = None,
        out_dtype: Any = None, *, trans_a: Any = None, trans_b: Any = None, _sem: Any = None) -> Tensor:
    """Matrix product of two tiles (M,K)@(K,N), accumulating in fp32 (int32 for int8).
    `acc = tl.dot(a, b, acc)`. `trans_a`/`trans_b` (Triton 2.0) are refused, as Triton refuses them
    today: the error shows the rewrite with `tl.trans`."""
    if trans_a is not None or trans_b is not None:
        raise ArgumentError("tl.dot no longer takes trans_a/trans_b (removed after Triton 2.0)",
                            hint=_dot_trans_hint(trans_a, trans_b))
    if input_precision is None and allow_tf32 is not None:
        input_precision = "tf32" if allow_tf32 else "ieee"
    od = _dtype(out_dtype) if out_dtype is not None else T.fp32
    assert isinstance(od, T.ScalarType)
    a = acc if acc is None else _tensor(_sem, acc)
    return _sem.dot(_tensor(_sem, input), _tensor(_sem, other), a, input_precision, od)


@builtin
def dot_scaled(lhs: Any, lhs_scale: Any, lhs_format: str, rhs: Any, rhs_scale: Any, rhs_format: str,
               acc: Any = None, fast_math: bool = False, lhs_k_pack: bool = True, rhs_k_pack: bool = True,
               out_dtype: Any = None, _sem: Any = None) -> Tensor:
    """Matrix product of microscaled (OCP MX) tiles, (M,K)@(K,N) in float32. Formats: 'e2m1' (fp4, two per
    uint8 byte, the first in the low 4 bits, packed along K; lhs_k_pack/rhs_k_pack=False: along M/N),
    'e4m3' and 'e5m2' (fp8 as uint8 or tl.float8e4nv/tl.float8e5), 'bf16', 'fp16'. A scale is a uint8
    e8m0 tile, 2^(s-127) per 32 elements along K: lhs_scale [M, K//32], rhs_scale [N, K//32] (not
    transposed), or None; s == 255 is NaN (fast_math=True skips that check). Each operand is upcast to
    bfloat16 (float16 if either format is 'fp16'), scaled, and multiplied by tl.dot; on every target.
    `acc = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e4m3", acc)`."""
    od = _dtype(out_dtype, "out_dtype") if out_dtype is not None else T.fp32
    if od != T.fp32:
        raise DtypeError(f"tl.dot_scaled out_dtype must be tl.float32, got {od}",
                         hint="leave out_dtype out and cast the result with .to(...)")
    return _sem.dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc, fast_math,
                           lhs_k_pack, rhs_k_pack)


def _dot_trans_hint(trans_a: Any, trans_b: Any) -> str:
    if not trans_a and not trans_b:  # False is what 2.0 did without them
        return "drop the trans_a=/trans_b= arguments"
    a = "tl.trans(a)" if trans_a else "a"
    b = "tl.trans(b)" if trans_b else "b"
    return f"transpose the operand instead: tl.dot({a}, {b})"


# ------------------------------------------------------------------------- reductions
@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False, _sem: Any = None) -> Any:
    """Reduce along `axis` with a @jit combine function (axis=None: all elements).
    `tl.reduce(x, 0, my_combine)`."""
    return _sem.gen.reduce(input, axis, combine_fn, bool(keep_dims))


@builtin
def associative_scan(input: Any, axis: Any, combine_fn: Any, reverse: bool = False,
                     _sem: Any = None) -> Any:
    """Inclusive scan along `axis` with a @jit associative combine function.
    `tl.associative_scan(x, 0, add)`."""
    return _sem.gen.scan(input, int(axis), combine_fn, bool(reverse))


@builtin
def item(input: Any, _sem: Any = None) -> Tensor:
    """The element of a one-element tile, as a scalar. `n = tl.full((1,), 0, tl.int32).item()`."""
    t = _tensor(_sem, input)
    if not t.is_tile():
        return t
    if t.numel != 1:
        raise ShapeError(f"item() needs a tile of one element, got shape {list(t.shape)}")
    if len(t.shape) != 1:
        t = _sem.reshape(t, [1])
    # A reduction over one element: its combine function is never applied.
    region = Block()
    a = region.add_arg(t.ir_elem)
    region.add_arg(t.ir_elem)
    with _sem.b.at(region):
        _sem.b.create("yield", [a], [])
    return Tensor(_sem.b.create("reduce", [t.handle], [t.ir_elem], {"axis": 0}, [region]).results[0])


@builtin
def histogram(input: Any, num_bins: int, mask: Any = None, _sem: Any = None) -> Tensor:
    """Count values in [0, num_bins) of a 1-D int tile into num_bins bins. `tl.histogram(x, 64)`."""
    t = _tensor(_sem, input)
    n = _const_int(num_bins, "num_bins")
    if len(t.shape) != 1 or not t.dtype.is_int():
        raise ShapeError("histogram needs a 1-D integer tile")
    ops = [t.handle]
    if mask is not None:
        m = _sem.broadcast_to(_sem.cast(_tensor(_sem, mask), T.i1), t.shape)
        ops.append(m.handle)
    return Tensor(_sem.b.value("histogram", ops, T.TileType((n,), T.i32)))


@builtin
def gather(src: Any, index: Any, axis: int, _sem: Any = None) -> Tensor:
    """out[i][j] = src[index[i][j]][j] for axis 0 (similarly for other axes). `tl.gather(x, idx, 0)`."""
    s, i = _tensor(_sem, src), _tensor(_sem, index)
    ax = _const_int(axis, "axis")
    if len(s.shape) != len(i.shape) or not i.dtype.is_int():
        raise ShapeError("gather needs src and an integer index of the same rank")
    return Tensor(_sem.b.value("gather", [s.handle, i.handle], T.TileType(i.shape, s.ir_elem), axis=ax))


@builtin
def sort(x: Any, dim: Any = None, descending: Any = False, _sem: Any = None) -> Tensor:
    """Sort along `dim` (only the last dimension; the default). `tl.sort(x, descending=True)`."""
    t = _tensor(_sem, x)
    if not t.is_tile():
        return t
    rank = len(t.shape)
    d = rank - 1 if dim is None else _const_int(dim, "dim")
    if d < 0:
        d += rank
    if d != rank - 1:
        raise ShapeError(f"sort supports only the last dimension ({rank - 1}), got dim={dim}",
                         hint="permute the tile so the sorted dimension is last")
    return Tensor(_sem.b.value("sort", [t.handle], t.type, axis=d, descending=bool(descending)))


# ------------------------------------------------------------------------- atomics
def _atomic(kind: str, doc: str) -> Any:
    def impl(pointer: Any, val: Any, mask: Any = None, sem: str | None = None, scope: str | None = None,
             _sem: Any = None) -> Tensor:
        return _sem.atomic(kind, _tensor(_sem, pointer), val, mask, sem, scope)

    impl.__name__ = impl.__qualname__ = f"atomic_{kind}"
    impl.__doc__ = doc
    return builtin(impl)


atomic_add = _atomic("add", "Atomically add; returns the old values. `tl.atomic_add(p + offs, x, mask=m)`.")
atomic_max = _atomic("max", "Atomic maximum; returns the old values. `tl.atomic_max(p, x)`.")
atomic_min = _atomic("min", "Atomic minimum; returns the old values. `tl.atomic_min(p, x)`.")
atomic_and = _atomic("and", "Atomic bitwise and. `tl.atomic_and(p, x)`.")
atomic_or = _atomic("or", "Atomic bitwise or. `tl.atomic_or(p, x)`.")
atomic_xor = _atomic("xor", "Atomic bitwise xor. `tl.atomic_xor(p, x)`.")
atomic_xchg = _atomic("xchg", "Atomic exchange; returns the old values. `tl.atomic_xchg(lock, 0)`.")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: str | None = None, scope: str | None = None,
               _sem: Any = None) -> Tensor:
    """Compare-and-swap: store val where *pointer == cmp; returns the old value.
    `while tl.atomic_cas(lock, 0, 1) == 1: pass`."""
    return _sem.atomic_cas(_tensor(_sem, pointer), cmp, val, sem, scope)


# ------------------------------------------------------------------------- compile-time
@builtin
def static_assert(cond: Any, msg: str = "", _sem: Any = None) -> None:
    """Fail compilation unless the compile-time condition holds. `tl.static_assert(BLOCK >= 16)`."""
    if isinstance(cond, Tensor):
        raise ConstexprError("static_assert needs a compile-time condition",
                             hint="use tl.device_assert for runtime checks")
    if not cond:
        # deferred: compiler.frontend's __init__ loads the code generator, which needs this module
        from ..frontend.limits import bounded_str_source

        msg = str(bounded_str_source(msg)) if msg else ""
        raise ArgumentError(f"static_assert failed: {msg}" if msg else "static_assert failed")


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n", _sem: Any = None) -> None:
    """Print compile-time values while compiling. `tl.static_print(BLOCK)`."""
    # deferred: compiler.frontend's __init__ loads the code generator, which needs this module
    from ..frontend.limits import bounded_str_source

    sys.stderr.write(str(sep).join(str(bounded_str_source(v)) for v in values) + str(end))


@builtin
def device_assert(cond: Any, msg: str = "", mask: Any = None, _sem: Any = None) -> None:
    """Check a runtime condition (active in debug mode). `tl.device_assert(x >= 0, "negative")`."""
    if not _sem.gen.options.debug:
        return
    c = _tensor(_sem, cond)
    if mask is not None:
        c = _sem.logical("or", c, _sem.not_(mask))
    _sem.b.create("assert", [_sem.cast(c, T.i1).handle], [], {"msg": str(msg)})


@builtin
def device_print(prefix: str, *args: Any, hex: bool = False, _sem: Any = None) -> None:
    """Print runtime values from the kernel. `tl.device_print("x", x)`."""
    vals = [_tensor(_sem, a).handle for a in args]
    _sem.b.create("print", vals, [], {"prefix": str(prefix), "hex": bool(hex)})


def _hint(x: Any, _sem: Any, name: str, values: Any) -> Any:
    """Record the promise on the op that computes `x` (attribute `axis_hints`, read by
    passes/axis_info.py): one value per dim, or one for every dim. Values that are not powers of
    two promise their largest power-of-two factor."""
    t = _tensor(_sem, x)
    vals = values if isinstance(values, (list, tuple)) else [values]
    try:
        ints = [int(v.value if hasattr(v, "value") else v) for v in vals]
    except (TypeError, ValueError):
        raise ArgumentError(f"tl.{name} takes constant integers, got {values!r}",
                            hint=f"write tl.{name}(x, 16) or tl.{name}(x, [1, 16]) with compile-time values") from None
    rank = max(1, len(t.shape))
    if len(ints) == 1:
        ints = ints * rank
    if len(ints) != rank or any(i < 1 for i in ints):
        raise ArgumentError(f"tl.{name} needs one positive value per dim of a {rank}-D value, got {ints}",
                            hint=f"give {rank} values, or one for every dim")
    op = t.handle.op
    if op is not None:
        kept = {k: v for k, v in op.attrs.get("axis_hints", ())}
        kept[name] = tuple(i & -i for i in ints)
        op.attrs["axis_hints"] = tuple(sorted(kept.items()))
    return t


@builtin
def multiple_of(input: Any, values: Any, _sem: Any = None) -> Any:
    """Promise each value is a multiple of `values` (an optimisation hint). `tl.multiple_of(offs, 16)`."""
    return _hint(input, _sem, "multiple_of", values)


@builtin
def max_contiguous(input: Any, values: Any, _sem: Any = None) -> Any:
    """Promise runs of `values` consecutive values (a hint). `tl.max_contiguous(offs, BLOCK)`."""
    return _hint(input, _sem, "max_contiguous", values)


@builtin
def max_constancy(input: Any, values: Any, _sem: Any = None) -> Any:
    """Promise runs of `values` equal values (a hint)."""
    return _hint(input, _sem, "max_constancy", values)


@builtin
def assume(cond: Any, _sem: Any = None) -> None:
    """Let the compiler assume a runtime condition holds. `tl.assume(n > 0)`."""
    c = _tensor(_sem, cond)
    _sem.b.create("assume", [_sem.cast(c, T.i1).handle], [])


@builtin
def debug_barrier(_sem: Any = None) -> None:
    """Synchronise all threads of the program (a no-op on the CPU backend)."""
    _sem.b.create("barrier", [], [])


@builtin
def inline_asm_elementwise(asm: str, constraints: str, args: Any, dtype: Any, is_pure: bool, pack: int,
                           _sem: Any = None) -> Any:
    """Elementwise inline assembly (GPU backends only). `tl.inline_asm_elementwise("mov.b32 $0, $1;",
    "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)`; a tuple dtype gives a tuple of results.

    Each call sees `pack` consecutive elements (along the last dim) of one thread. Which lane and
    register hold which element is the compiler's layout for the result's shape (its vector width
    follows the loads of that shape), as in Triton: warp-collective instructions (mma.sync, shfl)
    that assume a lane mapping are safe only with a last dim of 1 or a pack that spans it.
    is_pure=False keeps the asm (and its order) even when its results are unused."""
    if not on_gpu(str(_sem.gen.options.target)):
        raise ArgumentError("inline_asm_elementwise is GPU assembly and cannot run on the CPU backend",
                            hint="write the operation with tl functions, or run on a CUDA tensor")
    vals = [_tensor(_sem, a) for a in (args if isinstance(args, (list, tuple)) else [args])]
    for i in range(1, len(vals)):  # broadcast every argument to one shape
        vals[0], vals[i] = _sem.broadcast_pair(vals[0], vals[i])
    shape = vals[0].shape if vals else ()
    vals = [_sem.broadcast_to(v, shape) for v in vals]
    dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype]
    rtypes = [T.TileType(tuple(shape), _dtype(d)) if shape else _dtype(d) for d in dtypes]
    attrs = {"asm": str(getattr(asm, "value", asm)), "constraints": str(getattr(constraints, "value", constraints)),
             "pure": bool(getattr(is_pure, "value", is_pure)), "pack": int(getattr(pack, "value", pack))}
    op = _sem.b.create("inline_asm", [v.handle for v in vals], rtypes, attrs)
    outs = tuple(Tensor(r) for r in op.results)
    return outs if isinstance(dtype, (list, tuple)) else outs[0]


def dtype_of(x: Any) -> dtype:
    return x.dtype
