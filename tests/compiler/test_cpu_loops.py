"""CPU backend: the loops emitted for tiles. A loop nest over power-of-two dims whose innermost
loop would be short is one loop over the flat index (each index its bits); a reduction over a
short axis chains its combines per result element, straight-line, and loop_carry's short loops
are straight-line too. Results against torch on strided, broadcast and transposed operands
(outputs poisoned), and the loop structure in the LLVM IR."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import compiler.backends.cpu.engine as cpu_engine
import compiler.language as tl
from compiler import jit


@jit
def tile3(x_ptr, y_ptr, out_ptr, sx0, sx1, sx2, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """out[a, b, c] = x[a, b, c] (strided) * y[b] + x[c, b, a] (the transposed read, where A == C)."""
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * sx0 + b * sx1 + c * sx2)
    xt = tl.load(x_ptr + c * sx0 + b * sx1 + a * sx2)
    y = tl.load(y_ptr + b)
    tl.store(out_ptr + (a * B + b) * C + c, x * y + xt)


@pytest.mark.parametrize("shape", [(2, 4, 2), (4, 8, 4), (8, 2, 8), (1, 4, 1), (4, 1, 4), (2, 2, 2), (8, 16, 8)])
def test_tiles_of_short_dims_against_torch(shape: tuple[int, int, int]) -> None:
    A, B, C = shape
    base = torch.randn(A + 3, B + 1, C + 2)  # strided views: none of the strides is the tile's
    x = base[:A, :B, :C]
    y = torch.randn(B)
    out = torch.full((A, B, C), float("nan"))
    tile3[(1,)](x, y, out, *x.stride(), A=A, B=B, C=C)
    torch.testing.assert_close(out, x * y[None, :, None] + x.permute(2, 1, 0), rtol=0, atol=0)


@jit
def reduce3(x_ptr, sum_ptr, max_ptr, arg_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
            AXIS: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + (a * B + b) * C + c)
    s = tl.sum(x, axis=AXIS)
    m = tl.max(x, axis=AXIS)
    i = tl.argmax(x, axis=AXIS)
    if AXIS == 0:
        o = tl.arange(0, B)[:, None] * C + tl.arange(0, C)[None, :]
    elif AXIS == 1:
        o = tl.arange(0, A)[:, None] * C + tl.arange(0, C)[None, :]
    else:
        o = tl.arange(0, A)[:, None] * B + tl.arange(0, B)[None, :]
    tl.store(sum_ptr + o, s)
    tl.store(max_ptr + o, m)
    tl.store(arg_ptr + o, i)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 4, 8), (8, 2, 4), (4, 8, 2), (16, 4, 8), (4, 16, 4), (8, 4, 16)])
def test_reductions_over_short_and_long_axes(shape: tuple[int, int, int], axis: int) -> None:
    """Axes of 2-8 elements (straight-line chains) and 16 (the loop), the axis first, middle or
    last (the sums may be reassociated: fp32 rounding against a sequential sum)."""
    x = torch.randn(shape)
    x.view(-1)[torch.randperm(x.numel())[:3]] = x.abs().max() + 1  # ties for argmax: the first wins
    out_shape = tuple(d for k, d in enumerate(shape) if k != axis)
    s, m = torch.full(out_shape, float("nan")), torch.full(out_shape, float("nan"))
    i = torch.full(out_shape, -7, dtype=torch.int32)
    reduce3[(1,)](x, s, m, i, A=shape[0], B=shape[1], C=shape[2], AXIS=axis)
    seq = x.select(axis, 0).clone()
    for j in range(1, shape[axis]):
        seq += x.select(axis, j)
    torch.testing.assert_close(s, seq, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(m, x.amax(axis), rtol=0, atol=0)
    xd = x.double()
    first = (xd == xd.amax(axis, keepdim=True)).to(torch.int64)
    want = (first.cumsum(axis) == 0).sum(axis)  # index of the first maximum
    torch.testing.assert_close(i.long(), want, rtol=0, atol=0)


def _loops(llir: str) -> int:
    return len(re.findall(r"^(?:loop|red)(?:\.\d+)?:", llir, flags=re.M))


def _trips(llir: str) -> list[int]:
    return [int(n) for n in re.findall(r"icmp ult i64 %\S+, (\d+)\n", llir)]


def test_short_nests_are_flat_loops_and_short_reductions_straight_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LLVM IR as lowered (before LLVM's passes), of specializations no other test compiles
    (the disk cache off)."""
    monkeypatch.setenv("ANVIL_CACHE", "0")
    texts: list[str] = []
    optimize = cpu_engine.optimize

    def keep(text: str) -> Any:
        texts.append(text)
        return optimize(text)

    monkeypatch.setattr(cpu_engine, "optimize", keep)

    def lowered(kernel: Any, sig: dict[str, str], consts: dict[str, int]) -> str:
        texts.clear()
        kernel.compile(sig, consts)
        return max(texts, key=len)

    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "sx0": "i32", "sx1": "i32", "sx2": "i32"}
    small = lowered(tile3, sig, {"A": 2, "B": 8, "C": 8})
    wide = lowered(tile3, sig, {"A": 2, "B": 8, "C": 16})
    # [2, 8, 8] tiles: each nest one loop over 128 (y's [8] its own loop); innermost 16: nests
    assert set(_trips(small)) == {128, 8}
    assert {2, 8, 16} <= set(_trips(wide)) and 256 not in _trips(wide)
    rsig = {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32", "arg_ptr": "*i32"}
    short = lowered(reduce3, rsig, {"A": 2, "B": 8, "C": 4, "AXIS": 1})
    long = lowered(reduce3, rsig, {"A": 2, "B": 16, "C": 4, "AXIS": 1})
    # the axis of 8: chains per result element, no loop over its last 7 elements; of 16: loops of 15
    assert 7 not in _trips(short) and 15 in _trips(long)
