"""Python helpers a kernel calls at compile time, as Triton 3.6 evaluates them: `triton.next_power_of_2`
and `triton.cdiv` on constexprs, `@triton.constexpr_function` and `@tl.constexpr` helpers, and `.value`
of a constexpr number in a @jit helper. A Python kernel runs its helpers as Python; kernel source text
has their bodies evaluated by the frontend (frontend/compiletime.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import cdiv, constexpr_function, jit, next_power_of_2
from compiler.errors import CompilationError
from compiler.runtime.jit import value_token


# ---------------------------------------------------------------- helpers of a Python kernel
@constexpr_function
def _num_warps_for(block: int) -> int:
    """A library's heuristic: warps for a row of `block` elements."""
    warps = 1
    while warps * 256 < block and warps < 16:
        warps *= 2
    return warps


@tl.constexpr
def _rows_per_program(n_cols: int) -> int:
    return 4 if n_cols <= 64 else 1


@jit
def _scale_row(x, SCALE: tl.constexpr):
    # a constexpr argument of a @jit helper: Triton passes constexpr(SCALE), whose .value is SCALE
    return x * SCALE.value


@jit
def _softmax_rows(x_ptr, y_ptr, n_rows, N_COLS: tl.constexpr, SCALE: tl.constexpr):
    BLOCK: tl.constexpr = next_power_of_2(N_COLS)
    ROWS: tl.constexpr = _rows_per_program(N_COLS)
    WARPS: tl.constexpr = _num_warps_for(BLOCK)
    tl.static_assert(WARPS >= 1 and BLOCK >= N_COLS and cdiv(x=BLOCK, y=N_COLS) <= 2)
    cols = tl.arange(0, BLOCK)
    for r in tl.static_range(ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < n_rows:
            x = tl.load(x_ptr + row * N_COLS + cols, mask=cols < N_COLS, other=-float("inf"))
            x = _scale_row(x - tl.max(x, axis=0), SCALE)
            e = tl.exp(x)
            tl.store(y_ptr + row * N_COLS + cols, e / tl.sum(e, axis=0), mask=cols < N_COLS)


@pytest.mark.parametrize("rows,cols", [(1, 5), (9, 64), (7, 100), (3, 700)])
def test_helpers_choose_the_kernels_constants(rows: int, cols: int) -> None:
    x = torch.randn(rows, cols)
    y = torch.full_like(x, float("nan"))
    per = 4 if cols <= 64 else 1
    _softmax_rows[(cdiv(rows, per),)](x, y, rows, N_COLS=cols, SCALE=0.5)
    torch.testing.assert_close(y, torch.softmax(x * 0.5, dim=1), rtol=1e-5, atol=1e-6)


@constexpr_function
def _fails(n: int) -> int:
    return {1: 2}[n]


@jit
def _calls_failing_helper(y_ptr, N: tl.constexpr):
    tl.store(y_ptr, _fails(N))


@jit
def _helper_of_a_tensor(y_ptr, N: tl.constexpr):
    tl.store(y_ptr, _num_warps_for(tl.program_id(0)))


def test_a_helper_that_raises_or_gets_a_runtime_value_is_a_located_error() -> None:
    y = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(CompilationError, match=r"_fails\(\) raised KeyError") as info:
        _calls_failing_helper[(1,)](y, N=3)
    assert info.value.lineno is not None and "_fails(N)" in str(info.value)
    with pytest.raises(CompilationError, match="arguments must be compile-time values"):
        _helper_of_a_tensor[(1,)](y, N=3)
    _calls_failing_helper[(1,)](y, N=1)
    assert y.item() == 2


def test_the_cache_key_follows_a_helpers_code() -> None:
    def a(n: int) -> int:
        return n + 1

    def b(n: int) -> int:
        return n + 2

    assert value_token(constexpr_function(a)) != value_token(constexpr_function(b))
    assert value_token(tl.constexpr(a)) == value_token(constexpr_function(a))


def test_real_tritons_helpers_in_a_python_kernel() -> None:
    triton = pytest.importorskip("triton")
    if "anvil" in getattr(triton, "__version__", ""):
        pytest.skip("the stand-in is installed in this process")
    import triton.language as ttl

    @triton.constexpr_function
    def blocks(n: int) -> int:
        return triton.cdiv(n, 16)

    @triton.jit
    def k(y_ptr, N: ttl.constexpr):
        ttl.store(y_ptr, triton.next_power_of_2(N))
        ttl.store(y_ptr + 1, blocks(N))

    y = torch.zeros(2, dtype=torch.int32)
    compiler.jit(k)[(1,)](y, N=33)
    assert y.tolist() == [64, 3]


# ---------------------------------------------------------------- helpers of kernel source text
SOURCE = """
import triton
import triton.language as tl


@triton.constexpr_function
def log2_floor(n):
    r = 0
    while n > 1:
        n //= 2
        r += 1
    return r


@triton.constexpr_function
def pick(n, choices):
    for c in choices:
        if c < 0:
            continue
        if c >= n:
            return c
    return choices[-1]


@tl.constexpr
def split_half(x):
    return (x // 2, x - x // 2)


@triton.jit
def scale(x, S: tl.constexpr):
    return x * S.value


@triton.jit
def kernel(x_ptr, y_ptr, n, N: tl.constexpr):
    BLOCK: tl.constexpr = pick(N, (-1, 16, 64, 256, 1024))
    tl.static_assert(BLOCK == triton.next_power_of_2(max(N, 16)) or BLOCK == 1024)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    LO, HI = split_half(log2_floor(N) + 1)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, scale(x, LO * 10 + HI), mask=offs < n)
"""


@pytest.mark.parametrize("n", [5, 50, 300, 5000])
def test_helpers_of_source_text_are_evaluated(n: int) -> None:
    k = compiler.compile_source(SOURCE, "kernel")
    x = torch.randn(n)
    y = torch.full_like(x, float("nan"))
    bits = n.bit_length()  # log2_floor(n) + 1
    block = next(c for c in (16, 64, 256, 1024) if c >= n) if n <= 1024 else 1024
    k[(cdiv(n, block),)](x, y, n, N=n)
    torch.testing.assert_close(y, x * ((bits // 2) * 10 + (bits - bits // 2)))


def test_source_text_helpers_are_not_kernels() -> None:
    with pytest.raises(compiler.ArgumentError, match="no @jit function named 'log2_floor'"):
        compiler.compile_source(SOURCE, "log2_floor")


def _compile_text(body: str) -> Any:
    text = SOURCE.replace("    BLOCK: tl.constexpr = pick(N, (-1, 16, 64, 256, 1024))",
                          f"    {body}\n    BLOCK: tl.constexpr = 16")
    return compiler.compile_source(text, "kernel").compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                                                          {"N": 8}, target="cpu")


def test_a_source_helper_given_a_runtime_value_is_refused() -> None:
    with pytest.raises(CompilationError, match="arguments must be compile-time values"):
        _compile_text("v = log2_floor(n)")
