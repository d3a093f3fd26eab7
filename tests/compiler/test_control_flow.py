"""Runtime control flow: for/while with loop-carried tiles, if/else merges, break/continue, early return."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import jit


@jit
def _while_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    i = 0
    while i < n:
        acc += tl.load(x_ptr + i * BLOCK + offs)
        i += 1
    tl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("n", [0, 1, 7])
def test_while_loop_carries_a_tile(n: int) -> None:
    x = torch.randn(max(n, 1), 32)
    out = torch.full((32,), float("nan"))
    _while_sum[(1,)](x, out, n, BLOCK=32)
    torch.testing.assert_close(out, x[:n].sum(0) if n else torch.zeros(32))


@jit
def _break_continue(out_ptr, n):
    total = 0
    for j in range(n):
        if j == 7:
            break
        if j % 2 == 0:
            continue
        total += j
    k = 0
    count = 0
    while True:
        k += 3
        if k > 20:
            break
        count += 1
    tl.store(out_ptr, total)
    tl.store(out_ptr + 1, count)


@pytest.mark.parametrize("n", [0, 4, 10])
def test_break_and_continue(n: int) -> None:
    out = torch.full((2,), -1, dtype=torch.int32)
    _break_continue[(1,)](out, n)
    expect = sum(j for j in range(min(n, 7)) if j % 2 == 1)
    assert out.tolist() == [expect, 6]


@jit
def _early_return(x_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        return
    tl.store(x_ptr + pid, pid * 2.0)


def test_early_return() -> None:
    y = torch.full((10,), -1.0)
    _early_return[(16,)](y, 10)
    assert y.tolist() == [2.0 * i for i in range(10)]


@jit
def _if_merge(x_ptr, out_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if flag > 0:
        y = x * 2
        s = 1.0
    else:
        y = x - 1
        s = 2.0
    tl.store(out_ptr + offs, y + s)


@pytest.mark.parametrize("flag", [0, 1])
def test_if_else_merges_tiles_and_scalars(flag: int) -> None:
    x = torch.randn(64)
    out = torch.full((64,), float("nan"))
    _if_merge[(1,)](x, out, flag, BLOCK=64)
    torch.testing.assert_close(out, x * 2 + 1 if flag else x - 1 + 2)


@jit
def _nested(out_ptr, n, m):
    acc = 0
    for i in range(n):
        for j in range(i, m, 2):
            acc += i * j
    tl.store(out_ptr, acc)


def test_nested_loops_with_runtime_bounds_and_steps() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    _nested[(1,)](out, 5, 9)
    assert out.item() == sum(i * j for i in range(5) for j in range(i, 9, 2))


@jit
def _negative_step(out_ptr, n):
    acc = 0
    for i in range(n, 0, -1):
        acc = acc * 2 + i
    tl.store(out_ptr, acc)


def test_negative_step_range() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    _negative_step[(1,)](out, 5)
    acc = 0
    for i in range(5, 0, -1):
        acc = acc * 2 + i
    assert out.item() == acc


@jit
def _static(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in tl.static_range(4):
        if i % 2 == 0:
            acc += i
    for v in (10, 20):
        acc += v
    tl.store(out_ptr + offs, acc)


def test_static_range_and_constexpr_if_fold() -> None:
    out = torch.zeros(8, dtype=torch.int32)
    k = _static[(1,)](out, BLOCK=8)
    assert out.tolist() == [32] * 8
    assert " for " not in k.asm["tir"] and " if " not in k.asm["tir"]


@jit
def _swap(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    for _ in range(n):
        a, b = b, a + b
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + BLOCK + offs, b)


def test_loop_carried_swap_does_not_alias() -> None:
    a, b = torch.randn(16), torch.randn(16)
    out = torch.empty(32)
    _swap[(1,)](a, b, out, 5, BLOCK=16)
    x, y = a.clone(), b.clone()
    for _ in range(5):
        x, y = y, x + y
    torch.testing.assert_close(out, torch.cat([x, y]))
