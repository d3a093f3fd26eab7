"""Branches settled at compile time do not count: a loop whose body reassigns a name, breaks or
continues only under an `if` on a false constexpr compiles as if that branch were not there
(Triton drops such branches before it looks at the loop)."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import jit


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# ---------------------------------------------------------------- a gated running sum over row blocks
@jit
def _gated_rows(x_ptr, g_ptr, b_ptr, y_ptr, n_rows, n_cols, stride, USE_G: tl.constexpr, MODE: tl.constexpr,
                BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < n_cols
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    g_last = None  # only a gated kernel has one; reassigned below under `if USE_G:`
    bias = None  # likewise under `if b_ptr is not None:`, dead when the kernel is given b_ptr=None
    for r in range(n_rows):
        x = tl.load(x_ptr + r * stride + cols, mask=cmask, other=0.0).to(tl.float32)
        if USE_G:
            g_last = tl.load(g_ptr + r)
            acc = acc * tl.exp(g_last)
        if b_ptr is not None:
            bias = tl.load(b_ptr + cols, mask=cmask, other=0.0)
            x += bias
        elif MODE == "abs":
            x = tl.abs(x)
        elif MODE == "neg":
            x = -x
        else:
            bias = 0  # a string MODE that matches nothing: dead too, when MODE is one of the above
        acc += x
    tl.store(y_ptr + cols, acc, mask=cmask)


def _gated_rows_ref(x: torch.Tensor, g: torch.Tensor | None, b: torch.Tensor | None, mode: str) -> torch.Tensor:
    acc = torch.zeros(x.shape[1], dtype=torch.float64)
    for r in range(x.shape[0]):
        xr = x[r].double()
        if g is not None:
            acc = acc * torch.exp(g[r].double())
        if b is not None:
            xr = xr + b.double()
        elif mode == "abs":
            xr = xr.abs()
        elif mode == "neg":
            xr = -xr
        acc = acc + xr
    return acc.float()


@pytest.mark.parametrize("shape", [(1, 5), (7, 33), (12, 100)])
@pytest.mark.parametrize("mode", ["abs", "neg"])
def test_reassignment_under_a_false_constexpr_does_not_make_a_loop_variable(shape: tuple[int, int],
                                                                           mode: str) -> None:
    rows, cols = shape
    x = torch.randn(rows, cols)
    y = torch.full((cols,), float("nan"))
    block = 32
    _gated_rows[(_cdiv(cols, block),)](x, None, None, y, rows, cols, x.stride(0), USE_G=False, MODE=mode,
                                       BLOCK_C=block)
    torch.testing.assert_close(y, _gated_rows_ref(x, None, None, mode), rtol=1e-5, atol=1e-5)


@jit
def _gated_rows_live(x_ptr, g_ptr, y_ptr, n_rows, n_cols, stride, USE_G: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < n_cols
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    g_last = 0.0
    for r in range(n_rows):
        if USE_G:
            g_last = tl.load(g_ptr + r)
            acc = acc * tl.exp(g_last)
        acc += tl.load(x_ptr + r * stride + cols, mask=cmask, other=0.0)
    tl.store(y_ptr + cols, acc + g_last, mask=cmask)


@pytest.mark.parametrize("use_g", [False, True])
def test_the_same_pattern_with_the_branch_live_carries_the_value(use_g: bool) -> None:
    rows, cols = 9, 45
    x, g = torch.randn(rows, cols), torch.rand(rows) * 0.2 - 0.1
    y = torch.full((cols,), float("nan"))
    _gated_rows_live[(2,)](x, g, y, rows, cols, x.stride(0), USE_G=use_g, BLOCK_C=32)
    expect = _gated_rows_ref(x, g if use_g else None, None, "") + (g[-1] if use_g else 0.0)
    torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- break / continue under a constexpr
@jit
def _first_blocks(x_ptr, y_ptr, n, NUM_BLOCKS: tl.constexpr, EARLY_EXIT: tl.constexpr, SKIP_ODD: tl.constexpr,
                  BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(NUM_BLOCKS):
        if EARLY_EXIT and not SKIP_ODD:
            break
        if SKIP_ODD or (EARLY_EXIT and i > 100):
            continue
        offs = i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + tl.arange(0, BLOCK), acc)


@pytest.mark.parametrize("n", [1, 50, 127])
def test_break_and_continue_under_false_constexprs_in_a_static_range(n: int) -> None:
    x = torch.randn(n)
    y = torch.full((32,), float("nan"))
    _first_blocks[(1,)](x, y, n, NUM_BLOCKS=4, EARLY_EXIT=False, SKIP_ODD=False, BLOCK=32)
    padded = torch.zeros(128)
    padded[:n] = x
    torch.testing.assert_close(y, padded.view(4, 32).sum(0), rtol=1e-5, atol=1e-5)


@jit
def _runtime_loop_flags(x_ptr, y_ptr, n, STOP_AT_NEGATIVE: tl.constexpr):
    total = 0.0
    for i in range(n):
        v = tl.load(x_ptr + i)
        if STOP_AT_NEGATIVE:  # noqa: SIM102 - a compile-time choice around a runtime branch
            if v < 0:
                break
        total += v
    tl.store(y_ptr, total)


@pytest.mark.parametrize("stop", [False, True])
def test_a_break_under_a_constexpr_in_a_runtime_loop(stop: bool) -> None:
    x = torch.randn(40)
    y = torch.full((1,), float("nan"))
    _runtime_loop_flags[(1,)](x, y, 40, STOP_AT_NEGATIVE=stop)
    if stop:
        neg = (x < 0).nonzero()
        end = int(neg[0]) if len(neg) else 40
        expect = x[:end].sum()
    else:
        expect = x.sum()
    torch.testing.assert_close(y[0], expect, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- while on a constexpr, stale names
@jit
def _while_flag(x_ptr, y_ptr, n, REFINE: tl.constexpr):
    scale = None
    i = 0
    while REFINE and i < n:
        scale = tl.load(x_ptr + i)
        i += 1
    v = tl.load(x_ptr)
    if scale is not None:
        v = v * scale
    tl.store(y_ptr, v)


def test_while_on_a_false_constexpr_generates_nothing() -> None:
    x = torch.randn(8)
    y = torch.full((1,), float("nan"))
    _while_flag[(1,)](x, y, 8, REFINE=False)
    assert y.item() == x[0].item()


@jit
def _stale_loop_name(x_ptr, y_ptr, n):
    i = 3  # a compile-time 3 before the loop; inside it `i` is the loop's own, changing value
    acc = 0.0
    for i in range(n):
        if i == 3:
            acc += tl.load(x_ptr + i)
    flag = 0
    for _ in range(n):
        if flag:  # reassigned by the loop: not settled by its value before the loop
            acc += 1.0
        flag = 1
    tl.store(y_ptr, acc)


@pytest.mark.parametrize("n", [2, 4, 9])
def test_names_the_loop_changes_are_not_settled_by_their_value_before_it(n: int) -> None:
    x = torch.randn(10)
    y = torch.full((1,), float("nan"))
    _stale_loop_name[(1,)](x, y, n)
    expect = (x[3].item() if n > 3 else 0.0) + (n - 1)
    assert y.item() == pytest.approx(expect, rel=1e-6)


# ---------------------------------------------------------------- return under a constexpr in a loop
@jit
def _sum_until_negative(x_ptr, y_ptr, n, STRICT: tl.constexpr):
    acc = 0.0
    for i in range(n):
        v = tl.load(x_ptr + i)
        if v < 0:  # noqa: SIM102 - a runtime branch around a compile-time one
            if STRICT:  # a kernel that gives up on bad input; never generated when STRICT is false
                return
        acc += v
    tl.store(y_ptr, acc)


def test_a_return_under_a_false_constexpr_inside_a_loop_is_dead() -> None:
    x = torch.randn(33)
    y = torch.full((1,), float("nan"))
    _sum_until_negative[(1,)](x, y, 33, STRICT=False)
    torch.testing.assert_close(y[0], x.sum(), rtol=1e-5, atol=1e-5)
