"""The standard library of the language, written in the language itself (compiled, inlined)."""

from __future__ import annotations

from ..runtime.function import device_function
from . import builtins as _b
from .core import bfloat16, constexpr, float16, float32, int32, static_range, uint32

__all__ = [
    "cdiv", "sigmoid", "softmax", "zeros_like", "sum", "max", "min", "argmax", "argmin", "xor_sum",
    "reduce_or", "cumsum", "cumprod", "ravel", "swizzle2d", "interleave", "flip",
]

reduce = _b.reduce
associative_scan = _b.associative_scan
where = _b.where
zeros = _b.zeros
exp = _b.exp
maximum = _b.maximum
minimum = _b.minimum
reshape = _b.reshape
join = _b.join
static_assert = _b.static_assert


def _log2(i: int | constexpr) -> int:
    """floor(log2(i)), 0 for i <= 1: the exponent of a power-of-two block size (Triton's private helper
    of the same name, which libraries import). Callable on the host and, with compile-time numbers, in
    kernels."""
    n = int(i.value if isinstance(i, constexpr) else i)
    return 0 if n <= 1 else n.bit_length() - 1


def _is_power_of_two(i: int | constexpr) -> bool:
    """Whether `i` is a power of two (Triton's private helper of the same name; host and kernels)."""
    n = int(i.value if isinstance(i, constexpr) else i)
    return n > 0 and n & (n - 1) == 0


@device_function
def cdiv(x, div):
    """Ceiling division of integers: `tl.cdiv(n, BLOCK)`."""
    return (x + div - 1) // div


@device_function
def sigmoid(x):
    """1 / (1 + exp(-x)). `tl.sigmoid(x)`."""
    return 1 / (1 + exp(-x))


@device_function
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """Softmax along `dim` (default: the last). `tl.softmax(x)`."""
    if dim is None:
        _dim: constexpr = 0
    else:
        _dim: constexpr = dim
    z = x - max(x, _dim, keep_dims=True)
    num = exp(z)
    den = sum(num, _dim, keep_dims=True)
    return num / den


@device_function
def zeros_like(input):
    """Zeros with the shape and dtype of `input`. `tl.zeros_like(x)`."""
    return zeros(input.shape, input.dtype)


@device_function
def _sum_combine(a, b):
    return a + b


@device_function
def sum(input, axis=None, keep_dims=False, dtype: constexpr = None):
    """Sum along `axis` (None: all). Small integers accumulate in 32 bits. `tl.sum(x, axis=0)`."""
    if dtype is not None:
        input = input.to(dtype)
    elif input.dtype.is_int_signed() and input.dtype.int_bitwidth < 32:
        input = input.to(int32)
    elif input.dtype.is_int_unsigned() and input.dtype.int_bitwidth < 32:
        input = input.to(uint32)
    elif input.dtype == bfloat16 or input.dtype == float16:
        # Accumulate in fp32 and round once: a GPU adds in a tree, which for 16-bit floats is far
        # more exact than one long chain of 16-bit additions (1024 ones sum to 1024, not 256).
        return reduce(input.to(float32), axis, _sum_combine, keep_dims=keep_dims).to(input.dtype)
    return reduce(input, axis, _sum_combine, keep_dims=keep_dims)


@device_function
def _max_combine(a, b):
    return maximum(a, b)


@device_function
def _min_combine(a, b):
    return minimum(a, b)


@device_function
def _skip_nan(take1, value1, index1, value2, index2):
    # NaN is ignored, as by tl.max / tl.min: a number beats NaN; of two NaNs the first index wins.
    if value1.dtype.is_floating():
        nan1 = value1 != value1
        nan2 = value2 != value2
        take1 = where(nan1 | nan2, (nan2 & ~nan1) | (nan1 & nan2 & (index1 < index2)), take1)
    return take1


@device_function
def _argmax_combine(value1, index1, value2, index2):
    gt = value1 > value2
    eq = value1 == value2
    lt_i = index1 < index2
    take1 = _skip_nan(gt | (eq & lt_i), value1, index1, value2, index2)
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _argmin_combine(value1, index1, value2, index2):
    lt = value1 < value2
    eq = value1 == value2
    lt_i = index1 < index2
    take1 = _skip_nan(lt | (eq & lt_i), value1, index1, value2, index2)
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _with_indices(input, axis, combine_fn: constexpr, keep_dims):
    if axis is None:
        flat = reshape(input, input.numel)
        idx = _b.arange(0, input.numel)
        return reduce((flat, idx), 0, combine_fn, keep_dims=False)
    else:
        idx = _b.arange(0, input.shape[axis])
        idx = _expand_index(idx, axis, len(input.shape))
        idx = _b.broadcast_to(idx, input.shape)
        return reduce((input, idx), axis, combine_fn, keep_dims=keep_dims)


@device_function
def _expand_index(idx, axis: constexpr, rank: constexpr):
    # static_range: each expand_dims changes idx's shape, which a runtime loop cannot carry.
    for _ in static_range(0, axis):
        idx = _b.expand_dims(idx, 0)
    for i in static_range(axis + 1, rank):
        idx = _b.expand_dims(idx, i)
    return idx


@device_function
def _promote_small(input):
    if input.dtype == bfloat16:
        input = input.to(float32)
    if input.dtype.primitive_bitwidth < 32:
        if input.dtype.is_floating():
            input = input.to(float32)
        else:
            input = input.to(int32)
    return input


@device_function
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum along `axis`; with return_indices=True also the index of the first maximum.
    `m = tl.max(x, axis=1)`."""
    if return_indices:
        if input.dtype == bfloat16:
            input = input.to(float32)
        return _with_indices(input, axis, _argmax_combine, keep_dims)
    else:
        input = _promote_small(input)
        return reduce(input, axis, _max_combine, keep_dims=keep_dims)


@device_function
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Minimum along `axis`; with return_indices=True also the index of the first minimum.
    `m = tl.min(x, axis=0)`."""
    if return_indices:
        if input.dtype == bfloat16:
            input = input.to(float32)
        return _with_indices(input, axis, _argmin_combine, keep_dims)
    else:
        input = _promote_small(input)
        return reduce(input, axis, _min_combine, keep_dims=keep_dims)


@device_function
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the maximum along `axis` (the first on ties). `i = tl.argmax(x, 0)`."""
    (_, ret) = max(input, axis, return_indices=True, keep_dims=keep_dims)
    return ret


@device_function
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the minimum along `axis` (the first on ties). `i = tl.argmin(x, 0)`."""
    (_, ret) = min(input, axis, return_indices=True, keep_dims=keep_dims)
    return ret


@device_function
def _xor_combine(a, b):
    return a ^ b


@device_function
def xor_sum(input, axis=None, keep_dims=False):
    """Bitwise xor of all values along `axis`. `tl.xor_sum(x, 0)`."""
    static_assert(input.dtype.is_int(), "xor_sum needs an integer tensor")
    return reduce(input, axis, _xor_combine, keep_dims=keep_dims)


@device_function
def _or_combine(a, b):
    return a | b


@device_function
def reduce_or(input, axis, keep_dims=False):
    """Bitwise or along `axis`. `tl.reduce_or(x, 0)`."""
    return reduce(input, axis, _or_combine, keep_dims=keep_dims)


@device_function
def cumsum(input, axis=0, reverse=False, dtype: constexpr = None):
    """Inclusive prefix sum along `axis`. `tl.cumsum(x, 0)`."""
    if input.dtype == bfloat16:  # as in Triton: bf16 scans run in fp32
        input = input.to(float32)
    if dtype is not None:
        input = input.to(dtype)
    elif input.dtype.is_int_signed() and input.dtype.int_bitwidth < 32:
        input = input.to(int32)
    elif input.dtype.is_int_unsigned() and input.dtype.int_bitwidth < 32:
        input = input.to(uint32)
    return associative_scan(input, axis, _sum_combine, reverse)


@device_function
def _prod_combine(a, b):
    return a * b


@device_function
def cumprod(input, axis=0, reverse=False):
    """Inclusive prefix product along `axis`. `tl.cumprod(x, 0)`."""
    if input.dtype == bfloat16:  # as in Triton: bf16 scans run in fp32
        input = input.to(float32)
    return associative_scan(input, axis, _prod_combine, reverse)


@device_function
def ravel(x, can_reorder=False):
    """Flatten to 1-D. `tl.ravel(x)`."""
    return reshape(x, x.numel)


@device_function
def swizzle2d(i, j, size_i, size_j, size_g):
    """Grouped program order: map (i, j) so groups of `size_g` rows share columns (L2 reuse)."""
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    size_g = minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    new_i = off_i + ij % size_g
    new_j = ij // size_g
    return new_i, new_j


@device_function
def interleave(a, b):
    """Interleave two tiles along their last axis: [a0, b0, a1, b1, ...]. `tl.interleave(a, b)`."""
    c = join(a, b)
    if len(c.shape) == 1:
        return c  # two scalars
    if len(c.shape) == 2:
        return reshape(c, c.shape[0] * 2)
    else:
        return reshape(c, c.shape[:-2] + (c.shape[-2] * 2,))


@device_function
def flip(x, dim=None):
    """Reverse the order of elements along `dim` (default: the last). `tl.flip(x)`."""
    if dim is None:
        _dim: constexpr = len(x.shape) - 1
    else:
        _dim: constexpr = dim
    n: constexpr = x.shape[_dim]
    idx = n - 1 - _b.arange(0, n)
    idx = _expand_index(idx, _dim, len(x.shape))
    idx = _b.broadcast_to(idx, x.shape)
    return _b.gather(x, idx, _dim)
