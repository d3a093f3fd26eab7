"""What kernels read of block pointers and tensor descriptors, as Triton gives it: a block
pointer's `type` and `dtype` are pointer_type(block_type(dtype, block_shape)), so
`p.dtype.element_ty` is the block's type (a cast to it casts to its element type) and
`p.dtype.element_ty.element_ty` the element dtype; `p.advance(...)` is a method. Descriptors add
the atomics (`desc.atomic_add(offsets, block)` and min, max, and, or, xor)."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit
from compiler.errors import CompilationError


# ---------------------------------------------------------------- a block-pointer matmul, library style
@jit
def _bp_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_bp = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_bp = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N), (1, 0))
    c_bp = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, stride_cn), (pid_m * BLOCK_M, pid_n * BLOCK_N),
                             (BLOCK_M, BLOCK_N), (1, 0))
    tl.static_assert(a_bp.type.element_ty.shape == [BLOCK_M, BLOCK_K])
    tl.static_assert(a_bp.dtype.element_ty.element_ty == a_ptr.dtype.element_ty)
    tl.static_assert(c_bp.dtype.is_ptr() and not c_bp.dtype.is_block() and c_bp.dtype.element_ty.is_block())
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_bp, boundary_check=(0, 1))
        b = tl.load(b_bp, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b, input_precision="ieee")
        a_bp = a_bp.advance((0, BLOCK_K))
        b_bp = tl.advance(b_bp, (BLOCK_K, 0))
    if c_bp.dtype.element_ty.element_ty == tl.float32:
        c_bp.store(acc, boundary_check=(0, 1))
    else:
        tl.store(c_bp, acc.to(c_bp.dtype.element_ty), boundary_check=(0, 1))


@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (37, 45, 70), (64, 23, 129)])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.float16, torch.float16), (torch.bfloat16, torch.float32),
                                             (torch.float32, torch.bfloat16)])
def test_matmul_through_block_pointers_reads_their_types(M: int, N: int, K: int, dtype: torch.dtype,
                                                         out_dtype: torch.dtype) -> None:
    a, b = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype)
    c = torch.full((M, N), float("nan"), dtype=out_dtype)
    bm, bn, bk = 16, 32, 16
    _bp_matmul[(cdiv(M, bm), cdiv(N, bn))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    expect = (a.double() @ b.double()).to(out_dtype)
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4}[out_dtype]
    torch.testing.assert_close(c, expect, rtol=tol, atol=tol * 4)


# ---------------------------------------------------------------- descriptor atomics
@jit
def _split_k_sum(x_ptr, out_ptr, R, C, ROWS_PER: tl.constexpr, BLOCK_C: tl.constexpr, OP: tl.constexpr):
    """Program (i, j) reduces ROWS_PER rows of column block j and adds (or maxes) the result into out."""
    pid_r, pid_c = tl.program_id(0), tl.program_id(1)
    xd = tl.make_tensor_descriptor(x_ptr, [R, C], [C, 1], [ROWS_PER, BLOCK_C])
    od = tl.make_tensor_descriptor(out_ptr, [1, C], [C, 1], [1, BLOCK_C])
    tl.static_assert(od.block_type.element_ty == od.dtype and od.block_type.shape == [1, BLOCK_C])
    x = xd.load([pid_r * ROWS_PER, pid_c * BLOCK_C])
    if OP == "add":
        od.atomic_add([0, pid_c * BLOCK_C], tl.sum(x, axis=0, keep_dims=True))
    else:
        od.atomic_max([0, pid_c * BLOCK_C], tl.max(x, axis=0, keep_dims=True))


@pytest.mark.parametrize("R,C", [(8, 4), (37, 52), (100, 132)])
@pytest.mark.parametrize("op", ["add", "max"])
def test_descriptor_atomics_touch_only_the_tensor(R: int, C: int, op: str) -> None:
    rows, block = 8, 16
    x = torch.randn(R, C)
    guard = torch.full((C + 16,), 123.0)  # the 16 elements past out must stay as they are
    out = guard[:C]
    out.fill_(0.0 if op == "add" else -float("inf"))
    _split_k_sum[(cdiv(R, rows), cdiv(C, block))](x, out, R, C, ROWS_PER=rows, BLOCK_C=block, OP=op)
    expect = x.sum(0) if op == "add" else x.max(0).values
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)
    assert guard[C:].eq(123.0).all()


# ---------------------------------------------------------------- what is not there
@jit
def _bp_attribute(x_ptr, WHICH: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (16,), (0,))
    if WHICH == "block":
        tl.static_print(p.dtype.block)
    elif WHICH == "private":
        tl.static_print(p._replace)
    else:
        tl.static_print(p.offsets)


@pytest.mark.parametrize("which", ["block", "private", "offsets"])
def test_block_pointers_expose_only_tritons_attributes(which: str) -> None:
    with pytest.raises(CompilationError):
        _bp_attribute[(1,)](torch.zeros(16), WHICH=which)


@jit
def _bad_descriptor_atomic(x_ptr, KIND: tl.constexpr):
    d = tl.make_tensor_descriptor(x_ptr, [16], [1], [16])
    tl.builtins.atomic_tensor_descriptor(d, KIND, [0], tl.zeros([16], dtype=tl.float32))


def test_descriptor_atomics_are_the_listed_ones() -> None:
    with pytest.raises(CompilationError, match="no atomic_xchg"):
        _bad_descriptor_atomic[(1,)](torch.zeros(16), KIND="xchg")
