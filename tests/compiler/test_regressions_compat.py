"""Regressions found by running Triton's own test_core.py on Anvil (one test per compiler fix)."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import jit


# ---------------------------------------------------------------- tl.static_range(..., step=)
@jit
def _static_range_step_kw(out_ptr, N: tl.constexpr, STEP: tl.constexpr):
    acc = 0
    for i in tl.static_range(0, N, step=STEP):
        acc += i
    tl.store(out_ptr, acc)


@jit
def _range_step_kw(out_ptr, n, STEP: tl.constexpr):
    acc = 0
    for i in tl.range(0, n, step=STEP, num_stages=2):
        acc += i
    tl.store(out_ptr, acc)


def test_range_step_given_by_keyword() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    _static_range_step_kw[(1,)](out, 100, 7)
    assert out.item() == sum(range(0, 100, 7))
    _range_step_kw[(1,)](out, 50, 3)
    assert out.item() == sum(range(0, 50, 3))


# ---------------------------------------------------------------- a if c else b, c a runtime scalar
@jit
def _ifexp_side_effects(ret_ptr, t_ptr, f_ptr):
    pid = tl.program_id(0)
    tl.store(ret_ptr, tl.load(t_ptr)) if pid % 2 == 0 else tl.store(ret_ptr, tl.load(f_ptr))
    val = 3.5 if pid % 2 == 0 else tl.load(f_ptr)
    tl.store(ret_ptr + 1, val)


def test_conditional_expression_evaluates_only_the_chosen_side() -> None:
    t, f = torch.tensor([3.0]), torch.tensor([1.5])
    ret = torch.zeros(2)
    _ifexp_side_effects[(1,)](ret, t, f)
    assert ret.tolist() == [3.0, 3.5]


# ---------------------------------------------------------------- tensor.item()
@jit
def _item(out_ptr):
    one = tl.full((1,), 7, dtype=tl.int32).item()
    two = tl.full((1, 1), 5, dtype=tl.int64).item()
    tl.store(out_ptr, one + two)


def test_item_of_a_one_element_tile() -> None:
    out = torch.zeros(1, dtype=torch.int64)
    _item[(1,)](out)
    assert out.item() == 12


# ---------------------------------------------------------------- dtypes by Triton name
def test_dtype_from_triton_name() -> None:
    assert tl.dtype("int32") == tl.int32
    assert tl.dtype("fp16") == tl.float16
    assert [tl.dtype(n).name for n in tl.dtype.SINT_TYPES] == tl.dtype.SINT_TYPES
    assert [tl.dtype(n).name for n in tl.dtype.UINT_TYPES] == tl.dtype.UINT_TYPES
    assert [tl.dtype(n).name for n in tl.dtype.STANDARD_FP_TYPES] == tl.dtype.STANDARD_FP_TYPES


# ---------------------------------------------------------------- tensors reinterpreted as another dtype
@jit
def _copy_u8(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.static_assert(x.dtype == tl.uint8)
    tl.store(y_ptr + offs, (x // 2).to(tl.int32))


def test_reinterpreted_tensor_argument() -> None:
    from compiler.triton_compat import reinterpret

    x = torch.tensor([-1, -128, 5, 4], dtype=torch.int8)
    y = torch.zeros(4, dtype=torch.int32)
    _copy_u8[(1,)](reinterpret(x, tl.uint8), y, BLOCK=4)
    assert y.tolist() == [127, 64, 2, 2]


# ---------------------------------------------------------------- -x on floats keeps the sign of zero
@jit
def _neg(x_ptr, y_ptr):
    offs = tl.arange(0, 2)
    tl.store(y_ptr + offs, -tl.load(x_ptr + offs))


def test_negation_preserves_signed_zero() -> None:
    x = torch.tensor([0.0, -0.0])
    y = torch.empty(2)
    _neg[(1,)](x, y)
    assert torch.signbit(y).tolist() == [True, False]


# ---------------------------------------------------------------- x.shape compares equal to a list
@jit
def _shape_as_list(out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    t = r[None, :]
    tl.static_assert(t.shape == [1, N])
    tl.static_assert(t.shape == (1, N))
    tl.static_assert(t.shape + [1] == [1, N, 1])
    tl.static_assert((1,) + t.shape[1:] == (1, N))
    tl.static_assert(tl.sum(r).shape == [])
    tl.store(out_ptr, len(t.shape))


def test_shape_compares_with_lists_and_tuples() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    _shape_as_list[(1,)](out, 8)
    assert out.item() == 2


# ---------------------------------------------------------------- Triton's error wording
@jit
def _float_and(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x & x)


@jit
def _mixed_sign_div(x_ptr, y_ptr):
    tl.store(x_ptr, tl.load(x_ptr) // tl.load(y_ptr))


def test_error_messages_match_triton() -> None:
    from compiler.errors import CompilationError

    with pytest.raises(CompilationError, match="invalid operands of type"):
        _float_and[(1,)](torch.zeros(1))
    with pytest.raises(CompilationError, match="Cannot use .* because they have different signedness"):
        _mixed_sign_div[(1,)](torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.uint32))


# ---------------------------------------------------------------- (number).dtype
@jit
def _number_dtype(out_ptr, BLOCK: tl.constexpr):
    value = 1
    big = 2**40
    half = 0.5
    tl.static_assert(value.dtype == tl.int32)
    tl.static_assert(big.dtype == tl.int64)
    tl.static_assert(half.dtype == tl.float32)
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.full([BLOCK], value=value, dtype=value.dtype))


def test_dtype_of_a_number() -> None:
    out = torch.zeros(4, dtype=torch.int32)
    _number_dtype[(1,)](out, BLOCK=4)
    assert out.tolist() == [1, 1, 1, 1]


# ---------------------------------------------------------------- small fp64 dots
@jit
def _dot_f64(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(x_ptr + m[:, None] * K + k[None, :])
    y = tl.load(y_ptr + k[:, None] * N + n[None, :])
    tl.store(z_ptr + m[:, None] * N + n[None, :], tl.dot(x, y))


def test_fp64_dot_smaller_than_16() -> None:
    x = torch.randn(8, 4, dtype=torch.float64)
    y = torch.randn(4, 8, dtype=torch.float64)
    z = torch.empty(8, 8, dtype=torch.float64)
    _dot_f64[(1,)](x, y, z, M=8, N=8, K=4)
    torch.testing.assert_close(z, x @ y)


# ---------------------------------------------------------------- argmin over 32 elements compiles quickly
@jit
def _min_with_index(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    v, i = tl.min(x, axis=0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_short_index_reduction_compiles_quickly(dtype: torch.dtype) -> None:
    # LLVM used to unroll this 31-step compare/select loop and then optimize it for 4 minutes.
    x = torch.randn(32).mul(100).to(dtype)
    v, i = torch.empty(1, dtype=dtype), torch.empty(1, dtype=torch.int32)
    k = _min_with_index[(1,)](x, v, i, BLOCK=32)
    assert v.item() == x.min().item() and x[i.item()] == x.min()
    assert k.metadata["compile_ms"].get("llvm_opt_ms", 0) < 60_000


# ---------------------------------------------------------------- bf16 atomics
@jit
def _bf16_atomics(x_ptr, mx_ptr, v_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(v_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(x_ptr + offs % 2, v, mask=offs < n)
    tl.atomic_max(mx_ptr + offs * 0, v, mask=offs < n)


def test_bf16_atomic_add_and_max() -> None:
    v = torch.tensor([1.0, 2.0, 3.5, -1.0, 8.0, 0.25], dtype=torch.bfloat16)
    x = torch.zeros(2, dtype=torch.bfloat16)
    mx = torch.full((1,), -100.0, dtype=torch.bfloat16)
    _bf16_atomics[(3,)](x, mx, v, 6, BLOCK=8)
    assert x.float().tolist() == [3 * (1.0 + 3.5 + 8.0), 3 * (2.0 - 1.0 + 0.25)]
    assert mx.item() == 8.0


# ---------------------------------------------------------------- number.to(), scalar[None, :]
@jit
def _number_methods(out_ptr):
    acc = 0
    acc = acc.to(tl.int64)
    for _ in range(0, 3):
        acc += 2**33
    p = out_ptr[None, None, :]
    tl.static_assert(p.shape == [1, 1])
    tl.store(p, tl.full((1, 1), acc, tl.int64))


def test_methods_on_numbers_and_indexing_a_scalar() -> None:
    out = torch.zeros(1, dtype=torch.int64)
    _number_methods[(1,)](out)
    assert out.item() == 3 * 2**33


# ---------------------------------------------------------------- tl.sum of 16-bit floats
@jit
def _sum_bf16(out_ptr):
    x = tl.full((32, 32), 1.0, dtype=tl.bfloat16)
    s = tl.sum(x)
    tl.static_assert(s.dtype == tl.bfloat16)
    tl.store(out_ptr, s)


def test_sum_of_bf16_accumulates_exactly() -> None:
    out = torch.zeros(1, dtype=torch.bfloat16)
    _sum_bf16[(1,)](out)
    assert out.item() == 1024.0


# ---------------------------------------------------------------- types built inside a kernel
@jit
def _ptr_type_in_kernel(out_ptr):
    val = 2**40
    tl.store(out_ptr.to(tl.pointer_type(val.dtype)), val)


def test_pointer_type_constructed_in_a_kernel() -> None:
    out = torch.zeros(1, dtype=torch.int64)
    _ptr_type_in_kernel[(1,)](out.view(torch.float64))
    assert out.item() == 2**40


# ---------------------------------------------------------------- dots: small M/N, several batch axes, trans
@jit
def _dot_small_mn(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(x_ptr + m[:, None] * K + k[None, :])
    y = tl.load(y_ptr + k[:, None] * N + n[None, :])
    tl.store(z_ptr + m[:, None] * N + n[None, :], tl.dot(x, y))


@jit
def _dot_batched(x_ptr, y_ptr, z_ptr):
    x = tl.load(x_ptr + tl.arange(0, 2 * 2 * 16 * 16)).reshape([2, 2, 16, 16])
    y = tl.load(y_ptr + tl.arange(0, 2 * 2 * 16 * 16)).reshape([2, 2, 16, 16])
    z = tl.dot(x, tl.trans(y))
    tl.store(z_ptr + tl.arange(0, 2 * 2 * 16 * 16), z.reshape([2 * 2 * 16 * 16]))


def test_dot_shapes_triton_accepts() -> None:
    x, y = torch.randn(4, 32), torch.randn(32, 8)
    z = torch.empty(4, 8)
    _dot_small_mn[(1,)](x, y, z, M=4, N=8, K=32)
    torch.testing.assert_close(z, x @ y, rtol=1e-4, atol=1e-4)
    a, b = torch.randn(2, 2, 16, 16), torch.randn(2, 2, 16, 16)
    c = torch.empty(2, 2, 16, 16)
    _dot_batched[(1,)](a, b, c)
    torch.testing.assert_close(c, a @ b.transpose(-1, -2), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- argmax/argmin skip NaN
@jit
def _argmax_nan(x_ptr, i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < 3, other=-float("inf"))
    tl.store(i_ptr, tl.argmax(x, axis=0))
    tl.store(i_ptr + 1, tl.argmin(tl.where(offs < 3, x, float("inf")), axis=0))


def test_argmax_argmin_ignore_nan() -> None:
    i = torch.zeros(2, dtype=torch.int32)
    _argmax_nan[(1,)](torch.tensor([3.0, 5.0, float("nan")]), i, BLOCK=4)
    assert i.tolist() == [1, 0]
    _argmax_nan[(1,)](torch.tensor([float("nan"), 6.0, 8.0]), i, BLOCK=4)
    assert i.tolist() == [2, 1]


# ---------------------------------------------------------------- errors worded as Triton words them
@jit
def _expand_dup(x_ptr, N: tl.constexpr):
    t = tl.expand_dims(tl.arange(0, N), (0, -3))
    tl.store(x_ptr + tl.arange(0, N)[None, None, :] + t * 0, 0.0)


@jit
def _expand_bad(x_ptr, N: tl.constexpr):
    tl.expand_dims(tl.arange(0, N), 2)


@jit
def _bad_index(x_ptr):
    x_ptr[10:]


@jit
def _bad_pid(x_ptr):
    tl.program_id(20)


def test_expand_dims_index_and_program_id_errors() -> None:
    from compiler.errors import CompilationError

    x = torch.zeros(8)
    with pytest.raises(CompilationError, match=r"duplicate axes, normalized axes = \[0, 0\]"):
        _expand_dup[(1,)](x, N=8)
    with pytest.raises(CompilationError, match="invalid axis 2"):
        _expand_bad[(1,)](x, N=8)
    with pytest.raises(CompilationError, match="unsupported tensor index"):
        _bad_index[(1,)](x)
    with pytest.raises(CompilationError, match="program_id axis must be 0, 1, or 2 but got 20"):
        _bad_pid[(1,)](x)


# ---------------------------------------------------------------- one-element conditions, hasattr, scalars
@jit
def _one_element_if(x_ptr, p_ptr):
    c = tl.load(x_ptr + tl.arange(0, 1)) > 42
    if c:
        tl.store(x_ptr, 42)
    if (p_ptr is not None) and hasattr(p_ptr, "dtype") and isinstance(p_ptr.dtype, tl.pointer_type) \
            and p_ptr.dtype.element_ty == tl.float32:
        tl.store(p_ptr, 1.5)
    a, b = tl.split(tl.join(tl.load(x_ptr), tl.load(x_ptr) + 1))
    tl.static_assert(a.shape == [])
    z = tl.interleave(a, b)
    tl.static_assert(z.shape == [2])
    tl.store(x_ptr + 1 + tl.arange(0, 2), z)


def test_scalar_conditions_hasattr_and_scalar_split() -> None:
    x = torch.tensor([100, 0, 0], dtype=torch.int32)
    p = torch.zeros(1)
    _one_element_if[(1,)](x, p)
    assert x.tolist() == [42, 42, 43] and p.item() == 1.5
    x = torch.tensor([7, 0, 0], dtype=torch.int32)
    _one_element_if[(1,)](x, None)
    assert x.tolist() == [7, 7, 8]


# ---------------------------------------------------------------- unsupported atomics, overflowing ints
@jit
def _atomic_i8(o_ptr):
    tl.atomic_add(o_ptr, 1)


@jit
def _takes_int(v, o_ptr):
    tl.store(o_ptr, v)


def test_atomic_on_8_bit_ints_and_integer_overflow_are_errors() -> None:
    from compiler.errors import CompilationError

    with pytest.raises(CompilationError, match="atomic_add does not support i8"):
        _atomic_i8[(1,)](torch.zeros(1, dtype=torch.int8))
    o = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(OverflowError):
        _takes_int[(1,)](2**64, o)
    with pytest.raises(OverflowError):
        _takes_int[(1,)](-(2**63) - 1, o)
    _takes_int[(1,)](-(2**63), o)
    assert o.item() == -(2**63)


def test_exponent_bias() -> None:
    assert (tl.float16.exponent_bias, tl.bfloat16.exponent_bias, tl.float32.exponent_bias) == (15, 127, 127)
    assert (tl.float8e4nv.exponent_bias, tl.float8e4b8.exponent_bias, tl.float8e5b16.exponent_bias) == (7, 8, 16)


# ---------------------------------------------------------------- tl.make_tensor_descriptor
@jit
def _desc_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    blk = src.load([pm * BM, pn * BN])
    tl.static_assert(blk.shape == src.block_shape)
    dst.store([pm * BM, pn * BN], blk * 2)


def test_tensor_descriptor_load_store_with_edges() -> None:
    x = torch.randn(37, 45)
    y = torch.full_like(x, float("nan"))
    _desc_copy[(3, 2)](x, y, 37, 45, BM=16, BN=32)
    torch.testing.assert_close(y, x * 2)


# ---------------------------------------------------------------- host TensorDescriptor arguments, tl.cat(dim=)
@jit
def _desc_args(x_desc, y_desc, z_desc, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = x_desc.load([pm * BM, pn * BN])
    y = y_desc.load([pm * BM, pn * BN])
    z = tl.cat(x, y, dim=1)
    z_desc.store([pm * BM, pn * 2 * BN], z)


@pytest.mark.parametrize("debug", [False, True])
def test_host_tensor_descriptors(debug: bool) -> None:
    from compiler.triton_compat.tools.tensor_descriptor import TensorDescriptor

    x, y = torch.randn(40, 48), torch.randn(40, 48)
    z = torch.full((40, 96), float("nan"))
    xd, yd = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    zd = TensorDescriptor.from_tensor(z, [16, 32])
    _desc_args[(3, 3)](xd, yd, zd, BM=16, BN=16, debug=debug)
    want = torch.stack([x.view(40, 3, 16), y.view(40, 3, 16)], dim=2).reshape(40, 96)
    torch.testing.assert_close(z, want)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
